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

// serverCounts appends the counts of level l to g (the level's group: the
// partial marker reads the counts recorded before it in the same group).
func serverCounts(g *rulefmt.RuleGroup, l level) {
	rec := func(name, expr string) { g.Rules = append(g.Rules, rulefmt.Rule{Record: name, Expr: expr}) }
	b := by(l.by...)
	up := fmt.Sprintf(`%s{%s!~"%s|%s"}`, signal.TargetUp.Name, signal.LabelRole, kv.RoleRouter, kv.RoleCache)
	rec(RecTargets(l.name), fmt.Sprintf("count %s (%s)", b, up))
	rec(RecTargetsUp(l.name), fmt.Sprintf("sum %s (%s)", b, up))
	rec(RecReporting(l.name), fmt.Sprintf("count %s (%s and %s) or %s * 0", b,
		signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name, RecTargets(l.name)))
	rec(RecPartial(l.name), fmt.Sprintf("%s > bool %s", RecTargets(l.name), RecReporting(l.name)))
}
