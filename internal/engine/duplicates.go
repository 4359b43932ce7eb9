package engine

import (
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
)

// duplicates counts the samples of name whose label set (the metric name
// aside: "sglang:x" and "sglang_x" fold into one canonical name) repeats an
// earlier sample's. A page must not hold one series twice; the adapters'
// reads keep one value by their rule, and the caller warns.
//
// The samples' series keys (expo.Sample.SeriesKey: the label set's hash
// without the metric name, kept by the parser with the label sets it
// shares) find the candidates; only samples with equal keys have their
// labels compared. A few samples are compared pairwise, more through a
// map from a pool.
func duplicates(p *expo.Page, name string) int {
	ss := p.Samples(name)
	if len(ss) < 2 {
		return 0
	}
	d := 0
	if len(ss) <= dupLinear {
		// The keys side by side: the pairs are compared in a few cache
		// lines, not across the samples.
		var keys [dupLinear]uint64
		for i := range ss {
			keys[i] = ss[i].SeriesKey()
		}
		for i := 1; i < len(ss); i++ {
			k := keys[i]
			for j := range i {
				if keys[j] == k && sameButName(ss[j].Labels, ss[i].Labels) {
					d++
					break
				}
			}
		}
		return d
	}
	seen := dupMaps.Get().(map[uint64]int)
	defer func() { clear(seen); dupMaps.Put(seen) }()
	var more map[uint64][]int // the rare label sets whose key an earlier, different one has
	for i, s := range ss {
		h := s.SeriesKey()
		j, ok := seen[h]
		if !ok {
			seen[h] = i
			continue
		}
		dup := sameButName(ss[j].Labels, s.Labels)
		for _, k := range more[h] {
			dup = dup || sameButName(ss[k].Labels, s.Labels)
		}
		if dup {
			d++
			continue
		}
		if more == nil {
			more = map[uint64][]int{}
		}
		more[h] = append(more[h], i)
	}
	return d
}

// dupLinear is the most samples duplicates compares pairwise.
const dupLinear = 16

var dupMaps = sync.Pool{New: func() any { return map[uint64]int{} }}

// sameButName reports whether a and b hold the same labels, the metric name
// aside.
func sameButName(a, b labels.Labels) bool {
	if labels.Equal(a, b) {
		return true
	}
	if a.Get(model.MetricNameLabel) == b.Get(model.MetricNameLabel) {
		return false
	}
	strip := func(l labels.Labels) labels.Labels {
		return labels.NewBuilder(l).Del(model.MetricNameLabel).Labels()
	}
	return labels.Equal(strip(a), strip(b))
}
