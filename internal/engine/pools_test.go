package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TestSGLangPools: hybrid-model pools and HiCache tiers, written from
// SGLang's collector (python/sglang/srt/metrics/collector.py), and the
// primary pool's usage never taken from the max over pools.
func TestSGLangPools(t *testing.T) {
	const r0, r1 = `{dp_rank="0",tp_rank="0"}`, `{dp_rank="1",tp_rank="0"}`
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "dense model: SWA and Mamba gauges at 0 make no pool; token_usage is the full pool's",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.4\nsglang:swa_token_usage 0\nsglang:mamba_usage 0\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.4), Running: dir(1)}, Spread: der(0)},
		},
		{
			name: "hybrid: token_usage is the max over pools and equals SWA's: the full pool's usage is unknown",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.9\nsglang:swa_token_usage 0.9\nsglang:mamba_usage 0.3\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(1)},
				Pools: []kv.Pool{
					{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.9)},
					{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, UsageRatio: dir(0.3)},
				}},
		},
		{
			name: "hybrid: token_usage above both other pools is the full pool's",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.7\nsglang:swa_token_usage 0.5\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.7), Running: dir(1)}, Spread: der(0),
				Pools:   []kv.Pool{{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.5)}}},
		},
		{
			name: "hybrid with token gauges: the primary from kv_used_tokens, untouched by the pools",
			body: "sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 100\nsglang:token_usage 0.8\nsglang:swa_token_usage 0.8\n",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(100), UsageRatio: der(0.1)}, Spread: der(0),
				Pools:   []kv.Pool{{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.8)}}},
		},
		{
			name: "HiCache on two DP ranks: host pools summed, hits by tier",
			body: "sglang:num_running_reqs" + r0 + " 1\nsglang:num_running_reqs" + r1 + " 2\n" +
				"sglang:hicache_host_total_tokens" + r0 + " 4000\nsglang:hicache_host_total_tokens" + r1 + " 4000\n" +
				"sglang:hicache_host_used_tokens" + r0 + " 1000\nsglang:hicache_host_used_tokens" + r1 + " 3000\n" +
				`sglang:cached_tokens_total{cache_source="device"} 700` + "\n" +
				`sglang:cached_tokens_total{cache_source="host"} 200` + "\n" +
				`sglang:cached_tokens_total{cache_source="storage"} 100` + "\n" +
				"sglang:prompt_tokens_total 2000\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(3),
					// Every source: 700 + 200 + 100.
					Counters: kv.Counters{PrefixHitTokens: dir(1000), PrefixQueryTokens: dir(2000), PromptTokens: dir(2000)}},
				Pools: []kv.Pool{
					// 4,000 + 4,000; 1,000 + 3,000; 4,000 / 8,000.
					{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(8000), Used: dir(4000), UsageRatio: der(0.5), HitTokens: dir(200)},
					{Type: kv.PoolFull, Tier: kv.TierRemote, Unit: kv.UnitTokens, HitTokens: dir(100)},
				}},
		},
		{
			name: "HiCache on two DP ranks, one without its used gauge: the host's used is unknown, not one rank's",
			body: "sglang:num_running_reqs" + r0 + " 1\nsglang:num_running_reqs" + r1 + " 2\n" +
				"sglang:hicache_host_total_tokens" + r0 + " 4000\nsglang:hicache_host_total_tokens" + r1 + " 4000\n" +
				"sglang:hicache_host_used_tokens" + r0 + " 1000\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(3)},
				Pools:   []kv.Pool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(8000)}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}
