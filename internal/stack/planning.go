package stack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Capacity planning in the stack (docs/planning.md): the recording rules of
// the demand-aware time until a pool's free KV is gone, the alerts on it and
// on N−1 drain safety, the fleet dashboard's planning row, and the promtool
// tests of the rules.

// Recorded planning series, per pool (cluster, pool, role).
const (
	// RecPoolFillRate is the pool's KV fill rate in tokens/s: the sum of
	// its servers' deriv(used[15m]) (negative while draining).
	RecPoolFillRate = "pool:kvwatch_kv_used_tokens:deriv15m"
	// RecPoolFreeAfterDemand is the pool's free KV minus what its queued
	// requests need (where the engines report demand), in tokens; negative
	// when the queue alone would overfill it.
	RecPoolFreeAfterDemand = "pool:kvwatch_kv_free_after_demand_tokens"
	// RecPoolTimeToFull is the seconds until the free KV after demand is
	// gone at the fill rate: absent while the pool is not filling (a fill
	// rate below the floor), 0 when the queued demand alone fills it.
	RecPoolTimeToFull = "pool:kvwatch_kv_seconds_to_full:deriv15m"
	// RecPoolFilling is 1 while the pool fills (its fill rate is above the
	// floor, or the queued demand alone fills it), 0 when it is not
	// filling: "not filling" as a value, not an absent series.
	RecPoolFilling = "pool:kvwatch_kv_filling:deriv15m"
)

// FillFloorPer15m is the floor on the fill trend, as a share of the pool's
// capacity per 15 minutes: a pool filling more slowly than 1 % of its
// capacity per 15 minutes is "not filling" and forecasts nothing (noise on
// a flat pool would otherwise forecast a fill days away, or soon). Defined
// once in kv, where status and top compute the same forecast.
const FillFloorPer15m = kv.FillFloorPer15m

// fillWindow is the range of the fill trend.
const fillWindow = "15m"

// drainUnsafeFor is the hold time of KVPoolNMinusOneUnsafe: a pool must
// stay unsafe this long (a burst that passes is no reason to page).
const drainUnsafeFor = model.Duration(15 * time.Minute)

// Planning alert names; each has a section in docs/runbook.md.
const (
	AlertPoolFullSoon = "KVPoolFullSoon"
	AlertPoolDrain    = "KVPoolNMinusOneUnsafe"
)

// planningRecording appends the planning recording rules (pool level) to
// g, the aggregates group, after the pool sums they read.
func planningRecording(g *rulefmt.RuleGroup) {
	rec := func(name, expr string) { g.Rules = append(g.Rules, rulefmt.Rule{Record: name, Expr: expr}) }
	e := recordedForecast()
	rec(RecPoolFillRate, e.rate)
	rec(RecPoolFreeAfterDemand, e.free)
	rec(RecPoolTimeToFull, e.timeToFull(RecPoolFreeAfterDemand, RecPoolFillRate))
	rec(RecPoolFilling, fmt.Sprintf("clamp_max((%s > bool %s) + (%s <= bool 0), 1)", RecPoolFillRate, e.floor, RecPoolFreeAfterDemand))
}

// forecast holds the PromQL of the pool forecast.
type forecast struct{ rate, free, floor string }

// poolForecast is the forecast from raw kvwatch_* series only: what the
// recorded planning series must equal (the rule tests compare them), and
// what a query that does not read them computes.
func poolForecast() forecast {
	b := by(signal.LabelCluster, signal.LabelPool, signal.LabelRole)
	u, c := signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name
	return newForecast(fmt.Sprintf("sum %s (%s and %s)", b, u, c), fmt.Sprintf("sum %s (%s and %s)", b, c, u),
		fmt.Sprintf("sum %s (%s)", b, signal.KVDemandTokens.Name))
}

// recordedForecast is the same forecast for the planning recording rules,
// which run in the aggregates group after the pool rules: the pool's used,
// capacity and demand sums are those rules' series, the very expressions
// poolForecast inlines, evaluated at the same timestamp. The fill rate
// sums the servers' deriv, which no rule records.
func recordedForecast() forecast {
	return newForecast(recSum("pool", signal.KVUsedTokens), recSum("pool", signal.KVCapacityTokens),
		recSum("pool", signal.KVDemandTokens))
}

// newForecast is the forecast over the pool's sums of used, capacity and
// demand tokens (by cluster, pool, role).
func newForecast(used, capa, demand string) forecast {
	b := by(signal.LabelCluster, signal.LabelPool, signal.LabelRole)
	u, c := signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name
	return forecast{
		// Σ of the servers' trends: a server joining or leaving the pool
		// does not show as a jump in the pool's used tokens. Only servers
		// that report capacity too, as in the pool's sums.
		rate: fmt.Sprintf("sum %s (deriv(%s[%s]) and %s)", b, u, fillWindow, c),
		// Pools whose engines report no demand have no demand term (it is
		// unknown, and the forecast is the trend alone).
		free:  fmt.Sprintf("%s - %s - (%s or %s * 0)", capa, used, demand, used),
		floor: fmt.Sprintf("(%s * %s / %d)", capa, num(FillFloorPer15m), int((15 * time.Minute).Seconds())),
	}
}

// timeToFull is free / rate where the rate is above the floor, or 0 where
// the free KV after demand is already gone.
func (f forecast) timeToFull(free, rate string) string {
	return fmt.Sprintf("(clamp_min(%s, 0) / (%s > %s)) or clamp_min(%s <= 0, 0)", free, rate, f.floor, free)
}

// poolTemplate names a pool in alert texts from the labels it has,
// capitalized to start a sentence.
func poolTemplate(capital bool) string {
	named, unnamed := "pool", "the"
	if capital {
		named, unnamed = "Pool", "The"
	}
	return "{{ with $labels.pool }}" + named + " {{ . }} ({{ $labels.role }}{{ with $labels." + signal.LabelCluster + " }}, cluster {{ . }}{{ end }})" +
		"{{ else }}" + unnamed + " {{ $labels.role }} pool{{ with $labels." + signal.LabelCluster + " }} of cluster {{ . }}{{ end }}{{ end }}"
}

// planningAlerts returns the planning alert group.
func planningAlerts(o Options, alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.RuleGroup {
	a := o.Config.Alerts
	// Only the labels a pool has are named: "pool p1 (decode, cluster c1)",
	// and for servers without a pool label "the decode pool of cluster c1"
	// (never "pool  (decode)").
	pool, poolCap := poolTemplate(false), poolTemplate(true)
	within := int64(time.Duration(a.KVFullWithin) / time.Second)
	pl := strings.Join([]string{signal.LabelCluster, signal.LabelPool, signal.LabelRole}, ", ")
	return rulefmt.RuleGroup{Name: "kvwatch-planning-alerts", Rules: []rulefmt.Rule{
		alert(AlertPoolFullSoon, SeverityWarning, o.KVFullFor,
			// The recorded forecast of the aggregates group. Serve
			// evaluates that group first at the same timestamp; under
			// Prometheus, whose groups keep schedules of their own, the
			// value read may be one evaluation old (docs/stack.md). Inlined,
			// the forecast cost 2.9 % of serve's CPU at 2,000 servers, a
			// fifth of all the rules' (docs/benchmarks.md, "Fifth pass").
			// Only pools above KVFullMinUsage, as KVCacheFullSoon: a pool
			// filling from empty (a start, a warm-up) forecasts a short time
			// to full without being anywhere near it.
			fmt.Sprintf("%s < %d and on (%s) (sum by (%s) (%s) / sum by (%s) (%s) > %s)",
				RecPoolTimeToFull, within, pl, pl, signal.KVUsedTokens.Name, pl, signal.KVCapacityTokens.Name,
				strconv.FormatFloat(o.KVFullMinUsage, 'g', -1, 64)),
			// The value is the time to full: 0 is "full now".
			"KV cache of "+pool+" "+ifValue(poolFullNow, "is full", "will be full within "+a.KVFullWithin.String()),
			ifValue(poolFullNow,
				"The free KV of "+pool+" is gone now: what its servers hold plus what its queued requests need is at least its capacity.",
				"At the fill trend of the last "+fillWindow+" plus the KV its queued requests need, the free KV of "+pool+
					" is gone in {{ $value | humanizeDuration }} (threshold "+a.KVFullWithin.String()+").")),
		alert(AlertPoolDrain, SeverityWarning, drainUnsafeFor,
			fmt.Sprintf("%s < 0 and on (%s) (%s > 1)", signal.PoolDrainMarginRatio.Name, pl, signal.PoolServers.Name),
			poolCap+" cannot lose its largest server",
			"Draining the largest server of "+pool+" would put the rest above the "+pct(a.KVUsageWarning)+
				" warning: the margin is {{ $value | humanizePercentage }} of the rest's capacity. Add capacity before maintenance."),
	}}
}

// planningPanels are the fleet dashboard's capacity-planning row
// (docs/planning.md): how many more of today's requests fit, when each pool
// is full, whether it can lose a server, and what limits each server.
func planningPanels(o Options) []panelSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio, one := f(-1), f(1)
	within := time.Duration(a.KVFullWithin).Seconds()
	return []panelSpec{
		{kind: kindBarGauge, title: "Planning: requests of today's mix that still fit", unit: "short", w: 8, h: 8,
			description: "Per pool: free KV over the KV held per running request now (per DP rank, summed). Absent for idle pools: there is no mix to measure.",
			emptyOK:     "every selected pool is idle",
			queries:     []query{{expr: signal.PoolWorkloadHeadroomRequests.Name + poolSel(), legend: poolLegend, instant: true}},
			steps:       []step{{nil, red}, {f(1), orange}, {f(10), green}}},
		{kind: kindTable, title: "Planning: pool time to full (trend + queued demand)", unit: "s", w: 8, h: 8,
			description: fmt.Sprintf("Seconds until each pool's free KV, less what its queued requests need, is gone at the fill trend of the last 15m. "+
				"Pools filling more slowly than %g%% of capacity per 15m are not filling and absent here (see the filling state).", FillFloorPer15m*100),
			emptyOK: "no selected pool is filling",
			queries: []query{{expr: RecPoolTimeToFull + poolSel(), legend: poolLegend, instant: true}},
			steps:   []step{{nil, red}, {f(within), orange}, {f(4 * within), green}}},
		{kind: kindTimeseries, title: "Planning: N−1 drain margin", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: fmt.Sprintf("Per pool of more than one server: %s minus the usage the rest would have with its largest server drained "+
				"(used plus queued demand of the whole pool). Below 0: draining it is unsafe.", pct(a.KVUsageWarning)),
			emptyOK: "every selected pool has a single server (never N−1 safe)",
			queries: []query{{expr: signal.PoolDrainMarginRatio.Name + poolSel(), legend: poolLegend}},
			steps:   []step{{nil, red}, {f(0), orange}, {f(0.1), green}}},
		{kind: kindTimeseries, title: "Planning: pool saturation", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Capacity-weighted saturation of each pool: the fuller of KV and the batch per server, weighted by KV capacity.",
			queries:     []query{{expr: signal.PoolSaturationRatio.Name + poolSel(), legend: poolLegend}},
			steps:       usageSteps(o)},
		{kind: kindTable, title: "Planning: what limits each server", unit: "short", w: 12, h: 8,
			description: "The limiting factor of each server now: kv (usage over the warning, demand beyond free KV, or preemptions), batch (running-request limit reached), queue (requests wait while KV and batch have room).",
			emptyOK:     "no selected server is limited",
			queries:     []query{{expr: fmt.Sprintf(`%s%s == 1`, signal.LimitingFactor.Name, poolSel(signal.LabelFactor+`!="none"`)), legend: "{{server}} {{factor}}", instant: true}},
			steps:       []step{{nil, orange}}},
	}
}

// The promtool tests of the planning rules.

// humanizeDuration formats seconds like Prometheus's template function of
// that name (for whole seconds of at least 1).
func humanizeDuration(v float64) string {
	s := int64(v)
	days, hours, minutes, seconds := s/86400, s/3600%24, s/60%60, s%60
	switch {
	case days != 0:
		return fmt.Sprintf("%dd %dh %dm %ds", days, hours, minutes, seconds)
	case hours != 0:
		return fmt.Sprintf("%dh %dm %ds", hours, minutes, seconds)
	case minutes != 0:
		return fmt.Sprintf("%dm %ds", minutes, seconds)
	}
	return fmt.Sprintf("%.4gs", v)
}

// down is a promtool series starting at start and falling by step per sample.
func down(start, step float64, n int) string {
	return fmt.Sprintf("%s-%sx%d", num(start), num(step), n)
}

// poolLabels are the labels of a pool-level series as Prometheus scrapes
// them from kvwatch.
func poolLabels(pool, role string) map[string]string {
	return map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: pool, signal.LabelRole: role,
		"job": testJob, "instance": testInstance}
}

// planningRuleTests are the promtool tests of the planning rules. Every
// expected value is worked out by hand in the comments; the fill rates are
// 960 tokens/min = 16 tokens/s so that the regressions are exact.
func planningRuleTests(o Options, expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	o = o.WithDefaults()
	a := o.Config.Alerts
	step := mins(1)
	none := []expAlert{}
	rec := func(pool string) string {
		return renderLabels(map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: pool, signal.LabelRole: "decode"})
	}
	var tests []ruleTest

	// Time to full, evaluated at 20m over the 15m trend. The floor is 1 %
	// of capacity per 15 minutes: 100,000 × 0.01 / 900 s = 1.11 tokens/s.
	//   pf (fill): fill-0 100,000 from 40,000 up 16/s, fill-1 100,000 flat
	//     at 20,000. At 20m used 59,200 + 20,000 = 79,200 of 200,000: free
	//     120,800 / 16 = 7,550 s.
	//   pd (drain): from 90,000 down 16/s: not filling (rate −16).
	//   pl (flat): 50,000 flat: not filling (rate 0).
	//   pn (noise): up 60/min = 1 token/s, under the 1.11 floor: not filling.
	//   pq (demand only): 50,000 flat, 60,000 wanted: free after demand
	//     −10,000: full now, 0 s, filling.
	//   pb (fill and demand): from 40,000 up 16/s, 10,000 wanted: at 20m
	//     100,000 − 59,200 − 10,000 = 30,800 / 16 = 1,925 s.
	{
		n := 30
		s := func(server, pool string) srv { return srv{server, "decode", testCluster, pool} }
		capa := func(x srv) inputSeries { return inputSeries{x.sel(signal.KVCapacityTokens.Name), constant(100000, n)} }
		used := func(x srv, values string) inputSeries { return inputSeries{x.sel(signal.KVUsedTokens.Name), values} }
		f0, f1, dr, fl, no, dq, fb := s("fill-0", "pf"), s("fill-1", "pf"), s("drain-0", "pd"), s("flat-0", "pl"),
			s("noise-0", "pn"), s("demand-0", "pq"), s("both-0", "pb")
		in := []inputSeries{
			capa(f0), used(f0, ramp(40000, 960, n)), capa(f1), used(f1, constant(20000, n)),
			capa(dr), used(dr, down(90000, 960, n)),
			capa(fl), used(fl, constant(50000, n)),
			capa(no), used(no, ramp(50000, 60, n)),
			capa(dq), used(dq, constant(50000, n)), {dq.sel(signal.KVDemandTokens.Name), constant(60000, n)},
			capa(fb), used(fb, ramp(40000, 960, n)), {fb.sel(signal.KVDemandTokens.Name), constant(10000, n)},
		}
		at := mins(20)
		ttf := func(pool string, want ...float64) exprTest {
			e := exprTest{Expr: fmt.Sprintf("round(%s{pool=%q})", RecPoolTimeToFull, pool), EvalTime: at, ExpSamples: []expSample{}}
			for _, w := range want {
				e.ExpSamples = append(e.ExpSamples, expSample{rec(pool), w})
			}
			return e
		}
		filling := func(pool string, want float64) exprTest {
			return exprTest{Expr: fmt.Sprintf("%s{pool=%q}", RecPoolFilling, pool), EvalTime: at,
				ExpSamples: []expSample{{RecPoolFilling + rec(pool), want}}}
		}
		tests = append(tests, ruleTest{Interval: step, InputSeries: in, PromqlExprTests: []exprTest{
			ttf("pf", 7550), ttf("pd"), ttf("pl"), ttf("pn"), ttf("pq", 0), ttf("pb", 1925),
			filling("pf", 1), filling("pd", 0), filling("pl", 0), filling("pn", 0), filling("pq", 1), filling("pb", 1),
			{Expr: fmt.Sprintf("round(%s{pool=\"pd\"})", RecPoolFillRate), EvalTime: at, ExpSamples: []expSample{{rec("pd"), -16}}},
			{Expr: fmt.Sprintf("%s{pool=\"pq\"}", RecPoolFreeAfterDemand), EvalTime: at,
				ExpSamples: []expSample{{RecPoolFreeAfterDemand + rec("pq"), -10000}}},
		}})
	}

	// KVPoolFullSoon: 100,000 from 60,000 up 16/s; at minute t the free KV
	// is 40,000 − 960t, gone in (40,000 − 960t) / 16 = 2,500 − 60t s: under
	// the kv_full_within threshold from the first whole minute t past
	// (2,500 − within) / 60, firing kv_full_for later. A flat pool never fires.
	{
		within := time.Duration(a.KVFullWithin).Seconds()
		first := int((2500-within)/60) + 1
		fire := first + ceilMinutes(o.KVFullFor)
		n := fire + 5
		fill, flat := srv{"fill-0", "decode", testCluster, "pf"}, srv{"flat-0", "decode", testCluster, "pl"}
		value := 2500 - 60*float64(fire)
		if value > 0 && first > 0 {
			l := map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "pf", signal.LabelRole: "decode", "severity": SeverityWarning}
			e := expect(AlertPoolFullSoon, l, humanizeDuration(value))
			tests = append(tests, ruleTest{Interval: step,
				InputSeries: []inputSeries{
					{fill.sel(signal.KVCapacityTokens.Name), constant(100000, n)},
					{fill.sel(signal.KVUsedTokens.Name), ramp(60000, 960, n)},
					{flat.sel(signal.KVCapacityTokens.Name), constant(100000, n)},
					{flat.sel(signal.KVUsedTokens.Name), constant(95000, n)},
				},
				AlertRuleTests: []alertTest{
					{mins(fire - 1), AlertPoolFullSoon, none},
					{mins(fire), AlertPoolFullSoon, []expAlert{e}},
				}})
		}
	}

	// KVPoolNMinusOneUnsafe: pool pu's margin is −5 % for longer than the
	// hold; ps has +10 %; pool p1 has one server (kvwatch exports no
	// margin for it, and the servers guard would drop it anyway). The
	// decode servers without cluster and pool labels are a pool too, at
	// −20 %: its texts name only the role ("the decode pool", not
	// "pool  (decode)").
	{
		hold := ceilMinutes(drainUnsafeFor)
		n := hold + 10
		lbl := func(metric, pool string) string { return metric + renderLabels(poolLabels(pool, "decode")) }
		l := poolLabels("pu", "decode")
		l["severity"] = SeverityWarning
		bare := map[string]string{signal.LabelRole: "decode", "job": testJob, "instance": testInstance}
		bareAlert := map[string]string{signal.LabelRole: "decode", "job": testJob, "instance": testInstance, "severity": SeverityWarning}
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{lbl(signal.PoolDrainMarginRatio.Name, "pu"), constant(-0.05, n)},
				{lbl(signal.PoolServers.Name, "pu"), constant(2, n)},
				{lbl(signal.PoolDrainMarginRatio.Name, "ps"), constant(0.1, n)},
				{lbl(signal.PoolServers.Name, "ps"), constant(3, n)},
				{lbl(signal.PoolDrainMarginRatio.Name, "p1"), constant(-0.5, n)},
				{lbl(signal.PoolServers.Name, "p1"), constant(1, n)},
				{signal.PoolDrainMarginRatio.Name + renderLabels(bare), constant(-0.2, n)},
				{signal.PoolServers.Name + renderLabels(bare), constant(2, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(hold - 1), AlertPoolDrain, none},
				{mins(hold + 1), AlertPoolDrain, []expAlert{
					expect(AlertPoolDrain, l, humanizePercentage(-0.05)),
					expect(AlertPoolDrain, bareAlert, humanizePercentage(-0.2)),
				}},
			}})
	}
	return tests
}
