package stack

import (
	"fmt"
	"sort"

	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// The pool, cluster and fleet aggregates of the recording rules
// (AggregatesGroup): the levels, their sums, the counts of the servers
// behind the sums, and the promtool tests of both.

// level is an aggregation level of the recording rules. Every level keeps
// role: prefill and decode KV mean different things and are never summed.
type level struct {
	name string
	by   []string
}

func levels() []level {
	return []level{
		{"pool", []string{signal.LabelCluster, signal.LabelPool, signal.LabelRole}},
		{signal.LabelCluster, []string{signal.LabelCluster, signal.LabelRole}},
		{"fleet", []string{signal.LabelRole}},
	}
}

// aggregates appends the rules of level l to g. below is the level under
// it ("" for pool, the lowest): its series, recorded earlier in g, are
// what l sums, rather than every server's raw series again. A sum of the
// lower level's sums is the same sum: every level keeps role and a subset
// of the lower one's labels, so each lower group falls into exactly one
// group of l (a series without cluster or pool is a group without that
// label at every level, as in a direct sum). The pool level sums the raw
// series, and the server rates.
//
// The values are those of the direct sums (internal/alerting's
// TestAggregatesEqualDirect compares both), token and request counts bit
// for bit. Rates are not whole numbers, and a sum of sums adds them in
// another order: they may differ in the last bit of the float64. In
// serve's history, which stores rates rounded to 21 significant bits, a
// cluster or fleet rate sums rounded pool or cluster rates: within 4·2^-21
// of the direct sum's stored value (one or two units of its last kept
// bit), the hit ratios within 10·2^-21.
func aggregates(g *rulefmt.RuleGroup, l level, below string) {
	rec := func(name, expr string) { g.Rules = append(g.Rules, rulefmt.Rule{Record: name, Expr: expr}) }
	u, c := signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name
	b := by(l.by...)
	// sum is the level's sum of metric m by labels: from raw when l is the
	// pool level (m's name, or raw for an expression), else of the lower
	// level's recorded sum.
	sum := func(m signal.Metric, raw string, labels ...string) string {
		if below == "" {
			return fmt.Sprintf("sum %s (%s)", by(labels...), raw)
		}
		return fmt.Sprintf("sum %s (%s)", by(labels...), recSum(below, m))
	}
	// Only servers that report both used and capacity count on either
	// side of the ratio; a zero denominator gives no result.
	rec(recSum(l.name, signal.KVUsedTokens), sum(signal.KVUsedTokens, u+" and "+c, l.by...))
	rec(recSum(l.name, signal.KVCapacityTokens), sum(signal.KVCapacityTokens, c+" and "+u, l.by...))
	rec(RecUsageRatio(l.name), fmt.Sprintf("%s / (%s > 0)",
		recSum(l.name, signal.KVUsedTokens), recSum(l.name, signal.KVCapacityTokens)))
	rec(recSum(l.name, signal.KVAvailableTokens), sum(signal.KVAvailableTokens, signal.KVAvailableTokens.Name, l.by...))
	rec(recSum(l.name, signal.KVDemandTokens), sum(signal.KVDemandTokens, signal.KVDemandTokens.Name, l.by...))
	// The capacity of the servers that report demand is recorded at no
	// level: the denominator sums the raw series at every level.
	rec(RecDemandRatio(l.name), fmt.Sprintf("%s / (sum %s (%s and %s) > 0)",
		recSum(l.name, signal.KVDemandTokens), b, c, signal.KVDemandTokens.Name))
	rec(recSum(l.name, signal.KVHeadroomRequests), sum(signal.KVHeadroomRequests, signal.KVHeadroomRequests.Name,
		append(l.by, signal.LabelRequest)...))
	rec(recSum(l.name, signal.RequestsRunning), sum(signal.RequestsRunning, signal.RequestsRunning.Name, l.by...))
	rec(recSum(l.name, signal.RequestsQueued), sum(signal.RequestsQueued, signal.RequestsQueued.Name,
		append(l.by, signal.LabelQueue)...))
	lower := below
	if lower == "" {
		lower = "server"
	}
	for _, m := range rateMetrics() {
		rec(recRate(l.name, m), fmt.Sprintf("sum %s (%s)", b, recRate(lower, m)))
	}
	rec(RecHitRatio(l.name), fmt.Sprintf("%s / (%s > 0)",
		recRate(l.name, signal.PrefixCacheHitTokens), recRate(l.name, signal.PrefixCacheQueryTokens)))
	serverCounts(g, l, below)
}

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

// The cluster and fleet rules sum the level below's recorded series, not
// every server's raw series again. aggregateRuleTests pins what they
// record over a fleet built for the cases where the two could differ;
// every expected value is worked out here from the servers themselves
// (aggServer, summed per group in Go), not from any rule, so they are the
// values of a direct sum over the servers (the rules before, which summed
// every server's raw series at every level, pass these tests unchanged, in
// promtool 2 and 3 and vmalert-tool).
//
//	cluster c1: pool p1 decode: decode-0 and decode-1 reporting, decode-2
//	              down (no KV series): partial sums;
//	            pool p2 decode: decode-3 (c1 decode has two pools);
//	            no pool, decode: decode-4 (a target without a pool label);
//	            pool p2 prefill: prefill-0;
//	            router-0 (pool p1: requests but no KV, never counted) and
//	              lmcache-0 (role cache, pool p2: up only, never counted).
//	cluster c2: pool p1 decode: decode-5 (the pool name p1 again: another
//	              pool, c1 and c2 apart);
//	            pool p1 prefill: prefill-1, a usage ratio only (no used or
//	              capacity tokens, as LMDeploy): c2 prefill has a target
//	              and no reporting server, count 0, partial 1;
//	            pool p3 unified: unified-0, a usage ratio only: the role
//	              has no reporting server at any level (0 up to the fleet).
//	no cluster: decode-6 (no cluster, no pool) and decode-7 (pool px, no
//	              cluster): one cluster-level group {role="decode"}.
//
// Rates: counters rising by a multiple of 15 a minute, sampled every
// minute, so every rate (k/4 per second) and sum of rates is exact in
// float64 at the evaluation time, in PromQL and MetricsQL alike. The
// capacities and query rates of every group are 2^a 5^b, so each ratio is
// a short decimal: VictoriaMetrics keeps 12 significant digits, and
// vmalert-tool runs these tests too.
type aggServer struct {
	srv
	up float64 // kvwatch_target_up
	// used, capa, avail, demand, running: the gauges, none where < 0.
	used, capa, avail, demand, running float64
	// headroom by request_tokens, queued by queue.
	headroom, queued map[string]float64
	// perMin are the counters' rises a minute, in rateMetrics order; nil
	// for none.
	perMin []float64
	// ratioOnly: a usage ratio and no used or capacity tokens.
	ratioOnly bool
}

// aggFleet is the fleet of aggregateRuleTests.
func aggFleet() []aggServer {
	none := -1.0
	hr := func(small, large float64) map[string]float64 { return map[string]float64{"1024": small, "8192": large} }
	q := func(waiting, transfer float64) map[string]float64 {
		return map[string]float64{signal.QueueWaiting: waiting, signal.QueueTransfer: transfer}
	}
	s := func(name, role, cluster, pool string) srv { return srv{name, role, cluster, pool} }
	return []aggServer{
		{s("decode-0", "decode", "c1", "p1"), 1, 900, 1000, 100, 2000, 4, hr(3, 1), q(2, 1), []float64{30, 60, 15, 120, 60}, false},
		{s("decode-1", "decode", "c1", "p1"), 1, 300, 2000, 1700, none, 1, hr(9, 2), q(0, 0), []float64{0, 60, 0, 60, 30}, false},
		{s("decode-2", "decode", "c1", "p1"), 0, none, none, none, none, none, nil, nil, nil, false},
		{s("decode-3", "decode", "c1", "p2"), 1, 200, 1000, 800, 500, 2, hr(2, 0), q(1, 3), []float64{60, 120, 30, 240, 120}, false},
		{s("decode-4", "decode", "c1", ""), 1, 100, 1000, 900, none, 0, hr(5, 1), q(0, 0), []float64{15, 60, 0, 60, 15}, false},
		{s("prefill-0", "prefill", "c1", "p2"), 1, 100, 4000, 3900, none, 3, nil, q(5, 0), []float64{45, 60, 0, 600, 15}, false},
		{s("router-0", string(kv.RoleRouter), "c1", "p1"), 1, none, none, none, none, 7, nil, q(4, 0), nil, false},
		{s("lmcache-0", string(kv.RoleCache), "c1", "p2"), 1, none, none, none, none, none, nil, nil, nil, false},
		{s("decode-5", "decode", "c2", "p1"), 1, 400, 2000, 1600, 1000, 5, hr(4, 1), q(0, 2), []float64{30, 60, 15, 120, 60}, false},
		{s("prefill-1", "prefill", "c2", "p1"), 1, none, none, none, none, none, nil, nil, nil, true},
		{s("unified-0", "unified", "c2", "p3"), 1, none, none, none, none, none, nil, nil, nil, true},
		{s("decode-6", "decode", "", ""), 1, 50, 200, 150, 100, 1, hr(1, 0), q(0, 0), []float64{0, 60, 0, 60, 15}, false},
		{s("decode-7", "decode", "", "px"), 1, 150, 800, 650, 460, 0, hr(2, 0), q(1, 0), []float64{15, 60, 0, 15, 15}, false},
	}
}

// aggSums sums one quantity per group of a level: groups[labels] is the
// sum, and only groups some server adds to are present (as in PromQL, a sum
// over no series is absent).
type aggSums map[string]float64

// aggExpected is what level l records for fleet, by recorded name: each
// name's samples as rendered labels → value.
func aggExpected(l level, fleet []aggServer) map[string]aggSums {
	out := map[string]aggSums{}
	add := func(name string, key map[string]string, v float64) {
		if out[name] == nil {
			out[name] = aggSums{}
		}
		out[name][renderLabels(key)] += v
	}
	group := func(x aggServer, extra ...string) map[string]string {
		k := map[string]string{}
		for _, n := range l.by {
			if v := x.labels()[n]; v != "" {
				k[n] = v
			}
		}
		for i := 0; i+1 < len(extra); i += 2 {
			k[extra[i]] = extra[i+1]
		}
		return k
	}
	// capDemand is the capacity of the servers that report demand, the
	// demand ratio's denominator.
	capDemand := aggSums{}
	for _, x := range fleet {
		g := group(x)
		reporting := x.used >= 0 && x.capa >= 0
		if reporting {
			add(recSum(l.name, signal.KVUsedTokens), g, x.used)
			add(recSum(l.name, signal.KVCapacityTokens), g, x.capa)
			add(RecReporting(l.name), g, 1)
		}
		for _, m := range []struct {
			metric signal.Metric
			v      float64
		}{{signal.KVAvailableTokens, x.avail}, {signal.KVDemandTokens, x.demand}, {signal.RequestsRunning, x.running}} {
			if m.v >= 0 {
				add(recSum(l.name, m.metric), g, m.v)
			}
		}
		if x.demand >= 0 && x.capa >= 0 {
			capDemand[renderLabels(g)] += x.capa
		}
		for r, v := range x.headroom {
			add(recSum(l.name, signal.KVHeadroomRequests), group(x, signal.LabelRequest, r), v)
		}
		for q, v := range x.queued {
			add(recSum(l.name, signal.RequestsQueued), group(x, signal.LabelQueue, q), v)
		}
		for i, m := range rateMetrics() {
			if x.perMin != nil {
				add(recRate(l.name, m), g, x.perMin[i]/60)
			}
		}
		if x.role != string(kv.RoleRouter) && x.role != string(kv.RoleCache) {
			add(RecTargets(l.name), g, 1)
			add(RecTargetsUp(l.name), g, x.up)
			add(RecReporting(l.name), g, 0) // 0, not absent, where none reports
		}
	}
	ratio := func(name string, num, den aggSums) {
		for k, d := range den {
			if n, ok := num[k]; ok && d > 0 {
				if out[name] == nil {
					out[name] = aggSums{}
				}
				out[name][k] = n / d
			}
		}
	}
	ratio(RecUsageRatio(l.name), out[recSum(l.name, signal.KVUsedTokens)], out[recSum(l.name, signal.KVCapacityTokens)])
	ratio(RecDemandRatio(l.name), out[recSum(l.name, signal.KVDemandTokens)], capDemand)
	ratio(RecHitRatio(l.name), out[recRate(l.name, signal.PrefixCacheHitTokens)], out[recRate(l.name, signal.PrefixCacheQueryTokens)])
	partial := aggSums{}
	for k, n := range out[RecTargets(l.name)] {
		partial[k] = 0
		if n > out[RecReporting(l.name)][k] {
			partial[k] = 1
		}
	}
	out[RecPartial(l.name)] = partial
	return out
}

// aggregateRuleTests checks every cluster and fleet rule over aggFleet at
// 10m (a full 5m rate window).
func aggregateRuleTests() []ruleTest {
	const n = 15
	fleet := aggFleet()
	var in []inputSeries
	for _, x := range fleet {
		in = append(in, inputSeries{x.sel(signal.TargetUp.Name), constant(x.up, n)})
		for _, g := range []struct {
			metric signal.Metric
			v      float64
		}{{signal.KVUsedTokens, x.used}, {signal.KVCapacityTokens, x.capa}, {signal.KVAvailableTokens, x.avail},
			{signal.KVDemandTokens, x.demand}, {signal.RequestsRunning, x.running}} {
			if g.v >= 0 {
				in = append(in, inputSeries{x.sel(g.metric.Name), constant(g.v, n)})
			}
		}
		for _, r := range sortedKeys(x.headroom) {
			in = append(in, inputSeries{x.sel(signal.KVHeadroomRequests.Name, signal.LabelRequest, r), constant(x.headroom[r], n)})
		}
		for _, q := range sortedKeys(x.queued) {
			in = append(in, inputSeries{x.sel(signal.RequestsQueued.Name, signal.LabelQueue, q), constant(x.queued[q], n)})
		}
		for i, m := range rateMetrics() {
			if x.perMin != nil {
				in = append(in, inputSeries{x.sel(m.Name), ramp(0, x.perMin[i], n)})
			}
		}
		if x.ratioOnly {
			in = append(in, inputSeries{x.sel(signal.KVUsageRatio.Name), constant(0.4, n)})
		}
	}
	var exprs []exprTest
	for _, l := range levels()[1:] {
		want := aggExpected(l, fleet)
		for _, name := range aggregateNames(l.name) {
			e := exprTest{Expr: name, EvalTime: mins(10), ExpSamples: []expSample{}}
			for _, k := range sortedKeys(want[name]) {
				e.ExpSamples = append(e.ExpSamples, expSample{name + k, want[name][k]})
			}
			exprs = append(exprs, e)
		}
	}
	return []ruleTest{{Interval: testStep, InputSeries: in, PromqlExprTests: exprs}}
}

// aggregateNames are the series every aggregation level records, in rule
// order.
func aggregateNames(l string) []string {
	out := []string{recSum(l, signal.KVUsedTokens), recSum(l, signal.KVCapacityTokens), RecUsageRatio(l),
		recSum(l, signal.KVAvailableTokens), recSum(l, signal.KVDemandTokens), RecDemandRatio(l),
		recSum(l, signal.KVHeadroomRequests), recSum(l, signal.RequestsRunning), recSum(l, signal.RequestsQueued)}
	for _, m := range rateMetrics() {
		out = append(out, recRate(l, m))
	}
	return append(out, RecHitRatio(l), RecTargets(l), RecTargetsUp(l), RecReporting(l), RecPartial(l))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

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
