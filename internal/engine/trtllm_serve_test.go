package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestTRTLLMServe(t *testing.T) {
	const l = `{engine_type="pytorch",model_name="meta-llama/Llama-3.1-8B"}`
	tests := []struct {
		name, body string
		want       summary
		maxRunning kv.Value
	}{
		{
			name: "older collector names: ratio only",
			body: "# TYPE trtllm_kv_cache_utilization gauge\ntrtllm_kv_cache_utilization" + l + " 0.375\n" +
				"# TYPE trtllm_kv_cache_hit_rate gauge\ntrtllm_kv_cache_hit_rate" + l + " 0.9\n" +
				"# TYPE trtllm_num_active_requests gauge\ntrtllm_num_active_requests" + l + " 6\n" +
				"# TYPE trtllm_server_queue_length gauge\ntrtllm_server_queue_length" + l + " 1\n" +
				"# TYPE trtllm_prompt_tokens counter\ntrtllm_prompt_tokens_total" + l + " 10000\n" +
				"trtllm_prompt_tokens_created" + l + " 1.7e9\n" +
				"# TYPE trtllm_prompt_cached_tokens counter\ntrtllm_prompt_cached_tokens_total" + l + " 2500\n",
			want: summary{Engine: "trtllm-serve", Generation: "legacy", Model: "meta-llama/Llama-3.1-8B",
				Signals: kv.Signals{
					UsageRatio: dir(0.375), Running: dir(6), Queued: kv.Queues{Waiting: dir(1)},
					// hit 2,500 of 10,000 prompt tokens; the lifetime hit-rate gauge is not used.
					Counters: kv.Counters{PromptTokens: dir(10000), PrefixHitTokens: dir(2500), PrefixQueryTokens: dir(10000)},
				}},
		},
		{
			name: "current names (those of the GIE protocol too) with block counts",
			body: "trtllm_kv_cache_utilization" + l + " 0.375\ntrtllm_kv_cache_max_blocks" + l + " 2000\n" +
				"trtllm_kv_cache_tokens_per_block" + l + " 32\ntrtllm_num_requests_running" + l + " 3\n" +
				"trtllm_num_requests_waiting" + l + " 2\n",
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "meta-llama/Llama-3.1-8B",
				Signals: kv.Signals{
					// 2,000 blocks × 32 tokens; used 0.375 × 64,000.
					Capacity: der(64000), Used: der(24000), UsageRatio: dir(0.375),
					Running: dir(3), Queued: kv.Queues{Waiting: dir(2)},
				}},
		},
		{
			// Written from tensorrt_llm/metrics/collector.py (@050f80de):
			// the block gauges, the host pool and the per-tier hit counter.
			name: "current collector: used and capacity in tokens, host tier, hits by tier",
			body: "trtllm_kv_cache_utilization" + l + " 0.25\ntrtllm_kv_cache_max_blocks" + l + " 1000\n" +
				"trtllm_kv_cache_used_blocks" + l + " 250\ntrtllm_kv_cache_free_blocks" + l + " 750\n" +
				"trtllm_kv_cache_tokens_per_block" + l + " 32\ntrtllm_kv_cache_host_utilization" + l + " 0.6\n" +
				"trtllm_num_requests_running" + l + " 4\ntrtllm_num_requests_waiting" + l + " 2\n" +
				"trtllm_prompt_tokens_total" + l + " 20000\ntrtllm_prompt_cached_tokens_total" + l + " 5000\n" +
				"trtllm_generation_tokens_total" + l + " 7000\ntrtllm_max_num_active_requests" + l + " 64\n" +
				`trtllm_prompt_cache_hit_tokens_total{cache_level="0",cache_tier="gpu",engine_type="pytorch",model_name="meta-llama/Llama-3.1-8B"} 3000` + "\n" +
				`trtllm_prompt_cache_hit_tokens_total{cache_level="1",cache_tier="host",engine_type="pytorch",model_name="meta-llama/Llama-3.1-8B"} 1500` + "\n" +
				`trtllm_prompt_cache_hit_tokens_total{cache_level="2",cache_tier="disk",engine_type="pytorch",model_name="meta-llama/Llama-3.1-8B"} 500` + "\n",
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "meta-llama/Llama-3.1-8B",
				Signals: kv.Signals{
					// 1,000 × 32 and 250 × 32; the direct ratio kept.
					Capacity: der(32000), Used: der(8000), UsageRatio: dir(0.25),
					Running: dir(4), Queued: kv.Queues{Waiting: dir(2)},
					// Every tier's hits: 5,000 (3,000 + 1,500 + 500).
					Counters: kv.Counters{PromptTokens: dir(20000), PrefixHitTokens: dir(5000), PrefixQueryTokens: dir(20000), GenerationTokens: dir(7000)},
				},
				Pools: []kv.CachePool{
					// Host: a ratio only; its block counts are not exported.
					{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, UsageRatio: dir(0.6), HitTokens: dir(1500), Note: tsHostNote},
					{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitTokens: dir(500)},
				}},
			// maxNumActiveRequests: 64 requests at once.
			maxRunning: dir(64),
		},
		{
			name: "blocks without tokens per block: capacity and used unknown, not blocks",
			body: "trtllm_kv_cache_utilization" + l + " 0.25\ntrtllm_kv_cache_max_blocks" + l + " 1000\ntrtllm_kv_cache_used_blocks" + l + " 250\n" +
				"trtllm_kv_cache_reused_blocks_total" + l + " 30\ntrtllm_kv_cache_missed_blocks_total" + l + " 70\n",
			// The reuse counters are blocks too: no prefix hit in tokens.
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "meta-llama/Llama-3.1-8B",
				Signals: kv.Signals{UsageRatio: dir(0.25)}},
		},
		{
			name: "per-request counters win over the block reuse counters",
			body: "trtllm_kv_cache_tokens_per_block" + l + " 32\ntrtllm_kv_cache_reused_blocks_total" + l + " 30\ntrtllm_kv_cache_missed_blocks_total" + l + " 70\n" +
				"trtllm_prompt_tokens_total" + l + " 4000\ntrtllm_prompt_cached_tokens_total" + l + " 1000\n",
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "meta-llama/Llama-3.1-8B",
				// Tokens from the requests, not 30 × 32 of 100 × 32.
				Signals: kv.Signals{Counters: kv.Counters{PromptTokens: dir(4000), PrefixHitTokens: dir(1000), PrefixQueryTokens: dir(4000)}}},
		},
		{
			name: "reused without missed: no hit ratio from half a pair",
			body: "trtllm_kv_cache_tokens_per_block" + l + " 32\ntrtllm_kv_cache_reused_blocks_total" + l + " 30\ntrtllm_num_requests_running" + l + " 1\n",
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "meta-llama/Llama-3.1-8B", Signals: kv.Signals{Running: dir(1)}},
		},
		{
			name: "free blocks only: used is max − free",
			body: "trtllm_kv_cache_max_blocks" + l + " 1000\ntrtllm_kv_cache_free_blocks" + l + " 750\n" +
				"trtllm_kv_cache_tokens_per_block" + l + " 32\n",
			want: summary{Engine: "trtllm-serve", Generation: "current", Model: "",
				// (1,000 − 750) × 32 of 32,000.
				Signals: kv.Signals{Capacity: der(32000), Used: der(8000), UsageRatio: der(0.25)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.maxRunning, got.MaxRunning, valueCmp); diff != "" {
				t.Errorf("MaxRunning (-want +got):\n%s", diff)
			}
		})
	}
	a, err := NewRegistry().ByName("trtllm-serve")
	if err != nil {
		t.Fatal(err)
	}
	mp, ok := a.(MetricsPath)
	if !ok || mp.MetricsPath() != "/prometheus/metrics" {
		t.Errorf("trtllm-serve MetricsPath = %v, want /prometheus/metrics", a)
	}
	if _, ok := a.(ExtraPaths); ok {
		t.Error("trtllm-serve implements ExtraPaths; it reads one page")
	}
}
