package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Reads of one family as one value, where the adapter keeps no ranks: the
// largest series (duplicates collapse) or the sum over the series.

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
