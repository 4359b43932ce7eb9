package stack

import (
	"github.com/kvwatch/kvwatch/internal/signal"
)

// countRuleTests checks the servers behind the KV sums, by hand. Pool p1
// (decode): decode-0 up with used and capacity, decode-1 up with used
// only (no capacity: left out of the sums), decode-2 down (no KV series):
// 3 targets, 2 up, 1 reporting, partial. Pool p2 (prefill): prefill-0 up
// and reporting: 1, 1, 1, not partial. Pool p3 (decode): decode-3 up with
// a usage ratio only (as LMDeploy): 1 target, 1 up, 0 reporting (a count
// of 0, not absent), partial. The router of p1 and the cache server of p2
// (an LMCache server: up, no KV series) are not counted (no router or
// cache series at all; p2 is not partial). The fleet's decode level: 4
// targets, 3 up, 1 reporting, partial.
func countRuleTests() []ruleTest {
	const n = 10
	d0, d1, d2 := server("decode-0", "decode", "p1"), server("decode-1", "decode", "p1"), server("decode-2", "decode", "p1")
	p0, d3 := server("prefill-0", "prefill", "p2"), server("decode-3", "decode", "p3")
	rt, lm := server("router-0", "router", "p1"), server("lmcache-0", "cache", "p2")
	up, used, capa := signal.TargetUp.Name, signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name
	pool := func(p, role string) string {
		return renderLabels(map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: p, signal.LabelRole: role})
	}
	fleet := renderLabels(map[string]string{signal.LabelRole: "decode"})
	at := mins(5)
	var exprs []exprTest
	check := func(name, labels string, want float64) {
		exprs = append(exprs, exprTest{Expr: name + labels, EvalTime: at, ExpSamples: []expSample{{name + labels, want}}})
	}
	for _, c := range []struct {
		labels                       string
		level                        string
		targets, upN, reporting, prt float64
	}{
		{pool("p1", "decode"), "pool", 3, 2, 1, 1},
		{pool("p2", "prefill"), "pool", 1, 1, 1, 0},
		{pool("p3", "decode"), "pool", 1, 1, 0, 1},
		{fleet, "fleet", 4, 3, 1, 1},
	} {
		check(RecTargets(c.level), c.labels, c.targets)
		check(RecTargetsUp(c.level), c.labels, c.upN)
		check(RecReporting(c.level), c.labels, c.reporting)
		check(RecPartial(c.level), c.labels, c.prt)
	}
	for _, role := range []string{"router", "cache"} {
		exprs = append(exprs, exprTest{Expr: RecTargets("pool") + `{role="` + role + `"}`, EvalTime: at, ExpSamples: []expSample{}})
	}
	return []ruleTest{{Interval: testStep,
		InputSeries: []inputSeries{
			{d0.sel(up), constant(1, n)}, {d0.sel(used), constant(500, n)}, {d0.sel(capa), constant(1000, n)},
			{d1.sel(up), constant(1, n)}, {d1.sel(used), constant(300, n)},
			{d2.sel(up), constant(0, n)},
			{p0.sel(up), constant(1, n)}, {p0.sel(used), constant(100, n)}, {p0.sel(capa), constant(4000, n)},
			{d3.sel(up), constant(1, n)}, {d3.sel(signal.KVUsageRatio.Name), constant(0.4, n)},
			{rt.sel(up), constant(1, n)},
			{lm.sel(up), constant(1, n)},
		},
		PromqlExprTests: exprs}}
}
