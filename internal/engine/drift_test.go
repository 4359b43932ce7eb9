package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// sglangTPDP writes a current SGLang decode page with DP=2 and TP=2:
// every TP rank repeats its DP rank's values.
func sglangTPDP(prefix string) string {
	var b strings.Builder
	gauge := func(name string, perDP [2]string) {
		fmt.Fprintf(&b, "# TYPE %s%s gauge\n", prefix, name)
		for dp := 0; dp < 2; dp++ {
			for tp := 0; tp < 2; tp++ {
				fmt.Fprintf(&b, "%s%s{dp_rank=\"%d\",engine_type=\"decode\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"%d\"} %s\n", prefix, name, dp, tp, perDP[dp])
			}
		}
	}
	gauge("max_total_num_tokens", [2]string{"1290752", "1290752"})
	gauge("kv_used_tokens", [2]string{"10000", "2034"})
	gauge("kv_available_tokens", [2]string{"1280252", "1288718"})
	gauge("kv_evictable_tokens", [2]string{"500", "0"})
	gauge("num_running_reqs", [2]string{"2", "1"})
	gauge("num_decode_prealloc_queue_reqs", [2]string{"1", "0"})
	gauge("num_decode_transfer_queue_reqs", [2]string{"0", "3"})
	fmt.Fprintf(&b, "# TYPE %snum_retracted_requests counter\n", prefix)
	for dp := 0; dp < 2; dp++ {
		for tp := 0; tp < 2; tp++ {
			fmt.Fprintf(&b, "%snum_retracted_requests_total{dp_rank=\"%d\",engine_type=\"decode\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"%d\"} %d\n", prefix, dp, tp, 4+dp)
		}
	}
	return b.String()
}

func TestVersionDrift(t *testing.T) {
	sgCurrent := summary{Engine: "sglang", Generation: "current", Model: "m", Role: kv.RoleDecode, Ranks: 4,
		Signals: kv.Signals{
			// TP duplicates collapsed, DP ranks summed: 2 × 1,290,752; 10,000 + 2,034.
			Capacity: dir(2581504), Used: dir(12034), Evictable: dir(500),
			// Recomputed from the sums, not averaged.
			UsageRatio: der(12034.0 / 2581504),
			Running:    dir(3), Queued: kv.Queues{Prealloc: dir(1), Transfer: dir(3)},
			Counters: kv.Counters{Preemptions: dir(9)},
		},
		// DP 0 at 10,000/1,290,752, DP 1 at 2,034/1,290,752.
		Spread: der(7966.0 / 1290752)}
	vllmCC := func(labels string) string {
		return "vllm:cache_config_info{" + labels + "} 1.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n"
	}
	tests := []struct {
		name, body, contentType string
		want                    summary
	}{
		{name: "sglang current TP=2 DP=2, colon prefix", body: sglangTPDP("sglang:"), want: sgCurrent},
		{name: "sglang current, underscore prefix", body: sglangTPDP("sglang_"), want: sgCurrent},
		{
			name: "sglang openmetrics: _total counters, _created ignored", contentType: "application/openmetrics-text; version=1.0.0",
			body: "# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total{model_name=\"m\"} 5.0\nsglang:prompt_tokens_created{model_name=\"m\"} 1.7e+09\n" +
				"# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 1.0\n# EOF\n",
			want: summary{Engine: "sglang", Generation: "legacy", Model: "m", Ranks: 1,
				Signals: kv.Signals{Running: dir(1), Counters: kv.Counters{PromptTokens: dir(5)}}},
		},
		{
			name: "sglang legacy: num_used_tokens over max_total_num_tokens, not the rounded token_usage",
			body: "sglang:max_total_num_tokens{engine_type=\"prefill\",model_name=\"m\"} 2581504\nsglang:num_used_tokens{engine_type=\"prefill\",model_name=\"m\"} 310112\nsglang:token_usage{engine_type=\"prefill\",model_name=\"m\"} 0.12\n" +
				"sglang:num_prefill_prealloc_queue_reqs{engine_type=\"prefill\",model_name=\"m\"} 4\n",
			want: summary{Engine: "sglang", Generation: "legacy", Model: "m", Role: kv.RolePrefill, Ranks: 1,
				Signals: kv.Signals{Capacity: dir(2581504), Used: dir(310112), UsageRatio: der(310112.0 / 2581504),
					Queued: kv.Queues{Bootstrap: dir(4)}},
				Spread: der(0)},
		},
		{
			name: "sglang PD prefill: bootstrap (new name) wins over prealloc (old name); inflight apart",
			body: "sglang:num_prefill_bootstrap_queue_reqs{engine_type=\"prefill\"} 3\nsglang:num_prefill_prealloc_queue_reqs{engine_type=\"prefill\"} 9\nsglang:num_prefill_inflight_queue_reqs{engine_type=\"prefill\"} 1\nsglang:num_queue_reqs{engine_type=\"prefill\"} 2\n",
			want: summary{Engine: "sglang", Generation: "legacy", Role: kv.RolePrefill, Ranks: 1,
				Signals: kv.Signals{Queued: kv.Queues{Waiting: dir(2), Bootstrap: dir(3), Inflight: dir(1)}},
				// 3 under the new name, 9 under the old: two dialects disagree.
				Warnings: []string{kv.WarnMixedDialect}},
		},
		{
			name: "sglang PD decode: pending pre-allocation is demand, not a reservation",
			body: "sglang:max_total_num_tokens{engine_type=\"decode\"} 1000\nsglang:kv_used_tokens{engine_type=\"decode\"} 100\nsglang:pending_prealloc_token_usage{engine_type=\"decode\"} 0.25\n",
			want: summary{Engine: "sglang", Generation: "current", Role: kv.RoleDecode, Ranks: 1,
				// 0.25 × 1000 tokens wanted by the pre-allocation queue.
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(100), UsageRatio: der(0.1), Demand: der(250), DemandRatio: dir(0.25)},
				Spread:  der(0)},
		},
		{
			name: "sglang priority scheduling: totals only",
			body: "sglang:num_queue_reqs{priority=\"\"} 3\nsglang:num_queue_reqs{priority=\"0\"} 1\nsglang:num_queue_reqs{priority=\"1\"} 2\nsglang:num_running_reqs 4\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(4), Queued: kv.Queues{Waiting: dir(3)}}},
		},
		{
			name: "sglang NaN and Inf are unavailable, not 0",
			body: "sglang:max_total_num_tokens +Inf\nsglang:kv_used_tokens NaN\nsglang:num_running_reqs -Inf\nsglang:num_queue_reqs 0\n",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Queued: kv.Queues{Waiting: dir(0)}}},
		},
		{
			name: "sglang prefix hit from prefill_effective_tokens (newest)",
			body: "sglang:num_running_reqs 0\nsglang:prefill_effective_tokens_total{mode=\"device_hit\"} 300\nsglang:prefill_effective_tokens_total{mode=\"host_hit\"} 100\nsglang:prefill_effective_tokens_total{mode=\"input\"} 600\nsglang:cached_tokens_total 5\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(0), Counters: kv.Counters{PrefixHitTokens: dir(400), PrefixQueryTokens: dir(1000)}},
				// Of the 400 hit tokens, the host tier served 100.
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: dir(100)}}},
		},
		{
			name: "sglang prefix hit from realtime_tokens (mid)",
			body: "sglang:num_running_reqs 0\nsglang:realtime_tokens_total{mode=\"prefill_cache\"} 250\nsglang:realtime_tokens_total{mode=\"prefill_compute\"} 750\nsglang:realtime_tokens_total{mode=\"decode\"} 9999\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(0), Counters: kv.Counters{PrefixHitTokens: dir(250), PrefixQueryTokens: dir(1000)}}},
		},
		{
			name: "vllm V1: engine label = DP rank, capacity from cache_config_info per engine",
			body: `vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1.0
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="1000"} 1.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25
vllm:num_requests_running{engine="0",model_name="m"} 4
vllm:num_requests_running{engine="1",model_name="m"} 2
vllm:num_requests_waiting{engine="0",model_name="m"} 1
vllm:num_requests_waiting{engine="1",model_name="m"} 0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 30
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 100
vllm:prefix_cache_queries_created{engine="1",model_name="m"} 1.7e9
vllm:num_preemptions_total{engine="0",model_name="m"} 2
`,
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 2,
				Signals: kv.Signals{
					// 1000 blocks × 16 per engine; used 0.5 × 16,000 + 0.25 × 16,000.
					Capacity: der(32000), Used: der(12000), UsageRatio: der(0.375),
					Running: dir(6), Queued: kv.Queues{Waiting: dir(1)},
					// Only engine 0 reports preemptions: a partial sum (issue 11).
					Counters: kv.Counters{PrefixHitTokens: dir(40), PrefixQueryTokens: dir(200), Preemptions: kv.Value{V: 2, Prov: kv.Partial}},
				},
				Spread: der(0.25)},
		},
		{
			name: "vllm cache_config_info: \"None\" tokens fall back to blocks × block_size",
			body: vllmCC(`block_size="16",kv_cache_size_tokens="None",num_gpu_blocks="100",num_gpu_blocks_override="None"`),
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Capacity: der(1600), Used: der(800), UsageRatio: dir(0.5)}, Spread: der(0)},
		},
		{
			name: "vllm cache_config_info: kv_cache_size_tokens read directly",
			body: vllmCC(`block_size="16",kv_cache_size_tokens="50000",num_gpu_blocks="100"`),
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(50000), Used: der(25000), UsageRatio: dir(0.5)}, Spread: der(0)},
		},
		{
			name: "vllm cache_config_info: all \"None\": capacity unavailable",
			body: vllmCC(`block_size="None",kv_cache_size_tokens="None",num_gpu_blocks="None"`),
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.5)}, Spread: der(0)},
		},
		{
			name: "vllm legacy names with engine label",
			body: "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.125\nvllm:gpu_prefix_cache_hits_total{engine=\"0\"} 3\nvllm:gpu_prefix_cache_queries_total{engine=\"0\"} 12\n",
			want: summary{Engine: "vllm", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.125), Counters: kv.Counters{PrefixHitTokens: dir(3), PrefixQueryTokens: dir(12)}},
				Spread:  der(0)},
		},
		{
			name: "smg router: worker health, no KV",
			body: "# TYPE smg_worker_health gauge\nsmg_worker_health{worker=\"http://a:30000\"} 1\nsmg_worker_health{worker=\"http://b:30000\"} 0\n",
			want: summary{Engine: "sgl-router", Generation: "smg", Role: kv.RoleRouter,
				Router: &kv.Router{WorkersHealthy: der(1), WorkersTotal: der(2)}},
		},
		{
			name: "sgl_router (older names)",
			body: "sgl_router_active_workers 3\nsgl_router_requests_total{route=\"/generate\"} 10\n",
			want: summary{Engine: "sgl-router", Generation: "sgl_router", Role: kv.RoleRouter,
				Router: &kv.Router{WorkersTotal: dir(3)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, tt.contentType, nil)
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeadroomExamples checks the worked examples.
func TestHeadroomExamples(t *testing.T) {
	tp8 := func(used string) string {
		var b strings.Builder
		for tp := 0; tp < 8; tp++ {
			fmt.Fprintf(&b, "sglang:max_total_num_tokens{tp_rank=\"%d\"} 2581504\nsglang:kv_used_tokens{tp_rank=\"%d\"} %s\n", tp, tp, used)
		}
		return b.String()
	}
	tests := []struct {
		name, body string
		n          int
		want       kv.Value
	}{
		// 2,581,504 / 524,288 = 4.92.
		{"empty TP=8 server, 512k requests", tp8("0"), 524288, der(4)},
		// (2,581,504 − 310,112) / 8192 = 277.27.
		{"310,112 used, 8k requests", tp8("310112"), 8192, der(277)},
		// DP ranks apart: 1,280,752/8192 = 156.3 and 1,288,718/8192 = 157.3.
		{"DP=2 server, 8k requests", sglangTPDP("sglang:"), 8192, der(313)},
		{"unknown request size", tp8("0"), 0, na},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "", nil)
			if got := s.Headroom(tt.n); !cmp.Equal(got, tt.want, valueCmp) {
				t.Errorf("Headroom(%d) = %+v, want %+v", tt.n, got, tt.want)
			}
		})
	}
}

// TestRouterInFleet: a router adds no KV to the fleet and its own KV
// stays unavailable, not 0.
func TestRouterInFleet(t *testing.T) {
	router := normalizeBody(t, "smg_worker_health{worker=\"a\"} 1\n", "", nil)
	if router.Capacity.OK() || router.Used.OK() || router.UsageRatio.OK() {
		t.Fatalf("router KV = %+v / %+v / %+v, want unavailable", router.Used, router.Capacity, router.UsageRatio)
	}
	server := normalizeBody(t, sglangTPDP("sglang:"), "", nil)
	ps := kv.PoolsOf([]kv.Member{{Key: kv.PoolKey{Role: router.Role}, Server: &router},
		{Key: kv.PoolKey{Role: kv.RoleUnified}, Server: &server}}, nil)
	if len(ps) != 1 || ps[0].Servers != 1 || !cmp.Equal(ps[0].Capacity, dir(2581504), valueCmp) || !cmp.Equal(ps[0].Used, dir(12034), valueCmp) {
		t.Errorf("PoolsOf = %+v, want 1 pool of 1 server, 12,034 of 2,581,504", ps)
	}
}
