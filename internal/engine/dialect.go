package engine

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// mixedDialect warns (kv.WarnMixedDialect) when the page carries an
// engine's old and new name of one signal (a rename across versions) and
// they disagree on a rank: both per rank as the adapter reads them (fn:
// max for gauges, sum for counters, over the samples keep accepts, nil:
// all). The adapter reads the new name; the warning says so, so the two
// are never blended silently. Equal values (versions that wrote both from
// one statistic) are no warning.
func mixedDialect(p *expo.Page, srv *kv.Server, old, cur string, rank func(expo.Sample) kv.RankID, keep func(expo.Sample) bool, fn combineFn) {
	if !p.Has(old) || !p.Has(cur) {
		return
	}
	perRank := func(name string) map[kv.RankID]float64 {
		m := map[kv.RankID]float64{}
		for _, s := range p.Samples(name) {
			if (keep != nil && !keep(s)) || !expo.Finite(s.Value) {
				continue
			}
			id := rank(s)
			if v, ok := m[id]; ok {
				m[id] = fn(v, s.Value)
			} else {
				m[id] = s.Value
			}
		}
		return m
	}
	olds, curs := perRank(old), perRank(cur)
	for _, r := range sortedRanks(curs) {
		o, ok := olds[r]
		c := curs[r]
		if !ok || math.Abs(o-c) <= 1e-9*math.Max(1, math.Max(math.Abs(o), math.Abs(c))) {
			continue
		}
		srv.Warn(kv.WarnMixedDialect, "%s is %g but its older name %s is %g%s: two versions' names on one page; read %s",
			cur, c, old, o, rankText(r), cur)
		return
	}
}

// sortedRanks returns the map's ranks ordered by DP, PP, TP label
// (numbers by value), so that a warning names the same rank on every
// scrape.
func sortedRanks(m map[kv.RankID]float64) []kv.RankID {
	ids := make([]kv.RankID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	label := func(a, b string) int {
		if c := cmp.Compare(len(a), len(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	}
	slices.SortFunc(ids, func(a, b kv.RankID) int {
		if c := label(a.DP, b.DP); c != 0 {
			return c
		}
		if c := label(a.PP, b.PP); c != 0 {
			return c
		}
		return label(a.TP, b.TP)
	})
	return ids
}

// rankText names a rank for a warning: "" for a page without rank labels.
func rankText(r kv.RankID) string {
	out := ""
	for _, l := range []struct{ name, v string }{{"dp", r.DP}, {"tp", r.TP}, {"pp", r.PP}} {
		if l.v != "" {
			out += " " + l.name + "=" + l.v
		}
	}
	if out == "" {
		return ""
	}
	return " (rank" + out + ")"
}
