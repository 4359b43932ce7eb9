package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// SGLang's state pools of hybrid models, beside the full-attention KV pool
// (sgl-project/sglang python/sglang/srt/observability/metrics_collector.py
// @016d8605, sglang #22726): the sliding-window pool in tokens and the
// Mamba SSM pool in state slots (its gauges say "tokens" in their names but
// count slots: "Number of free state slots in the mamba SSM pool"). The
// scheduler computes each pool's used as its size minus available minus
// evictable (scheduler_runtime_checker_mixin.py @008e7b87,
// _get_swa_token_info and _get_mamba_token_info), so a rank's capacity is
// the three gauges' sum. SGLang writes every one of them as 0 for a model
// without such layers.
const (
	sgSWAAvailable   = "sglang:swa_available_tokens"
	sgSWAEvictable   = "sglang:swa_evictable_tokens"
	sgSWAUsed        = "sglang:swa_used_tokens"
	sgMambaAvailable = "sglang:mamba_available_tokens"
	sgMambaEvictable = "sglang:mamba_evictable_tokens"
	sgMambaUsed      = "sglang:mamba_used_tokens"
)

// sgStateFamily is one state pool's gauges: its usage ratio (0–1) and its
// available, evictable and used counts, in unit.
type sgStateFamily struct {
	typ, unit                         string
	ratio, available, evictable, used string
}

var sgStateFamilies = [...]sgStateFamily{
	{kv.PoolSWA, kv.UnitTokens, sgSWAUsage, sgSWAAvailable, sgSWAEvictable, sgSWAUsed},
	{kv.PoolMamba, kv.UnitSlots, sgMambaUsage, sgMambaAvailable, sgMambaEvictable, sgMambaUsed},
}

// sgStateNames are the count gauges of the state pools, for the spec's Reads.
var sgStateNames = []string{sgSWAAvailable, sgSWAEvictable, sgSWAUsed, sgMambaAvailable, sgMambaEvictable, sgMambaUsed}

// sglangStatePools reads the SWA and Mamba pools into ps: the usage gauge
// (direct), used (direct) and, on a rank that has all three counts,
// capacity = available + evictable + used (derived). A pool is listed only
// when one of its gauges is above 0 on some rank: SGLang writes them as 0
// for dense models. Older SGLang has the usage gauges only: then the pool
// has its ratio alone.
func sglangStatePools(p *expo.Page, ps *pools) {
	for i := range sgStateFamilies {
		f := &sgStateFamilies[i]
		if !sgStateOn(p, f) {
			continue
		}
		key := func(s expo.Sample) (poolKey, bool) { return poolKey{f.typ, kv.TierGPU, ""}, sgTotals(s) }
		ps.read(p, f.ratio, key, f.unit, pfRatio, sgRank, maxf, kv.Of)
		ps.read(p, f.used, key, f.unit, pfUsed, sgRank, maxf, kv.Of)
		// Capacity per rank: the three counts, each the largest of its
		// repeats on that rank, summed where all three are there.
		type parts struct {
			v [3]float64
			n [3]bool
		}
		var byRank map[kv.RankID]*parts
		var order []kv.RankID
		for j, name := range []string{f.available, f.evictable, f.used} {
			for _, s := range p.Samples(name) {
				if !sgTotals(s) || !expo.Finite(s.Value) {
					continue
				}
				r := sgRank(s)
				pt := byRank[r]
				if pt == nil {
					if byRank == nil {
						byRank = map[kv.RankID]*parts{}
					}
					pt = &parts{}
					byRank[r] = pt
					order = append(order, r)
				}
				if !pt.n[j] || s.Value > pt.v[j] {
					pt.v[j], pt.n[j] = s.Value, true
				}
			}
		}
		for _, r := range order {
			if pt := byRank[r]; pt.n[0] && pt.n[1] && pt.n[2] {
				ps.set(poolKey{f.typ, kv.TierGPU, ""}, f.unit, pfCapacity, r, kv.DerivedOf(pt.v[0]+pt.v[1]+pt.v[2]), maxf)
			}
		}
	}
}

// sgStateOn reports whether any gauge of f is above 0 on some rank.
func sgStateOn(p *expo.Page, f *sgStateFamily) bool {
	for _, name := range []string{f.ratio, f.available, f.evictable, f.used} {
		for _, s := range p.Samples(name) {
			if sgTotals(s) && expo.Finite(s.Value) && s.Value > 0 {
				return true
			}
		}
	}
	return false
}
