package engine

import (
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Reading helpers shared by the adapters: rank labels, per-rank collection,
// single-series and summed reads, label lookups.

// rankOf reads the rank labels of a sample.
func rankOf(s expo.Sample, dp, tp, pp string) kv.RankID {
	id := kv.RankID{}
	if dp != "" {
		id.DP = s.Labels.Get(dp)
	}
	if tp != "" {
		id.TP = s.Labels.Get(tp)
	}
	if pp != "" {
		id.PP = s.Labels.Get(pp)
	}
	return id
}

// ranks collects per-rank signals while an adapter reads a page.
type ranks struct {
	order []kv.RankID
	by    map[kv.RankID]*kv.Signals
}

func newRanks() *ranks { return &ranks{by: map[kv.RankID]*kv.Signals{}} }

func (r *ranks) get(id kv.RankID) *kv.Signals {
	s, ok := r.by[id]
	if !ok {
		s = &kv.Signals{}
		r.by[id] = s
		r.order = append(r.order, id)
	}
	return s
}

// list returns the collected ranks.
func (r *ranks) list() []kv.Rank {
	out := make([]kv.Rank, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, kv.Rank{RankID: id, Signals: *r.by[id]})
	}
	return out
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

// firstLabel returns the first non-empty value of label among the samples
// of the names given, in order.
func firstLabel(p *expo.Page, label string, names ...string) string {
	for _, n := range names {
		for _, s := range p.Samples(n) {
			if v := s.Labels.Get(label); v != "" {
				return v
			}
		}
	}
	return ""
}

// sortedUnique returns the sorted distinct non-empty values.
func sortedUnique(vals []string) []string {
	m := map[string]struct{}{}
	for _, v := range vals {
		if v != "" {
			m[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// single returns the largest finite sample of name that keep accepts (nil:
// all): engines without ranks write one series, and duplicates are
// collapsed, not added.
func single(p *expo.Page, name string, keep func(expo.Sample) bool, mk func(float64) kv.Value) kv.Value {
	var out kv.Value
	for _, s := range p.Samples(name) {
		if (keep != nil && !keep(s)) || !expo.Finite(s.Value) {
			continue
		}
		if !out.OK() || s.Value > out.V {
			out = mk(s.Value)
		}
	}
	return out
}

// summed adds the finite samples of name that keep accepts (nil: all).
func summed(p *expo.Page, name string, keep func(expo.Sample) bool, mk func(float64) kv.Value) kv.Value {
	var total float64
	ok := false
	for _, s := range p.Samples(name) {
		if (keep != nil && !keep(s)) || !expo.Finite(s.Value) {
			continue
		}
		total += s.Value
		ok = true
	}
	if !ok {
		return kv.Value{}
	}
	return mk(total)
}

// duplicates counts the samples of name whose label set (the metric name
// aside: "sglang:x" and "sglang_x" fold into one canonical name) repeats an
// earlier sample's. A page must not hold one series twice; the adapters'
// reads keep one value by their rule, and the caller warns.
func duplicates(p *expo.Page, name string) int {
	ss := p.Samples(name)
	if len(ss) < 2 {
		return 0
	}
	var buf []byte
	seen := make(map[uint64][]int, len(ss))
	d := 0
	for i, s := range ss {
		var h uint64
		h, buf = s.Labels.HashWithoutLabels(buf, model.MetricNameLabel)
		dup := false
		for _, j := range seen[h] {
			if sameButName(ss[j].Labels, s.Labels) {
				dup = true
				break
			}
		}
		if dup {
			d++
			continue
		}
		seen[h] = append(seen[h], i)
	}
	return d
}

// sameButName reports whether a and b hold the same labels, the metric name
// aside.
func sameButName(a, b labels.Labels) bool {
	strip := func(l labels.Labels) labels.Labels {
		return labels.NewBuilder(l).Del(model.MetricNameLabel).Labels()
	}
	return labels.Equal(strip(a), strip(b))
}
