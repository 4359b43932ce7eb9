package sim

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDynamoWorkerPage: the worker's page in each dialect against the
// truth. By hand: 131,072 tokens per DP rank in blocks of 16 are 8,192
// blocks, and vLLM's num_gpu_blocks counts the null block: 8,193.
func TestDynamoWorkerPage(t *testing.T) {
	c := startCluster(t, "dynamo")
	ep := endpoint(t, c, "worker-0")
	c.Advance(2 * time.Minute) // the end of a burst
	for _, tc := range []struct {
		version string
		present []string
		absent  []string
	}{
		{VersionCurrent, []string{"dynamo_component_total_blocks", "dynamo_component_gpu_cache_usage_percent", "dynamo_component_model_load_time_seconds"},
			[]string{"dynamo_component_kvstats_active_blocks", "dynamo_component_kvstats_total_blocks", "dynamo_component_kvstats_gpu_cache_usage_percent", "dynamo_component_kvstats_gpu_prefix_cache_hit_rate"}},
		{VersionDynamoBefore, []string{"dynamo_component_kvstats_active_blocks", "dynamo_component_kvstats_total_blocks", "dynamo_component_kvstats_gpu_cache_usage_percent", "dynamo_component_kvstats_gpu_prefix_cache_hit_rate"},
			[]string{"dynamo_component_total_blocks", "dynamo_component_gpu_cache_usage_percent", "dynamo_component_model_load_time_seconds"}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			if err := c.SetVersion(ep.Name, tc.version); err != nil {
				t.Fatal(err)
			}
			tr := c.Truth(ep.Name)
			if tr.Dynamo == nil || tr.Running == 0 || tr.Queued == 0 || len(tr.Ranks) != 2 || tr.Ranks[0].UsedTokens == 0 || tr.Ranks[1].UsedTokens == 0 {
				t.Fatalf("truth: running %d, queued %d, %d ranks: want a busy worker with two DP ranks using KV", tr.Running, tr.Queued, len(tr.Ranks))
			}
			if tr.Dynamo.TotalBlocks != 8193 {
				t.Errorf("truth total blocks %d, want 8193", tr.Dynamo.TotalBlocks)
			}
			_, body, err := get(t, ep.URL+ep.MetricsPath)
			if err != nil {
				t.Fatal(err)
			}
			fams := parse(t, body)
			for _, n := range tc.present {
				if fams[n] == nil {
					t.Errorf("%s missing", n)
				}
			}
			for _, n := range tc.absent {
				if fams[n] != nil {
					t.Errorf("%s on the page", n)
				}
			}
			if got := one(t, fams, "dynamo_component_inflight_requests", "dynamo_endpoint", "generate"); got != float64(tr.Running+tr.Queued) {
				t.Errorf("generate inflight = %v, want running %d + queued %d", got, tr.Running, tr.Queued)
			}
			if got := one(t, fams, "dynamo_component_inflight_requests", "dynamo_endpoint", "clear_kv_blocks"); got != 0 {
				t.Errorf("clear_kv_blocks inflight = %v, want 0", got)
			}
			if got, want := one(t, fams, "dynamo_component_requests_total", "dynamo_endpoint", "generate"), tr.Counters.RequestsFinished+int64(tr.Running+tr.Queued); got != float64(want) {
				t.Errorf("generate requests = %v, want %d (finished + in the handler)", got, want)
			}
			if got := one(t, fams, "dynamo_component_uptime_seconds"); got != 120 {
				t.Errorf("uptime = %v, want 120", got)
			}
			ratio := func(r RankTruth) float64 { return float64(r.UsedTokens) / float64(r.CapacityTokens) }
			if tc.version == VersionDynamoBefore {
				// DP rank 0 only: the worker's own data_parallel_rank.
				r := tr.Ranks[0]
				if got := one(t, fams, "dynamo_component_kvstats_total_blocks"); got != 8193 {
					t.Errorf("kvstats total = %v, want 8193", got)
				}
				if got := one(t, fams, "dynamo_component_kvstats_gpu_cache_usage_percent"); got != ratio(r) {
					t.Errorf("kvstats usage = %v, want %v", got, ratio(r))
				}
				// int(num_gpu_blocks × usage): within one block above the used blocks.
				got := one(t, fams, "dynamo_component_kvstats_active_blocks")
				if used := float64(r.UsedTokens / 16); got < used || got > used+1 || got != math.Trunc(got) {
					t.Errorf("kvstats active = %v, want int(8193 × %d/8192) (%d used blocks)", got, r.UsedTokens/16, r.UsedTokens/16)
				}
				return
			}
			for _, r := range tr.Ranks {
				dp := string(rune('0' + r.DPRank))
				if got := one(t, fams, "dynamo_component_total_blocks", "dp_rank", dp); got != 8193 {
					t.Errorf("dp %s total = %v, want 8193", dp, got)
				}
				if got := one(t, fams, "dynamo_component_gpu_cache_usage_percent", "dp_rank", dp); got != ratio(r) {
					t.Errorf("dp %s usage = %v, want %v", dp, got, ratio(r))
				}
			}
		})
	}
}

// TestDynamoUnpublished: before a DP rank's engine has recorded stats (no
// request since start, or since a restart) its gauges hold init_publish's
// 0 blocks and 0.0 usage, in both dialects, and the truth says so.
func TestDynamoUnpublished(t *testing.T) {
	sc, err := ParseScenario("idle.yaml", []byte("servers:\n  - name: w\n    engine: dynamo\n    dp: 2\n    load: {rate: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	tr := c.Truth("w")
	if !slices.Equal(tr.Dynamo.Published, []bool{false, false}) {
		t.Fatalf("published %v, want neither rank", tr.Dynamo.Published)
	}
	for _, tc := range []struct {
		version, want string
	}{
		{VersionCurrent, `dynamo_component_total_blocks{model="meta-llama/Llama-3.1-8B-Instruct",dynamo_component="backend",dp_rank="0"} 0.0
dynamo_component_total_blocks{model="meta-llama/Llama-3.1-8B-Instruct",dynamo_component="backend",dp_rank="1"} 0.0
# HELP dynamo_component_gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0).
# TYPE dynamo_component_gpu_cache_usage_percent gauge
dynamo_component_gpu_cache_usage_percent{model="meta-llama/Llama-3.1-8B-Instruct",dynamo_component="backend",dp_rank="0"} 0.0
dynamo_component_gpu_cache_usage_percent{model="meta-llama/Llama-3.1-8B-Instruct",dynamo_component="backend",dp_rank="1"} 0.0
`},
		{VersionDynamoBefore, `dynamo_component_kvstats_active_blocks{dynamo_component="backend",dynamo_namespace="dynamo"} 0
# HELP dynamo_component_kvstats_gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0)
# TYPE dynamo_component_kvstats_gpu_cache_usage_percent gauge
dynamo_component_kvstats_gpu_cache_usage_percent{dynamo_component="backend",dynamo_namespace="dynamo"} 0
# HELP dynamo_component_kvstats_gpu_prefix_cache_hit_rate GPU prefix cache hit rate as a percentage (0.0-1.0)
# TYPE dynamo_component_kvstats_gpu_prefix_cache_hit_rate gauge
dynamo_component_kvstats_gpu_prefix_cache_hit_rate{dynamo_component="backend",dynamo_namespace="dynamo"} 0
# HELP dynamo_component_kvstats_total_blocks Total number of KV cache blocks available
# TYPE dynamo_component_kvstats_total_blocks gauge
dynamo_component_kvstats_total_blocks{dynamo_component="backend",dynamo_namespace="dynamo"} 0
`},
	} {
		if err := c.SetVersion("w", tc.version); err != nil {
			t.Fatal(err)
		}
		if body := string(c.servers[0].snap.Load().metrics()); !strings.Contains(body, tc.want) {
			t.Errorf("%s page:\n%s\nwant it to hold:\n%s", tc.version, body, tc.want)
		}
	}
}

// TestDynamoMatchesCaptures: every family of Dynamo's own example pages
// (vllm.log: a worker in the kvstats dialect; fe.log: a frontend without
// the KV router) and of the pages written from the current source is on
// the simulator's page of that server and dialect, of the same type and
// with the same label names, unless listed as not simulated; and the
// simulator's page has no family the capture lacks, unless listed as the
// capture's omission (fe.log's frontend ran no KV router; the
// source-written frontend page holds the KV router's part only). A
// worker's byte counters are on neither worker fixture.
func TestDynamoMatchesCaptures(t *testing.T) {
	c := startCluster(t, "dynamo")
	c.Advance(time.Minute)
	for _, tc := range []struct {
		fixture, server, version  string
		notSimulated, notCaptured []string
	}{
		{fixture: "dynamo-docs-metrics_examples-vllm-partial.prom", server: "worker-0", version: VersionDynamoBefore},
		{fixture: "dynamo-src-worker-current-dp2.prom", server: "worker-0", version: VersionCurrent},
		{fixture: "dynamo-docs-metrics_examples-fe.prom", server: "frontend",
			notSimulated: []string{"dynamo_frontend_input_sequence_tokens", "dynamo_frontend_inter_token_latency_seconds", "dynamo_frontend_model_max_num_batched_tokens",
				"dynamo_frontend_output_sequence_tokens", "dynamo_frontend_output_tokens_total", "dynamo_frontend_request_duration_seconds", "dynamo_frontend_time_to_first_token_seconds"},
			notCaptured: []string{"dynamo_frontend_router_queue_pending_isl_tokens", "dynamo_frontend_router_queue_pending_requests",
				"dynamo_frontend_worker_active_decode_blocks", "dynamo_frontend_worker_active_prefill_tokens"}},
		{fixture: "dynamo-src-frontend-kv-router.prom", server: "frontend",
			notCaptured: []string{"dynamo_frontend_disconnected_clients", "dynamo_frontend_model_max_num_seqs", "dynamo_frontend_model_migration_limit",
				"dynamo_frontend_requests_total", "dynamo_frontend_router_queue_pending_isl_tokens"}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(fixtures, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if tc.version != "" {
				if err := c.SetVersion(tc.server, tc.version); err != nil {
					t.Fatal(err)
				}
			}
			srv, err := c.server(tc.server)
			if err != nil {
				t.Fatal(err)
			}
			real, sim := parse(t, raw), parse(t, srv.snap.Load().metrics())
			n := 0
			for name, rf := range real {
				if !strings.HasPrefix(name, "dynamo_") {
					continue
				}
				n++
				sf := sim[name]
				switch {
				case sf == nil && !slices.Contains(tc.notSimulated, name):
					t.Errorf("%s not on the simulator's page", name)
				case sf != nil && slices.Contains(tc.notSimulated, name):
					t.Errorf("%s is listed as not simulated but is on the page; remove it from the list", name)
				case sf != nil && (rf.GetType() != sf.GetType() || !slices.Equal(labelNames(rf), labelNames(sf))):
					t.Errorf("%s is %s %v, the simulator's %s %v", name, rf.GetType(), labelNames(rf), sf.GetType(), labelNames(sf))
				}
			}
			for name := range sim {
				if (real[name] == nil) != slices.Contains(tc.notCaptured, name) {
					t.Errorf("%s: on the capture %v, listed as not captured %v", name, real[name] != nil, slices.Contains(tc.notCaptured, name))
				}
			}
			if n < 4 {
				t.Errorf("%d dynamo_* families on the fixture, want the server's", n)
			}
		})
	}
}

// endpoint is c's endpoint called name.
func endpoint(t *testing.T, c *Cluster, name string) Endpoint {
	t.Helper()
	for _, ep := range c.Endpoints() {
		if ep.Name == name {
			return ep
		}
	}
	t.Fatalf("no endpoint %s", name)
	return Endpoint{}
}

// TestDynamoFrontendPage: the frontend's page against its truth and the
// workers' (every request comes through the frontend), the model card by
// hand: 8,193 blocks (8,192 + vLLM's null block) of 16 tokens, context
// 131,072, 12 sequences.
func TestDynamoFrontendPage(t *testing.T) {
	c := startCluster(t, "dynamo")
	c.Advance(2 * time.Minute) // the end of a burst
	ep := endpoint(t, c, "frontend")
	tr := c.Truth("frontend")
	d := tr.DynamoFrontend
	if d == nil || d.Inflight == 0 || d.Queued == 0 || len(d.Workers) != 4 {
		t.Fatalf("truth %+v: want requests in flight, some without a first token, and 2 workers × 2 DP ranks", d)
	}
	var inflight int
	var finished int64
	for _, w := range []string{"worker-0", "worker-1"} {
		wt := c.Truth(w)
		inflight += wt.Dynamo.Inflight
		finished += wt.Counters.RequestsFinished
	}
	if d.Inflight != inflight || d.Requests != finished {
		t.Errorf("frontend inflight %d, requests %d; the workers hold %d and finished %d", d.Inflight, d.Requests, inflight, finished)
	}
	_, body, err := get(t, ep.URL+ep.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	fams := parse(t, body)
	for _, tc := range []struct {
		family string
		want   float64
	}{
		{"dynamo_frontend_model_total_kv_blocks", 8193},
		{"dynamo_frontend_model_kv_cache_block_size", 16},
		{"dynamo_frontend_model_context_length", 131072},
		{"dynamo_frontend_model_max_num_seqs", 12},
		{"dynamo_frontend_inflight_requests", float64(d.Inflight)},
		{"dynamo_frontend_queued_requests", float64(d.Queued)},
		{"dynamo_frontend_requests_total", float64(d.Requests)},
		{"dynamo_frontend_router_queue_pending_requests", 0},
	} {
		if got := one(t, fams, tc.family); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.family, got, tc.want)
		}
	}
	for _, l := range d.Workers {
		kv := []string{"worker_id", l.WorkerID, "dp_rank", string(rune('0' + l.DPRank)), "worker_type", "decode"}
		if got := one(t, fams, "dynamo_frontend_worker_active_decode_blocks", kv...); got != float64(l.DecodeBlocks) {
			t.Errorf("%s dp %d decode blocks = %v, want %d", l.Worker, l.DPRank, got, l.DecodeBlocks)
		}
		if got := one(t, fams, "dynamo_frontend_worker_active_prefill_tokens", kv...); got != float64(l.PrefillTokens) {
			t.Errorf("%s dp %d prefill tokens = %v, want %d", l.Worker, l.DPRank, got, l.PrefillTokens)
		}
	}
	if got := one(t, fams, "dynamo_frontend_model_total_kv_blocks", "model", "meta-llama/Llama-3.1-8B-Instruct"); got != 8193 {
		t.Errorf("the model card's model label: %v", got)
	}
	if got := one(t, fams, "dynamo_frontend_inflight_requests", "model", "meta-llama/llama-3.1-8b-instruct"); got != float64(d.Inflight) {
		t.Errorf("the request gauges' model label (lower case): %v", got)
	}
}

// TestDynamoFrontendBlocks: the KV router's count worked by hand on three
// requests routed to one DP rank, none admitted yet (blocks of 16, shared
// prefix 1,024 tokens = 64 full blocks): A (group 0, 1,100 tokens) holds
// the prefix's 64 blocks and ⌈76/16⌉ = 5 of its own, B (group 0, 1,030)
// ⌈6/16⌉ = 1 (the prefix counted once), C (no group, 33) ⌈33/16⌉ = 3: 73
// blocks; 1,100 + 1,030 + 33 = 2,163 prompt tokens to prefill. A request
// that came another way is not the frontend's.
func TestDynamoFrontendBlocks(t *testing.T) {
	sc, err := ParseScenario("fe.yaml", []byte("servers:\n  - {name: fe, engine: dynamo-frontend, workers: [w]}\n  - {name: w, engine: dynamo}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	fe, k := c.servers[0], c.servers[1].ranks[0]
	if sc.Servers[1].Load.PrefixTokens != 1024 || k.page != 16 {
		t.Fatalf("prefix %d tokens, page %d: the case is worked for 1,024 and 16", sc.Servers[1].Load.PrefixTokens, k.page)
	}
	k.waiting = []*request{
		{prompt: 1100, group: 0, router: fe},
		{prompt: 1030, group: 0, router: fe},
		{prompt: 33, group: -1, router: fe},
		{prompt: 500, group: -1},
	}
	var tr Truth
	dynamoFrontendTruth(fe, &tr)
	want := DynamoFrontendTruth{Inflight: 3, Queued: 3, Workers: []DynamoWorkerLoad{{Worker: "w", WorkerID: "7587890012398311425", DecodeBlocks: 73, PrefillTokens: 2163}}}
	got := *tr.DynamoFrontend
	got.TotalBlocks, got.BlockSize, got.ContextLength, got.MaxNumSeqs = 0, 0, 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("truth %+v, want %+v", got, want)
	}
}
