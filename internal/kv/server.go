package kv

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Role is what a server does in the fleet.
type Role string

// Roles.
const (
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
	RoleUnified Role = "unified"
	RoleRouter  Role = "router"
	// RoleCache is a cache server: an LMCache server in multi-process
	// mode or a Dynamo KVBM listener, whose page holds cache tiers (host,
	// disk, L1/L2) for engines and no KV pool of its own. Like a router,
	// it is in no pool's KV sums.
	RoleCache Role = "cache"
)

// HoldsKV says whether servers of the role have a KV pool of their own:
// every role but router and cache. Pools, their sums and the planning
// signals hold only such servers.
func (r Role) HoldsKV() bool { return r != RoleRouter && r != RoleCache }

// Signals are the normalized values of one rank or, rolled up, one server.
type Signals struct {
	// Capacity is the KV slots the engine can hold, in tokens.
	Capacity Value `json:"capacity_tokens"`
	// Used is the slots held by admitted requests and not reclaimable, in tokens.
	Used Value `json:"used_tokens"`
	// Evictable is the slots holding reusable prefix cache, in tokens.
	Evictable Value `json:"evictable_tokens"`
	// UsageRatio is Used / Capacity, 0–1.
	UsageRatio Value `json:"usage_ratio"`
	// ReservedRatio is KV reserved at admission but not written, over
	// capacity, 0–1 (TGI).
	ReservedRatio Value `json:"reserved_ratio"`
	// Demand is the KV that requests still waiting need, in tokens (SGLang
	// PD decode: waiting for pre-allocation). It is not held: it may exceed
	// capacity under overload.
	Demand Value `json:"demand_tokens"`
	// DemandRatio is Demand over capacity: ≥ 0, unbounded above (> 1: the
	// queue alone would overfill the cache).
	DemandRatio Value `json:"demand_ratio"`
	// Running is requests in the running batch.
	Running Value `json:"running"`
	// Queued is requests waiting, by queue.
	Queued Queues `json:"queued"`
	// Counters are cumulative since the engine started.
	Counters Counters `json:"counters"`
}

// Queues are the waiting requests, the PD queues apart from the admission queue.
type Queues struct {
	// Waiting is the engine's admission queue.
	Waiting Value `json:"waiting"`
	// Prealloc is PD decode requests waiting for KV pre-allocation.
	Prealloc Value `json:"prealloc"`
	// Bootstrap is PD prefill requests in the bootstrap (older: prealloc) queue.
	Bootstrap Value `json:"bootstrap"`
	// Transfer is PD decode requests whose KV is being transferred in.
	Transfer Value `json:"transfer"`
	// Inflight is PD prefill requests whose KV is being sent out.
	Inflight Value `json:"inflight"`
}

// Counters are cumulative counts since the engine (re)started.
type Counters struct {
	// PrefixHitTokens are prompt tokens found in the prefix cache.
	PrefixHitTokens Value `json:"prefix_hit_tokens"`
	// PrefixQueryTokens are prompt tokens looked up in the prefix cache.
	PrefixQueryTokens Value `json:"prefix_query_tokens"`
	// Preemptions are requests preempted (vLLM) or retracted (SGLang).
	Preemptions Value `json:"preemptions"`
	// PromptTokens are prefill tokens processed.
	PromptTokens Value `json:"prompt_tokens"`
	// GenerationTokens are decode tokens produced.
	GenerationTokens Value `json:"generation_tokens"`
}

// RankID names one scheduler of a server; a field is "" when the engine has
// no such label.
type RankID struct {
	DP string `json:"dp_rank"`
	TP string `json:"tp_rank"`
	PP string `json:"pp_rank"`
}

// Rank is what one scheduler (TP/DP/PP rank) reports.
type Rank struct {
	RankID
	Signals
}

// Router is what a router or gateway reports about its workers.
type Router struct {
	WorkersHealthy Value `json:"workers_healthy"`
	WorkersTotal   Value `json:"workers_total"`
}

// Server is the normalized view of one server at one scrape.
type Server struct {
	// Engine is the adapter that read the page, e.g. "sglang".
	Engine string `json:"engine"`
	// EngineVersion is the engine's version where the engine says it (its
	// version endpoint, llama.cpp's /props build), "" when it does not.
	EngineVersion string `json:"engine_version,omitempty"`
	// Generation is the metric-name generation detected, e.g. "current",
	// "legacy", "v0".
	Generation string `json:"generation"`
	// Model is the served model name, "" when not reported.
	Model string `json:"model"`
	// Role is prefill, decode, unified, router or cache.
	Role Role `json:"role"`
	// ContextLength is the maximum context length, in tokens.
	ContextLength Value `json:"context_length_tokens"`
	// UsedHoldsCache is true where Used counts reusable cache beside the
	// KV of admitted requests, and the engine does not say how much
	// (llama.cpp: idle slots keep their tokens as prompt cache). KV held
	// while nothing runs is then no sign of a leak (Diagnose).
	UsedHoldsCache bool `json:"used_holds_cache,omitempty"`
	// Signals are the server totals (set by Rollup from Ranks, or directly
	// by the adapter for values without ranks).
	Signals
	// MaxRunning is the engine's running-request limit, summed over DP
	// ranks (SGLang sglang:max_running_requests); unavailable where the
	// engine does not put it on its page (see docs/planning.md).
	MaxRunning Value `json:"max_running_requests"`
	// Finished are the sizes of the requests finished since the engine
	// started, where it reports them (planning.go).
	Finished RequestSizes `json:"finished_requests"`
	// Spread is the highest minus lowest usage ratio over DP ranks.
	Spread Value `json:"rank_spread_ratio"`
	// CachePools are the server's KV pools beyond the primary one: other
	// attention types and cache tiers (see CachePool).
	CachePools []CachePool `json:"cache_pools,omitempty"`
	// Ranks are the per-rank values, sorted by DP, PP, TP.
	Ranks []Rank `json:"ranks,omitempty"`
	// Router is set for routers.
	Router *Router `json:"router,omitempty"`
	// Warnings say why some of the numbers cannot be taken at face value
	// (see Warning); empty when the page is plausible.
	Warnings []Warning `json:"warnings,omitempty"`
	// Unavailable say why the page leaves some values unknown where it
	// tells (an asleep engine, a name whose meaning in the page's version
	// is not kvwatch's); see Unknown.
	Unavailable []Unknown `json:"unavailable,omitempty"`
}

// worst returns the weaker of two provenances for a value built from both:
// Reserved > Derived > Direct.
func worst(a, b Provenance) Provenance {
	if a == Unavailable {
		return b
	}
	if b == Unavailable {
		return a
	}
	if a > b {
		return a
	}
	return b
}

// maxOf returns the larger known value (for TP duplicates).
func maxOf(a, b Value) Value {
	switch {
	case !a.OK():
		return b
	case !b.OK():
		return a
	case b.V > a.V:
		b.Prov = worst(a.Prov, b.Prov)
		return b
	}
	a.Prov = worst(a.Prov, b.Prov)
	return a
}

// sumOf adds known values (for DP ranks); unknown plus known is the known.
func sumOf(a, b Value) Value {
	switch {
	case !a.OK():
		return b
	case !b.OK():
		return a
	}
	return saturate(a.V+b.V, worst(a.Prov, b.Prov))
}

// nFields is how many values fieldsOf returns.
const nFields = 18

// The places of the ratios in fieldsOf's list.
const (
	fieldUsageRatio    = 3
	fieldReservedRatio = 4
	fieldDemandRatio   = 6
)

// fieldsOf lists pointers to every Value of s, in a fixed order (an array:
// no allocation).
func fieldsOf(s *Signals) [nFields]*Value {
	return [nFields]*Value{&s.Capacity, &s.Used, &s.Evictable, &s.UsageRatio, &s.ReservedRatio,
		&s.Demand, &s.DemandRatio, &s.Running, &s.Queued.Waiting, &s.Queued.Prealloc, &s.Queued.Bootstrap,
		&s.Queued.Transfer, &s.Queued.Inflight, &s.Counters.PrefixHitTokens,
		&s.Counters.PrefixQueryTokens, &s.Counters.Preemptions, &s.Counters.PromptTokens,
		&s.Counters.GenerationTokens}
}

// complete fills what one set of signals implies: used from ratio ×
// capacity, ratio from used / capacity.
func complete(s *Signals) {
	if !s.Used.OK() && s.UsageRatio.OK() && s.Capacity.OK() {
		s.Used = s.UsageRatio.Mul(s.Capacity)
		s.Used.V = math.Round(s.Used.V)
	}
	if !s.UsageRatio.OK() {
		s.UsageRatio = s.Used.Div(s.Capacity)
	}
	if !s.Demand.OK() && s.DemandRatio.OK() && s.Capacity.OK() {
		s.Demand = s.DemandRatio.Mul(s.Capacity)
		s.Demand.V = math.Round(s.Demand.V)
	}
	if !s.DemandRatio.OK() {
		s.DemandRatio = s.Demand.Div(s.Capacity)
	}
}

// DPGroups returns the server's signals per DP rank: TP and PP duplicates
// collapsed by taking the maximum, in DP order. Ranks without a DP label form
// one group, except the unlabelled entry (no DP, TP or PP label, e.g.
// SGLang's tokenizer counters) when labelled ranks exist: it is not a rank.
// The slice is the caller's.
func (s *Server) DPGroups() []Signals {
	groups, _, _ := s.groups(nil)
	return groups
}

// MultiDP reports whether the server has more than one DP group (see
// DPGroups), without building them: with one, the server's own signals are
// its only group's.
func (s *Server) MultiDP() bool {
	first, seen := "", false
	for _, r := range s.Ranks {
		if r.RankID == (RankID{}) {
			continue
		}
		if !seen {
			first, seen = r.DP, true
		} else if r.DP != first {
			return true
		}
	}
	return false
}

// groupsBuf is how many DP groups the callers of groups hold on their
// stack: a server has a few.
const groupsBuf = 4

// groups returns the DP groups (see DPGroups) in buf when they fit (else in
// a new slice; nil when there is none and buf is nil), and the unlabelled
// filler (hasFiller false without one). A server has a few DP groups: they
// are found by a linear search (a map per call was a twentieth of what a
// scrape allocated), indexed by a map past groupsIndexed of them. Callers
// that keep nothing pass a buffer on their stack, so that a scrape's
// rollup and headroom allocate nothing here.
func (s *Server) groups(buf []Signals) (groups []Signals, filler Signals, hasFiller bool) {
	labelled := false
	for _, r := range s.Ranks {
		if r.RankID != (RankID{}) {
			labelled = true
			break
		}
	}
	var (
		small [groupsIndexed]string
		dps   = small[:0] // each group's DP, in order first seen
		idx   map[string]int
	)
	// The search is written out, not lookup.Place: handed to a generic
	// function with a key function, small would move to the heap, and
	// Rollup and Headroom would allocate on every scrape.
	find := func(dp string) int {
		if idx != nil {
			if i, ok := idx[dp]; ok {
				return i
			}
			return -1
		}
		for i, d := range dps {
			if d == dp {
				return i
			}
		}
		return -1
	}
	for _, r := range s.Ranks {
		if (labelled && r.RankID == (RankID{})) || find(r.DP) >= 0 {
			continue
		}
		dps = append(dps, r.DP)
		switch {
		case idx != nil:
			idx[r.DP] = len(dps) - 1
		case len(dps) > groupsIndexed:
			idx = make(map[string]int, 2*len(dps))
			for i, d := range dps {
				idx[d] = i
			}
		}
	}
	if cap(buf) < len(dps) {
		groups = make([]Signals, len(dps))
	} else {
		groups = buf[:len(dps)]
		clear(groups)
	}
	for _, r := range s.Ranks {
		rs := r.Signals
		complete(&rs)
		var into *Signals
		if labelled && r.RankID == (RankID{}) {
			into, hasFiller = &filler, true
		} else {
			into = &groups[find(r.DP)]
		}
		g := fieldsOf(into)
		for j, v := range fieldsOf(&rs) {
			*g[j] = maxOf(*g[j], *v)
		}
	}
	return groups, filler, hasFiller
}

// groupsIndexed is the most DP groups groups finds without a map.
const groupsIndexed = 16

// strictSum adds one field over DP groups: the total when every group knows
// it, a Partial sum of the known parts when only some do, unknown when none.
func strictSum(vals []Value) Value {
	var out Value
	known := 0
	for _, v := range vals {
		if !v.OK() {
			continue
		}
		known++
		if !out.OK() {
			out = v
			continue
		}
		out = saturate(out.V+v.V, worst(out.Prov, v.Prov))
	}
	if known > 0 && known < len(vals) {
		out.Prov = max(out.Prov, Partial)
	}
	return out
}

// ratioOf rolls a ratio up over DP groups: weighted by capacity when every
// group with the ratio knows its capacity, else every group weighs the
// same. A single group keeps its ratio as read. Partial when some groups
// lack the ratio; unknown when none has it. The ratio is fieldsOf's field
// j (an index, not a func: groups stays on the caller's stack).
func ratioOf(groups []Signals, j int) Value {
	var plain, weighted, capSum float64
	prov := Unavailable
	n, capsKnown := 0, true
	var only Value
	for i := range groups {
		r := *fieldsOf(&groups[i])[j]
		if !r.OK() {
			continue
		}
		n++
		only = r
		plain = saturate(plain+r.V, Derived).V
		prov = worst(prov, r.Prov)
		if c := groups[i].Capacity; c.OK() && c.Prov != Implausible {
			weighted = saturate(weighted+saturate(r.V*c.V, Derived).V, Derived).V
			capSum = saturate(capSum+c.V, Derived).V
		} else {
			capsKnown = false
		}
	}
	var out Value
	switch {
	case n == 0:
		return Value{}
	case len(groups) == 1:
		return only
	case capsKnown && capSum > 0:
		out = saturate(weighted/capSum, combine(prov, Derived))
	default:
		out = saturate(plain/float64(n), combine(prov, Derived))
	}
	if n < len(groups) {
		out.Prov = max(out.Prov, Partial)
	}
	return out
}

// Rollup computes the server totals from Ranks: TP duplicates collapsed, DP
// ranks summed for tokens, requests and counters, ratios recomputed from the
// groups, and the spread of usage over DP ranks. A total is known only when
// every DP rank knows it: a sum with a missing part is Partial. The
// unlabelled entry only fills fields no rank has. Values the adapter
// already set at server level are kept.
func (s *Server) Rollup() {
	slices.SortStableFunc(s.Ranks, compareRanks) // sort.SliceStable's reflection allocated twice a call
	for i := range s.Ranks {
		complete(&s.Ranks[i].Signals)
	}
	var buf [groupsBuf]Signals
	groups, filler, hasFiller := s.groups(buf[:0])
	var sum Signals
	sf := fieldsOf(&sum)
	var colBuf [groupsBuf]Value
	var col []Value
	if len(groups) > len(colBuf) {
		col = make([]Value, len(groups))
	} else {
		col = colBuf[:len(groups)]
	}
	for j := range sf {
		for i := range groups {
			col[i] = *fieldsOf(&groups[i])[j]
		}
		*sf[j] = strictSum(col)
	}
	// Ratios are not additive: recompute them.
	sum.UsageRatio = ratioOf(groups, fieldUsageRatio)
	sum.ReservedRatio = ratioOf(groups, fieldReservedRatio)
	sum.DemandRatio = ratioOf(groups, fieldDemandRatio)
	if len(groups) > 1 && sum.Used.OK() && sum.Capacity.OK() && sum.Used.Prov != Partial &&
		sum.Capacity.Prov != Partial && sum.UsageRatio.Prov != Partial {
		// Every rank knows its tokens: the ratio of the sums.
		sum.UsageRatio = sum.Used.Div(sum.Capacity)
	}
	if hasFiller {
		ff := fieldsOf(&filler)
		for j, v := range sf {
			if !v.OK() {
				*v = *ff[j]
			}
		}
	}
	// Spread only when every DP rank has a ratio.
	if len(groups) > 0 {
		lo, hi := math.Inf(1), math.Inf(-1)
		all := true
		for _, g := range groups {
			if !g.UsageRatio.OK() || g.UsageRatio.Prov == Implausible {
				all = false
				break
			}
			lo, hi = math.Min(lo, g.UsageRatio.V), math.Max(hi, g.UsageRatio.V)
		}
		if all {
			s.Spread = Value{V: hi - lo, Prov: Derived}
		}
	}
	own := fieldsOf(&s.Signals)
	for j, v := range fieldsOf(&sum) {
		if !own[j].OK() {
			*own[j] = *v
		}
	}
	complete(&s.Signals)
	s.Ranks = dropUnlabelled(s.Ranks)
}

// dropUnlabelled removes, once folded into the totals, the entry of series
// that carry no rank label (e.g. SGLang's tokenizer counters) when real
// ranks exist: it is not a rank, and showing it as one would be wrong.
func dropUnlabelled(ranks []Rank) []Rank {
	if len(ranks) < 2 {
		return ranks
	}
	out := ranks[:0]
	for _, r := range ranks {
		if r.RankID != (RankID{}) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return ranks
	}
	return out
}

// compareRanks orders ranks by DP, PP, then TP label (rankCompare).
func compareRanks(x, y Rank) int {
	a, b := &x.RankID, &y.RankID
	if c := rankCompare(a.DP, b.DP); c != 0 {
		return c
	}
	if c := rankCompare(a.PP, b.PP); c != 0 {
		return c
	}
	return rankCompare(a.TP, b.TP)
}

// rankCompare orders rank labels numerically when they are numbers: the
// shorter first, then by text.
func rankCompare(a, b string) int {
	if len(a) != len(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

// Available is capacity minus used (evictable prefix cache counts as
// available, since the engine reclaims it on demand), in tokens.
//
// It is unknown unless capacity and used are both whole and plausible: a
// partial or implausible input gives no number to plan with.
func (s *Signals) Available() Value {
	if !s.Capacity.Trusted() || !s.Used.Trusted() {
		return Value{}
	}
	v := s.Capacity.Sub(s.Used)
	if v.OK() && v.V < 0 {
		v.V = 0
	}
	if v.OK() && s.Capacity.Prov == Direct && s.Used.Prov == Direct {
		v.Prov = Derived
	}
	return v
}

// Headroom returns how many more requests of n tokens fit: per DP rank,
// floor(available / n), summed (a request cannot span DP ranks).
func (s *Server) Headroom(n int) Value {
	if n <= 0 {
		return Value{}
	}
	var buf [groupsBuf]Signals
	groups, _, _ := s.groups(buf[:0])
	if len(groups) == 0 {
		groups = append(groups, s.Signals)
	}
	var out Value
	for _, g := range groups {
		a := g.Available()
		if !a.OK() {
			if len(groups) == 1 {
				a = s.Available()
			}
			if !a.OK() {
				return Value{}
			}
		}
		fit := Value{V: math.Floor(a.V / float64(n)), Prov: worst(Derived, a.Prov)}
		out = sumOf(out, fit)
	}
	return out
}

// QueuedTotal is every queue summed (admission and PD queues).
func (q Queues) QueuedTotal() Value {
	var out Value
	for _, v := range []Value{q.Waiting, q.Prealloc, q.Bootstrap, q.Transfer, q.Inflight} {
		out = sumOf(out, v)
	}
	return out
}
