package engine

import (
	"slices"
	"strings"
)

// ColonPrefixes returns the prefixes before the colon of the names the
// adapters read ("sglang" for sglang:token_usage), sorted: expo folds the
// underscore form some versions and relabelling setups write
// (sglang_token_usage) into the colon form for these, and only these. They
// are derived from MetricNames, so a new engine with colon names needs no
// list kept by hand.
func (r *Registry) ColonPrefixes() []string {
	var out []string
	for _, a := range r.Adapters() {
		for _, n := range a.MetricNames() {
			if p, _, ok := strings.Cut(n, ":"); ok && p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}
