package stack

import (
	"fmt"

	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// The servers behind a level's KV sums. A `<level>:kvwatch_kv_*:sum` adds
// the servers that report used and capacity; a server that is down or
// reports neither is left out without a trace, and the sum is then a lower
// bound, not a total. These series say how many servers a sum covers.
// Routers and cache servers (role cache: LMCache, KVBM) hold no KV pool
// and are not counted.

// RecTargets is the number of a level's targets (up or not), routers and
// cache servers aside.
func RecTargets(l string) string { return l + ":" + signal.TargetUp.Name + ":count" }

// RecTargetsUp is how many of them kvwatch's last scrape reached.
func RecTargetsUp(l string) string { return recSum(l, signal.TargetUp) }

// RecReporting is how many servers the level's KV sums cover (those
// reporting both used and capacity tokens); 0, not absent, when none does.
func RecReporting(l string) string { return l + ":kvwatch_kv_reporting_servers:count" }

// RecPartial is 1 when the level's KV sums leave out some target (down, or
// not reporting used and capacity), else 0.
func RecPartial(l string) string { return l + ":kvwatch_kv_partial_sums:bool" }

// serverCounts appends the counts of level l to g (the aggregates group:
// the partial marker reads the counts recorded before it, and a level
// above the pool sums the counts of the level below, recorded earlier in
// g; below is that level, "" for the pool level, which counts the raw
// series).
//
// A lower level's reporting count is 0, not absent, for every group with a
// target, so their sum is too: a group of l with a target has a lower
// group with that target, hence a lower count (0 or more) to add. The
// "or targets * 0" of the pool level is not needed above it.
func serverCounts(g *rulefmt.RuleGroup, l level, below string) {
	rec := func(name, expr string) { g.Rules = append(g.Rules, rulefmt.Rule{Record: name, Expr: expr}) }
	b := by(l.by...)
	if below != "" {
		for _, name := range []func(string) string{RecTargets, RecTargetsUp, RecReporting} {
			rec(name(l.name), fmt.Sprintf("sum %s (%s)", b, name(below)))
		}
	} else {
		up := fmt.Sprintf(`%s{%s!~"%s|%s"}`, signal.TargetUp.Name, signal.LabelRole, kv.RoleRouter, kv.RoleCache)
		rec(RecTargets(l.name), fmt.Sprintf("count %s (%s)", b, up))
		rec(RecTargetsUp(l.name), fmt.Sprintf("sum %s (%s)", b, up))
		rec(RecReporting(l.name), fmt.Sprintf("count %s (%s and %s) or %s * 0", b,
			signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name, RecTargets(l.name)))
	}
	rec(RecPartial(l.name), fmt.Sprintf("%s > bool %s", RecTargets(l.name), RecReporting(l.name)))
}
