package sim

import (
	"math"
	"os"
	"path/filepath"
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
	ep := c.Endpoints()[0]
	c.Advance(90 * time.Second)
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
			if got := one(t, fams, "dynamo_component_uptime_seconds"); got != 90 {
				t.Errorf("uptime = %v, want 90", got)
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

// TestDynamoMatchesCaptures: every dynamo_component_* family of Dynamo's
// own example page (vllm.log, the kvstats dialect) and of the page written
// from the current source is on the simulator's page of that dialect, of
// the same type and with the same label names. Dynamo's byte counters
// (request_bytes_total, response_bytes_total) are not simulated and are
// not on the fixtures either.
func TestDynamoMatchesCaptures(t *testing.T) {
	c := startCluster(t, "dynamo")
	c.Advance(time.Minute)
	for _, tc := range []struct{ fixture, version string }{
		{"dynamo-docs-metrics_examples-vllm-partial.prom", VersionDynamoBefore},
		{"dynamo-src-worker-current-dp2.prom", VersionCurrent},
	} {
		t.Run(tc.version, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(fixtures, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SetVersion("worker", tc.version); err != nil {
				t.Fatal(err)
			}
			real, sim := parse(t, raw), parse(t, c.servers[0].snap.Load().metrics())
			n := 0
			for name, rf := range real {
				if !strings.HasPrefix(name, "dynamo_component_") {
					continue
				}
				n++
				sf := sim[name]
				if sf == nil {
					t.Errorf("%s: %s not on the simulator's page", tc.fixture, name)
					continue
				}
				if rf.GetType() != sf.GetType() || !slices.Equal(labelNames(rf), labelNames(sf)) {
					t.Errorf("%s: %s is %s %v, the simulator's %s %v", tc.fixture, name, rf.GetType(), labelNames(rf), sf.GetType(), labelNames(sf))
				}
			}
			for name := range sim {
				if real[name] == nil {
					t.Errorf("%s: the simulator's %s is not on the page", tc.fixture, name)
				}
			}
			if n < 4 {
				t.Errorf("%s: %d dynamo_component_* families, want the worker's", tc.fixture, n)
			}
		})
	}
}
