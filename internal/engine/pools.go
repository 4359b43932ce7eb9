package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// poolKey names one pool of a server.
type poolKey struct{ typ, tier, name string }

// pools collects a server's further KV pools (kv.CachePool) while an adapter
// reads a page: values per rank first, then TP duplicates collapsed (max)
// and DP ranks summed, strictly: a total is known only when every DP group
// that has the pool knows the value.
type pools struct {
	order []poolKey
	unit  map[poolKey]string
	note  map[poolKey]string
	// vals[key][field][rank]
	vals map[poolKey]map[int]map[kv.RankID]kv.Value
	// ratios are never summed: a DP total is recomputed from tokens, or
	// the mean when every group has only a ratio.
}

// Pool fields, by index.
const (
	pfCapacity = iota
	pfUsed
	pfRatio
	pfHits
	pfHitRate
)

func newPools() *pools {
	return &pools{unit: map[poolKey]string{}, note: map[poolKey]string{}, vals: map[poolKey]map[int]map[kv.RankID]kv.Value{}}
}

// add declares a pool (once) with its unit.
func (ps *pools) add(k poolKey, unit string) {
	if _, ok := ps.unit[k]; ok {
		return
	}
	ps.order = append(ps.order, k)
	ps.unit[k] = unit
	ps.vals[k] = map[int]map[kv.RankID]kv.Value{}
}

// set records one value of a pool on a rank, combining repeats with fn.
func (ps *pools) set(k poolKey, unit string, field int, rank kv.RankID, v kv.Value, fn combineFn) {
	if !v.OK() {
		return
	}
	ps.add(k, unit)
	f := ps.vals[k][field]
	if f == nil {
		f = map[kv.RankID]kv.Value{}
		ps.vals[k][field] = f
	}
	if o, ok := f[rank]; ok {
		v = kv.Value{V: fn(o.V, v.V), Prov: v.Prov}
	}
	f[rank] = v
}

// read sets field of the pool key(s) for every finite sample of name.
func (ps *pools) read(p *expo.Page, name string, key func(expo.Sample) (poolKey, bool), unit string, field int, rank func(expo.Sample) kv.RankID, fn combineFn, mk func(float64) kv.Value) {
	for _, s := range p.Samples(name) {
		if !expo.Finite(s.Value) {
			continue
		}
		k, ok := key(s)
		if !ok {
			continue
		}
		r := kv.RankID{}
		if rank != nil {
			r = rank(s)
		}
		ps.set(k, unit, field, r, mk(s.Value), fn)
	}
}

// list rolls the pools up and returns those with a known value, completed.
func (ps *pools) list() []kv.CachePool {
	var out []kv.CachePool
	for _, k := range ps.order {
		pl := kv.CachePool{Type: k.typ, Tier: k.tier, Name: k.name, Unit: ps.unit[k], Note: ps.note[k]}
		groups := ps.groups(k)
		pl.Capacity = ps.total(k, pfCapacity, groups)
		pl.Used = ps.total(k, pfUsed, groups)
		pl.HitTokens = ps.total(k, pfHits, groups)
		pl.HitRate = ps.mean(k, pfHitRate, groups)
		if len(groups) == 1 || !(pl.Capacity.OK() && pl.Used.OK()) {
			pl.UsageRatio = ps.mean(k, pfRatio, groups)
		}
		pl.Complete()
		if pl.Known() || pl.Note != "" {
			out = append(out, pl)
		}
	}
	return out
}

// groups returns the DP groups that report anything of pool k.
func (ps *pools) groups(k poolKey) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range []int{pfCapacity, pfUsed, pfRatio, pfHits, pfHitRate} {
		for r := range ps.vals[k][f] {
			if !seen[r.DP] {
				seen[r.DP] = true
				out = append(out, r.DP)
			}
		}
	}
	return out
}

// perGroup collapses a field's TP/PP duplicates by max, per DP group.
func (ps *pools) perGroup(k poolKey, field int) map[string]kv.Value {
	out := map[string]kv.Value{}
	for r, v := range ps.vals[k][field] {
		if o, ok := out[r.DP]; !ok || v.V > o.V {
			out[r.DP] = v
		}
	}
	return out
}

// total sums a field over DP groups; unknown unless every group knows it.
// Series without a DP label next to labelled ones (SGLang's tokenizer
// counters) are no DP group: they fill a field no labelled group has.
func (ps *pools) total(k poolKey, field int, groups []string) kv.Value {
	g := ps.perGroup(k, field)
	if labelled := without(groups, ""); len(labelled) < len(groups) && len(labelled) > 0 {
		known := false
		for _, dp := range labelled {
			_, ok := g[dp]
			known = known || ok
		}
		if !known {
			return g[""]
		}
		groups = labelled
	}
	var out kv.Value
	for _, dp := range groups {
		v, ok := g[dp]
		if !ok {
			return kv.Value{}
		}
		if out.OK() {
			v = kv.Value{V: out.V + v.V, Prov: worse(out.Prov, v.Prov)}
		}
		out = v
	}
	return out
}

func without(list []string, v string) []string {
	var out []string
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// mean is a ratio over DP groups (equal weights, derived when more than
// one); unknown unless every group knows it.
func (ps *pools) mean(k poolKey, field int, groups []string) kv.Value {
	t := ps.total(k, field, groups)
	n := 0
	for dp := range ps.perGroup(k, field) {
		if dp != "" || len(groups) == 1 {
			n++
		}
	}
	if !t.OK() || n < 2 {
		return t
	}
	return kv.DerivedOf(t.V / float64(n))
}

// worse is the weaker provenance of two known values.
func worse(a, b kv.Provenance) kv.Provenance {
	if a > b {
		return a
	}
	return b
}

// fixed returns a key function for one pool.
func fixed(typ, tier, name string) func(expo.Sample) (poolKey, bool) {
	return func(expo.Sample) (poolKey, bool) { return poolKey{typ, tier, name}, true }
}

// checkPools warns about implausible pool values (negative, used beyond
// capacity, a ratio above 1) and makes the pool's usage unavailable then,
// so no face shows an impossible fill as a plausible percentage.
func checkPools(srv *kv.Server) {
	for i := range srv.CachePools {
		p := &srv.CachePools[i]
		where := p.Tier + " " + p.Type
		if p.Name != "" {
			where += " " + p.Name
		}
		bad := false
		for _, f := range []struct {
			name string
			v    kv.Value
		}{{"capacity", p.Capacity}, {"used", p.Used}, {"usage", p.UsageRatio}, {"hit tokens", p.HitTokens}, {"hit rate", p.HitRate}} {
			if f.v.Prov == kv.Direct && f.v.V < 0 { // derived values follow from these
				srv.Warn(kv.WarnNegative, "%s pool: %s is %g", where, f.name, f.v.V)
				bad = true
			}
		}
		if p.Used.OK() && p.Capacity.OK() && p.Used.V > p.Capacity.V*1.001+1 {
			srv.Warn(kv.WarnOverCapacity, "%s pool: used %g beyond capacity %g", where, p.Used.V, p.Capacity.V)
			bad = true
		}
		if p.UsageRatio.Prov == kv.Direct && p.UsageRatio.V > 1.001 {
			srv.Warn(kv.WarnOverCapacity, "%s pool: usage ratio %g above 1", where, p.UsageRatio.V)
			bad = true
		}
		if bad {
			p.UsageRatio = kv.Value{}
		}
	}
}
