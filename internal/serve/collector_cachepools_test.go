package serve

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

func init() {
	for name, prov := range map[string]string{
		signal.KVPoolCapacityTokens.Name: "per pool, as the engine says (direct) or computed (derived); see docs/engines.md per engine",
		signal.KVPoolCapacityBytes.Name:  "per pool (LMCache L1: derived from used bytes / usage ratio)",
		signal.KVPoolUsedTokens.Name:     "per pool, direct or derived",
		signal.KVPoolUsedBytes.Name:      "per pool, direct",
		signal.KVPoolUsageRatio.Name:     "per pool, direct or derived from used / capacity",
		signal.KVPoolHitTokens.Name:      "per cache tier, direct",
		signal.KVPoolHitRate.Name:        "per cache tier, direct (the engine's own window)",
		signal.KVPoolTransferBytes.Name:  "per cache tier and direction, direct (vLLM kv_offload_{load,store}_bytes_total, trtllm-serve kv_cache_{onboard,offload}_bytes_total)",
	} {
		provenanceDoc[name] = prov
	}
}

// TestCollectorPools: every known value of every pool is one series with
// pool_type, tier and pool_name, the unit choosing the family; unknown
// values have none.
func TestCollectorPools(t *testing.T) {
	s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: kv.Of(8000), Used: kv.Of(4000), UsageRatio: kv.DerivedOf(0.5), HitTokens: kv.Of(200),
			LoadBytes: kv.Of(3e6), StoreBytes: kv.Of(9e6)},
		{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: kv.Of(0.9)},
		{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, Capacity: kv.Of(64), UsageRatio: kv.Of(0.25)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: kv.Of(5e10)},
		{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: kv.Of(0.18)},
	}}
	e := entry{target: &scrape.Target{Name: "srv", Labels: map[string]string{}}, scraped: true, res: scrape.Result{Server: s}, role: kv.RoleDecode}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newCollector(func() []entry { return []entry{e} })); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "kvwatch_kv_pool_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			lv := map[string]string{}
			for _, l := range m.GetLabel() {
				lv[l.GetName()] = l.GetValue()
			}
			ls := []string{lv[signal.LabelPoolType], lv[signal.LabelKVTier], lv[signal.LabelPoolName]}
			if d, ok := lv[signal.LabelDirection]; ok {
				ls = append(ls, d)
			}
			got[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = value(m)
		}
	}
	want := map[string]float64{
		"kvwatch_kv_pool_capacity_tokens{full,host,}":  8000,
		"kvwatch_kv_pool_used_tokens{full,host,}":      4000,
		"kvwatch_kv_pool_usage_ratio{full,host,}":      0.5,
		"kvwatch_kv_pool_hit_tokens_total{full,host,}": 200,
		// The tier's traffic, one series per direction; a pool without
		// any (the others) has none.
		"kvwatch_kv_pool_transfer_bytes_total{full,host,,load}":  3e6,
		"kvwatch_kv_pool_transfer_bytes_total{full,host,,store}": 9e6,
		"kvwatch_kv_pool_usage_ratio{swa,gpu,}":                  0.9,
		// Mamba slots are no tokens: a family of their own.
		"kvwatch_kv_pool_capacity_slots{mamba,gpu,}":     64,
		"kvwatch_kv_pool_usage_ratio{mamba,gpu,}":        0.25,
		"kvwatch_kv_pool_used_bytes{full,lmcache-l2,fs}": 5e10,
		"kvwatch_kv_pool_hit_ratio{full,disk,}":          0.18,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pool series (-want +got):\n%s", d)
	}
}
