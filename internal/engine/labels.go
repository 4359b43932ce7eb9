package engine

import (
	"sort"

	"github.com/kvwatch/kvwatch/internal/expo"
)

// Label lookups shared by the adapters: the model name and other labels a
// page carries on some family, and the distinct values of a label.

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
