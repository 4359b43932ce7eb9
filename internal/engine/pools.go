package engine

import (
	"slices"
	"sync"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/lookup"
)

// poolKey names one pool of a server.
type poolKey struct{ typ, tier, name string }

// pools collects a server's further KV pools (kv.CachePool) while an adapter
// reads a page: values per rank first, then TP duplicates collapsed (max)
// and DP ranks summed, strictly: a total is known only when every DP group
// that has the pool knows the value. A page has a few pools on a few ranks:
// the values live in slices searched in order (a map per pool, field and
// rank was most of what a scrape of SGLang's tiers cost), indexed by a map
// once there are more than poolsIndexed of them.
type pools struct {
	// decls are the pools, in the order first declared.
	decls []poolDecl
	vals  []poolVal
	index map[poolSlot]int // into vals, past poolsIndexed
	// ratios are never summed: a DP total is recomputed from tokens, or
	// the mean when every group has only a ratio.

	// Scratch space of list, kept with ps for the next page: the DP
	// groups of one pool (groups), one field's values by group
	// (perGroup), and the pools before they are copied out.
	dps []string
	gv  groupValues
	out []kv.CachePool
}

type poolDecl struct {
	k          poolKey
	unit, note string
}

// poolSlot is one field of one pool (an index into decls) on one rank.
type poolSlot struct {
	pool, field int
	rank        kv.RankID
}

type poolVal struct {
	poolSlot
	v kv.Value
}

const poolsIndexed = 32

// Pool fields, by index.
const (
	pfCapacity = iota
	pfUsed
	pfRatio
	pfHits
	pfHitRate
	pfLoadBytes
	pfStoreBytes
)

// poolFields are the fields in the order groups reads them.
var poolFields = [...]int{pfCapacity, pfUsed, pfRatio, pfHits, pfHitRate, pfLoadBytes, pfStoreBytes}

// newPools returns an empty collection, reusing the slices of one that
// list was called on.
func newPools() *pools { return poolScratch.Get().(*pools) }

var poolScratch = sync.Pool{New: func() any { return &pools{} }}

// pool returns the index of pool k, or -1.
func (ps *pools) pool(k poolKey) int {
	for i := range ps.decls {
		if ps.decls[i].k == k {
			return i
		}
	}
	return -1
}

// add declares a pool (once) with its unit, and returns its index.
func (ps *pools) add(k poolKey, unit string) int {
	if i := ps.pool(k); i >= 0 {
		return i
	}
	ps.decls = append(ps.decls, poolDecl{k: k, unit: unit})
	return len(ps.decls) - 1
}

// setNote sets the note of pool k, when declared.
func (ps *pools) setNote(k poolKey, note string) {
	if i := ps.pool(k); i >= 0 {
		ps.decls[i].note = note
	}
}

// slot returns the index in vals of a pool's field on a rank, or -1.
func (ps *pools) slot(sl poolSlot) int { return lookup.Place(ps.vals, ps.index, sl, slotOf) }

func slotOf(v *poolVal) poolSlot { return v.poolSlot }

// value returns a pool's field on a rank.
func (ps *pools) value(pool, field int, rank kv.RankID) (kv.Value, bool) {
	if i := ps.slot(poolSlot{pool, field, rank}); i >= 0 {
		return ps.vals[i].v, true
	}
	return kv.Value{}, false
}

// set records one value of a pool on a rank, combining repeats with fn.
func (ps *pools) set(k poolKey, unit string, field int, rank kv.RankID, v kv.Value, fn combineFn) {
	if !v.OK() {
		return
	}
	sl := poolSlot{ps.add(k, unit), field, rank}
	if i := ps.slot(sl); i >= 0 {
		o := ps.vals[i].v
		ps.vals[i].v = kv.Value{V: fn(o.V, v.V), Prov: v.Prov}
		return
	}
	ps.vals = append(ps.vals, poolVal{sl, v})
	ps.index = lookup.Appended(ps.vals, ps.index, slotOf, poolsIndexed)
}

// drop forgets a field of a pool on every rank.
func (ps *pools) drop(pool, field int) {
	ps.vals = slices.DeleteFunc(ps.vals, func(pv poolVal) bool { return pv.pool == pool && pv.field == field })
	ps.index = nil
	for i := range ps.vals { // as if appended one by one
		ps.index = lookup.Appended(ps.vals[:i+1], ps.index, slotOf, poolsIndexed)
	}
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

// list rolls the pools up and returns those with a known value, completed,
// that keep (nil: all) accepts; nil when none is. The slice is the
// caller's, at its exact length: the pools are built in ps's scratch space
// and copied out. ps is done with once it is called (it goes back to
// newPools).
func (ps *pools) list(keep func(*kv.CachePool) bool) []kv.CachePool {
	out := ps.out[:0]
	for i, d := range ps.decls {
		pl := kv.CachePool{Type: d.k.typ, Tier: d.k.tier, Name: d.k.name, Unit: d.unit, Note: d.note}
		groups := ps.groups(i)
		pl.Capacity = ps.total(i, pfCapacity, groups)
		pl.Used = ps.total(i, pfUsed, groups)
		pl.HitTokens = ps.total(i, pfHits, groups)
		pl.HitRate = ps.mean(i, pfHitRate, groups)
		pl.LoadBytes = ps.total(i, pfLoadBytes, groups)
		pl.StoreBytes = ps.total(i, pfStoreBytes, groups)
		if len(groups) == 1 || !(pl.Capacity.OK() && pl.Used.OK()) {
			pl.UsageRatio = ps.mean(i, pfRatio, groups)
		}
		pl.Complete()
		if !pl.Known() && pl.Note == "" {
			continue
		}
		// keep sees the pool in the scratch slice: &pl, passed to a
		// func, would take every pool from the heap.
		if out = append(out, pl); keep != nil && !keep(&out[len(out)-1]) {
			out = out[:len(out)-1]
		}
	}
	var kept []kv.CachePool
	if len(out) > 0 {
		kept = make([]kv.CachePool, len(out))
		copy(kept, out)
	}
	ps.out = out
	ps.release()
	return kept
}

// release hands ps back for newPools to reuse; ps must not be used after.
func (ps *pools) release() {
	if len(ps.vals) > 4*poolsIndexed { // a large page's: not kept
		return
	}
	clear(ps.decls)
	clear(ps.vals)
	clear(ps.dps[:cap(ps.dps)]) // past the last call's length too: they hold label strings
	clear(ps.gv.list[:cap(ps.gv.list)])
	clear(ps.out)
	ps.decls, ps.vals, ps.index = ps.decls[:0], ps.vals[:0], nil
	ps.dps, ps.gv, ps.out = ps.dps[:0], groupValues{list: ps.gv.list[:0]}, ps.out[:0]
	poolScratch.Put(ps)
}

// groups returns the DP groups that report anything of a pool, in the
// order first seen (fields in poolFields order). The slice is ps's scratch
// space: good until the next call.
func (ps *pools) groups(pool int) []string {
	var (
		out  = ps.dps[:0]
		seen map[string]int // past poolsIndexed groups
	)
	for _, f := range poolFields {
		for _, pv := range ps.vals {
			if pv.pool != pool || pv.field != f {
				continue
			}
			if dp := pv.rank.DP; lookup.Place(out, seen, dp, lookup.Self[string]) < 0 {
				out = append(out, dp)
				seen = lookup.Appended(out, seen, lookup.Self[string], poolsIndexed)
			}
		}
	}
	ps.dps = out
	return out
}

// dpValue is a field's value in one DP group.
type dpValue struct {
	dp string
	v  kv.Value
}

// perGroup collapses a field's TP/PP duplicates by max, per DP group, in
// the order first seen. The values are ps's scratch space: good until the
// next call.
func (ps *pools) perGroup(pool, field int) *groupValues {
	clear(ps.gv.list)
	ps.gv = groupValues{list: ps.gv.list[:0]}
	g := &ps.gv
	for _, pv := range ps.vals {
		if pv.pool != pool || pv.field != field {
			continue
		}
		if i := g.find(pv.rank.DP); i >= 0 {
			if pv.v.V > g.list[i].v.V {
				g.list[i].v = pv.v
			}
			continue
		}
		g.add(dpValue{pv.rank.DP, pv.v})
	}
	return g
}

// groupValues are the values of a field by DP group; a map indexes them
// past poolsIndexed groups.
type groupValues struct {
	list []dpValue
	by   map[string]int
}

func (g *groupValues) find(dp string) int { return lookup.Place(g.list, g.by, dp, dpOf) }

func (g *groupValues) add(v dpValue) {
	g.list = append(g.list, v)
	g.by = lookup.Appended(g.list, g.by, dpOf, poolsIndexed)
}

func dpOf(v *dpValue) string { return v.dp }

func (g *groupValues) get(dp string) (kv.Value, bool) {
	if i := g.find(dp); i >= 0 {
		return g.list[i].v, true
	}
	return kv.Value{}, false
}

// total sums a field over DP groups; unknown unless every group knows it.
// Series without a DP label next to labelled ones (SGLang's tokenizer
// counters) are no DP group: they fill a field no labelled group has.
// (groups are distinct: "" is at most one of them.)
func (ps *pools) total(pool, field int, groups []string) kv.Value {
	g := ps.perGroup(pool, field)
	skipUnlabelled := false
	if slices.Contains(groups, "") && len(groups) > 1 {
		known := false
		for _, dp := range groups {
			if dp != "" {
				_, ok := g.get(dp)
				known = known || ok
			}
		}
		if !known {
			v, _ := g.get("")
			return v
		}
		skipUnlabelled = true
	}
	var out kv.Value
	for _, dp := range groups {
		if skipUnlabelled && dp == "" {
			continue
		}
		v, ok := g.get(dp)
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

// mean is a ratio over DP groups (equal weights, derived when more than
// one); unknown unless every group knows it.
func (ps *pools) mean(pool, field int, groups []string) kv.Value {
	t := ps.total(pool, field, groups)
	n := 0
	for _, gv := range ps.perGroup(pool, field).list {
		if gv.dp != "" || len(groups) == 1 {
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

// poolWhere names a pool in a warning, e.g. "host full" or "lmcache-l2
// full fs": written only when there is a warning, not for every pool of
// every scrape.
func poolWhere(p *kv.CachePool) string {
	where := p.Tier + " " + p.Type
	if p.Name != "" {
		where += " " + p.Name
	}
	return where
}

// checkPools warns about implausible pool values (negative, used beyond
// capacity, a ratio above 1) and makes the pool's usage unavailable then,
// so no face shows an impossible fill as a plausible percentage.
func checkPools(srv *kv.Server) {
	for i := range srv.CachePools {
		p := &srv.CachePools[i]
		bad := false
		for _, f := range []struct {
			name string
			v    kv.Value
		}{{"capacity", p.Capacity}, {"used", p.Used}, {"usage", p.UsageRatio}, {"hit tokens", p.HitTokens}, {"hit rate", p.HitRate},
			{"load bytes", p.LoadBytes}, {"store bytes", p.StoreBytes}} {
			if f.v.Prov == kv.Direct && f.v.V < 0 { // derived values follow from these
				srv.Warn(kv.WarnNegative, "%s pool: %s is %g", poolWhere(p), f.name, f.v.V)
				bad = true
			}
		}
		if p.Used.OK() && p.Capacity.OK() && p.Used.V > p.Capacity.V*1.001+1 {
			srv.Warn(kv.WarnOverCapacity, "%s pool: used %g beyond capacity %g", poolWhere(p), p.Used.V, p.Capacity.V)
			bad = true
		}
		if p.UsageRatio.Prov == kv.Direct && p.UsageRatio.V > 1.001 {
			srv.Warn(kv.WarnOverCapacity, "%s pool: usage ratio %g above 1", poolWhere(p), p.UsageRatio.V)
			bad = true
		}
		if bad {
			p.UsageRatio = kv.Value{}
		}
	}
}
