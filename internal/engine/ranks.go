package engine

import (
	"sync"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// The ranks of a page as the adapters read them: a sample's rank labels,
// and the per-rank signals collected over a page's families (read),
// combined within a rank by max or sum.

// rankOfLabels reads the rank labels of a label set.
func rankOfLabels(l labels.Labels, dp, tp, pp string) kv.RankID {
	id := kv.RankID{}
	if dp != "" {
		id.DP = l.Get(dp)
	}
	if tp != "" {
		id.TP = l.Get(tp)
	}
	if pp != "" {
		id.PP = l.Get(pp)
	}
	return id
}

// ranks collects per-rank signals while an adapter reads a page. The
// signals live in one slice (a page has a few ranks: a linear search finds
// one faster than a map, and nothing is allocated per rank); past
// ranksIndexed ranks a map indexes them. A pointer from get is good until
// the next get.
type ranks struct {
	rs  []kv.Rank
	by  map[kv.RankID]int
	buf *[]kv.Rank // rs's pooled slice, until list
	// next is where get looks first: the place after the rank it found
	// last. A page lists a family's ranks in the order of the family
	// before, so the search mostly ends at the first comparison.
	next int
}

const ranksIndexed = 16

func newRanks() *ranks {
	buf := rankScratch.Get().(*[]kv.Rank)
	return &ranks{rs: (*buf)[:0], buf: buf}
}

// rankScratch holds the slices ranks collect into; list and rollup copy
// the ranks out at their exact number.
var rankScratch = sync.Pool{New: func() any { b := make([]kv.Rank, 0, 16); return &b }}

func (r *ranks) get(id kv.RankID) *kv.Signals {
	if r.by != nil {
		if i, ok := r.by[id]; ok {
			return &r.rs[i].Signals
		}
	} else {
		if i := r.next; i < len(r.rs) && r.rs[i].RankID == id {
			r.next = i + 1
			return &r.rs[i].Signals
		}
		for i := range r.rs {
			if r.rs[i].RankID == id {
				r.next = i + 1
				return &r.rs[i].Signals
			}
		}
	}
	r.rs = append(r.rs, kv.Rank{RankID: id})
	switch n := len(r.rs); {
	case r.by != nil:
		r.by[id] = n - 1
	case n > ranksIndexed:
		r.by = make(map[kv.RankID]int, 2*n)
		for i := range r.rs {
			r.by[r.rs[i].RankID] = i
		}
	}
	r.next = len(r.rs)
	return &r.rs[len(r.rs)-1].Signals
}

// list returns the collected ranks, in the order first seen; the ranks are
// done with once it is called (a get after it starts anew).
func (r *ranks) list() []kv.Rank {
	out := make([]kv.Rank, len(r.rs))
	copy(out, r.rs)
	r.release()
	return out
}

// rollup sets srv.Ranks to the collected ranks and rolls them up
// (kv.Server.Rollup), which sorts them and drops the unlabelled entry in
// place: in the pooled slice, so that only the ranks left are copied out,
// into a slice of their exact number that srv owns. srv keeps no reference
// to the pooled slice, which the next page's ranks reuse. The ranks are
// done with once it is called, as after list.
func (r *ranks) rollup(srv *kv.Server) {
	srv.Ranks = r.rs
	srv.Rollup()
	kept := make([]kv.Rank, len(srv.Ranks))
	copy(kept, srv.Ranks)
	srv.Ranks = kept
	r.release()
}

// release hands the pooled slice back (cleared: it holds label strings)
// and empties r.
func (r *ranks) release() {
	if r.buf != nil {
		clear(r.rs)
		*r.buf = r.rs[:0]
		rankScratch.Put(r.buf)
	}
	r.rs, r.by, r.buf, r.next = nil, nil, nil, 0
}

// len returns the number of ranks collected so far.
func (r *ranks) len() int { return len(r.rs) }

// each calls fn with every rank collected so far, in the order first seen
// (fn must not call get).
func (r *ranks) each(fn func(id kv.RankID, s *kv.Signals)) {
	for i := range r.rs {
		fn(r.rs[i].RankID, &r.rs[i].Signals)
	}
}

// combineFn merges two samples of the same rank: max for gauges that TP
// ranks duplicate, sum for counters split by another label.
type combineFn func(a, b float64) float64

func maxf(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}
func sumf(a, b float64) float64 { return a + b }

// read sets *field(rank) for every sample of name that keep accepts,
// combining samples of the same rank with fn. NaN and ±Inf samples are
// skipped (unknown, not zero). It reports whether any sample was used.
func (r *ranks) read(p *expo.Page, name string, rankFn func(expo.Sample) kv.RankID, keep func(expo.Sample) bool, fn combineFn, field func(*kv.Signals) *kv.Value, mk func(float64) kv.Value) bool {
	used := false
	for _, s := range p.Samples(name) {
		if keep != nil && !keep(s) {
			continue
		}
		if !expo.Finite(s.Value) {
			continue
		}
		f := field(r.get(rankFn(s)))
		if f.OK() {
			*f = mk(fn(f.V, s.Value))
		} else {
			*f = mk(s.Value)
		}
		used = true
	}
	return used
}
