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
// list kept by hand. A prefix that some adapter also reads in underscore
// form (lmcache: for the in-process LMCache names, lmcache_mp_ for the
// multi-process server's) is not folded: folding would rename the names
// that adapter reads.
func (r *Registry) ColonPrefixes() []string {
	var out, names []string
	for _, a := range r.Adapters() {
		for _, n := range a.MetricNames() {
			names = append(names, n)
			if p, _, ok := strings.Cut(n, ":"); ok && p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	out = slices.DeleteFunc(out, func(p string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, p+"_") })
	})
	slices.Sort(out)
	return out
}
