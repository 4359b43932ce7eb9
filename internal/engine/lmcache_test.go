package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TestLMCacheL1Managers: pages written from LMCache's code and docs (no real
// capture of the multi-process page with its L1 and L2 gauges was found; see
// docs/engines.md), values worked out by hand. One legacy L1 has no l1_tag;
// several L1 managers (docs/source/mp/multi_l1.rst) are summed by l1_tag,
// their usage is Σ used over Σ capacity, never a sum or mean of ratios.
func TestLMCacheL1Managers(t *testing.T) {
	const lookups = `lmcache_mp_lookup_requested_tokens_total{cache_salt="",model_name="m"} 1000.0` + "\n" +
		`lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="m"} 600.0` + "\n" +
		`lmcache_mp_lookup_hit_l1_tokens_total{cache_salt="",model_name="m"} 450.0` + "\n" +
		`lmcache_mp_lookup_hit_l2_tokens_total{cache_salt="",model_name="m"} 150.0` + "\n"
	tests := []struct {
		name, body string
		l1         kv.CachePool
	}{
		{
			name: "one L1",
			body: "lmcache_mp_l1_memory_usage_bytes 2147483648.0\nlmcache_mp_l1_usage_ratio 0.25\n" + lookups,
			// 2 GiB at 0.25: 8 GiB of capacity.
			l1: kv.CachePool{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes,
				Capacity: der(8589934592), Used: dir(2147483648), UsageRatio: dir(0.25), HitTokens: dir(450)},
		},
		{
			name: "DRAM and GDS managers",
			body: `lmcache_mp_l1_memory_usage_bytes{backend="dram",l1_tag="_default"} 6442450944.0` + "\n" +
				`lmcache_mp_l1_memory_usage_bytes{backend="gds",l1_tag="gds"} 8589934592.0` + "\n" +
				`lmcache_mp_l1_usage_ratio{backend="dram",l1_tag="_default"} 0.75` + "\n" +
				`lmcache_mp_l1_usage_ratio{backend="gds",l1_tag="gds"} 0.25` + "\n" + lookups,
			// DRAM 6 GiB of 8 GiB, GDS 8 GiB of 32 GiB: 14 GiB of 40 GiB = 0.35
			// (the mean of the ratios would say 0.5).
			l1: kv.CachePool{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes,
				Capacity: der(42949672960), Used: dir(15032385536), UsageRatio: der(0.35), HitTokens: dir(450)},
		},
		{
			name: "a manager not wired up yet (usage 0)",
			body: `lmcache_mp_l1_memory_usage_bytes{backend="dram",l1_tag="_default"} 6442450944.0` + "\n" +
				`lmcache_mp_l1_memory_usage_bytes{backend="gds",l1_tag="gds"} 0.0` + "\n" +
				`lmcache_mp_l1_usage_ratio{backend="dram",l1_tag="_default"} 0.75` + "\n" +
				`lmcache_mp_l1_usage_ratio{backend="gds",l1_tag="gds"} 0.0` + "\n" + lookups,
			// Used 6 GiB + 0; GDS capacity unknown: no total capacity, no usage.
			l1: kv.CachePool{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes,
				Used: dir(6442450944), HitTokens: dir(450)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "", nil)
			if s.Engine != "lmcache" {
				t.Fatalf("read as %q", s.Engine)
			}
			var l1 *kv.CachePool
			for i := range s.CachePools {
				if s.CachePools[i].Tier == kv.TierLMCacheL1 {
					l1 = &s.CachePools[i]
				}
			}
			if l1 == nil {
				t.Fatalf("no L1 pool among %+v", s.CachePools)
			}
			if diff := cmp.Diff(tt.l1, *l1, valueCmp); diff != "" {
				t.Errorf("L1 (-want +got):\n%s", diff)
			}
			// 600 of 1,000 lookup tokens; the L2 share (150) goes to an
			// unnamed L2 pool: the page has no L2 gauge.
			if diff := cmp.Diff(kv.Counters{PrefixHitTokens: dir(600), PrefixQueryTokens: dir(1000)}, s.Counters, valueCmp); diff != "" {
				t.Errorf("counters (-want +got):\n%s", diff)
			}
		})
	}
}
