package stack

import (
	"fmt"
	"time"

	"github.com/kvwatch/kvwatch/internal/signal"
)

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
