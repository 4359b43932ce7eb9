package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TestSGLangStatePools reads the state pools of hybrid models (hybrid.go):
// a page written from SGLang's current collector for a Qwen3-Next
// deployment (testdata/source, see SOURCES.md there) and smaller pages for
// the SWA pool over DP ranks and the older ratio-only gauges. Every
// expected value is worked out by hand in the comments.
func TestSGLangStatePools(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("testdata", "source", "sglang-hybrid-mamba.prom"))
	if err != nil {
		t.Fatal(err)
	}
	const r0, r1 = `{dp_rank="0",tp_rank="0"}`, `{dp_rank="1",tp_rank="0"}`
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "Qwen3-Next on TP 2: the Mamba pool in slots beside the full pool in tokens; SWA gauges at 0 make no pool",
			body: string(fixture),
			want: summary{Engine: "sglang", Generation: "current", Model: "Qwen/Qwen3-Next-80B-A3B-Instruct", Role: kv.RoleUnified,
				ContextLength: dir(262144), Ranks: 2, Spread: der(0),
				Signals: kv.Signals{
					// The full pool: max_total_num_tokens, kv_used_tokens,
					// kv_evictable_tokens; full_token_usage 126,000 / 524,288,
					// never token_usage (0.58: the Mamba pool's, the max over pools).
					Capacity: dir(524288), Used: dir(126000), Evictable: dir(38000), UsageRatio: dir(0.240325927734375),
					Running: dir(56), Queued: kv.Queues{Waiting: dir(3)},
					Counters: kv.Counters{Preemptions: dir(0)},
				},
				Pools: []kv.CachePool{
					// 20 available + 20 evictable + 56 used = 96 slots;
					// mamba_usage 56 / 96 as SGLang writes it.
					{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, Capacity: der(96), Used: dir(56), UsageRatio: dir(56.0 / 96)},
				}},
		},
		{
			name: "SWA pool on two DP ranks: capacity and used summed, the ratio from them",
			body: "sglang:num_running_reqs" + r0 + " 2\nsglang:num_running_reqs" + r1 + " 3\n" +
				"sglang:swa_token_usage" + r0 + " 0.25\nsglang:swa_token_usage" + r1 + " 0.5\n" +
				"sglang:swa_available_tokens" + r0 + " 600\nsglang:swa_available_tokens" + r1 + " 200\n" +
				"sglang:swa_evictable_tokens" + r0 + " 150\nsglang:swa_evictable_tokens" + r1 + " 300\n" +
				"sglang:swa_used_tokens" + r0 + " 250\nsglang:swa_used_tokens" + r1 + " 500\n" +
				"sglang:mamba_available_tokens" + r0 + " 0\nsglang:mamba_used_tokens" + r0 + " 0\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(5)},
				Pools: []kv.CachePool{
					// Capacity 600+150+250 = 1,000 and 200+300+500 = 1,000;
					// used 250 + 500 = 750 of 2,000 = 0.375.
					{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, Capacity: der(2000), Used: dir(750), UsageRatio: der(0.375)},
				}},
		},
		{
			name: "a rank without one of the three counts: its capacity is unknown, so the pool's is",
			body: "sglang:num_running_reqs" + r0 + " 1\nsglang:num_running_reqs" + r1 + " 1\n" +
				"sglang:mamba_available_tokens" + r0 + " 10\nsglang:mamba_available_tokens" + r1 + " 10\n" +
				"sglang:mamba_evictable_tokens" + r0 + " 0\n" +
				"sglang:mamba_used_tokens" + r0 + " 6\nsglang:mamba_used_tokens" + r1 + " 2\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(2)},
				Pools: []kv.CachePool{
					// Used 6 + 2; capacity 16 on rank 0, unknown on rank 1.
					{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, Used: dir(8)},
				}},
		},
		{
			name: "older SGLang: the ratio gauge alone",
			body: "sglang:num_running_reqs 1\nsglang:mamba_usage 0.3\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(1)},
				Pools:   []kv.CachePool{{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, UsageRatio: dir(0.3)}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(normalizeBody(t, tc.body, "text/plain; version=0.0.4", nil))
			if diff := cmp.Diff(tc.want, got, valueCmp); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
