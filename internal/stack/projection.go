package stack

import (
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// The capacity projection over days in the stack (issue 30): the daily
// peak of each pool's KV load, the straight line through the last 14 days
// of it projected 30 days ahead (predict_linear), the alert when that
// reaches the capacity, the fleet dashboard's projection panel, and the
// alert's promtool tests (a file of their own, evaluated hourly: the
// rules' windows are days).
//
// What PromQL can do of `kvwatch plan` (internal/forecast): a least-squares
// line through the rolling daily peak, not a robust one; no split at a
// capacity change, no band, no servers to add. The alert says when to
// run `kvwatch plan`, which answers those. serve does not evaluate these
// groups: its history rarely keeps days, and its own projection
// (forecast.Projector) plans the history it keeps.

// AlertProjectionTestsFile holds the projection's promtool tests, evaluated
// hourly over weeks of hourly samples (the other test files evaluate every
// minute or faster, which over weeks takes minutes).
const AlertProjectionTestsFile = "rules/kvwatch-alerts-projection.test.yml"

// The projection's groups: Prometheus only (see ServeRules).
const (
	ProjectionGroup       = "kvwatch-projection"
	ProjectionAlertsGroup = "kvwatch-projection-alerts"
)

// Recorded projection series, per pool (cluster, pool, role).
const (
	// RecPoolLoadRatio is the pool's KV load (used plus queued demand,
	// used alone where the engines report no demand) over its capacity,
	// each averaged over alerts.kv_usage_warning_for: a burst shorter than
	// the warning's hold does not make a peak, as in `kvwatch plan`.
	RecPoolLoadRatio = "pool:kvwatch_kv_load_per_capacity:ratio_held"
	// RecPoolPeakRatio is the highest RecPoolLoadRatio of the last day:
	// the daily peak, with the daily cycle removed.
	RecPoolPeakRatio = "pool:kvwatch_kv_load_per_capacity:max1d"
	// RecPoolProjectedPeak is the daily peak projected projectionHorizon
	// ahead by the least-squares line through the last projectionWindow
	// of it; absent until the pool has projectionMinHistory of peaks.
	RecPoolProjectedPeak = "pool:kvwatch_kv_load_per_capacity:max1d_predict30d"
)

// AlertPoolProjectedFull is the projection's alert; it has a section in
// docs/runbook.md.
const AlertPoolProjectedFull = "KVPoolProjectedFull"

// The projection's windows.
const (
	projectionWindow = "14d"
	// projectionHorizon is how far ahead the peak is projected.
	projectionHorizon = 30 * 24 * time.Hour
	// projectionMinHistory is how many days of peaks a pool needs before
	// it is projected: a line through a few days projects a month ahead
	// from a weekday's swing.
	projectionMinHistory = "7d"
	// projectionFor is the alert's hold: the projection moves slowly, and
	// a day with a burst must not page.
	projectionFor = model.Duration(6 * time.Hour)
	// projectionInterval is the groups' evaluation interval: a daily peak
	// changes little within it, and each evaluation reads a day of every
	// pool's load and 14 days of its peaks.
	projectionInterval = model.Duration(5 * time.Minute)
	// projectionTestStep is the evaluation interval of the projection's
	// promtool tests: weeks of rules at a shorter one take minutes.
	projectionTestStep = model.Duration(time.Hour)
)

// projectionRecording is the recording group of the projection.
func projectionRecording(o Options) rulefmt.RuleGroup {
	o = o.WithDefaults()
	hold := "[" + o.Config.Alerts.KVUsageWarningFor.String() + "]"
	u, d, c := recSum("pool", signal.KVUsedTokens), recSum("pool", signal.KVDemandTokens), recSum("pool", signal.KVCapacityTokens)
	avg := func(s string) string { return "avg_over_time(" + s + hold + ")" }
	return rulefmt.RuleGroup{Name: ProjectionGroup, Interval: projectionInterval, Rules: []rulefmt.Rule{
		{Record: RecPoolLoadRatio, Expr: fmt.Sprintf("(%s + (%s or %s * 0)) / (%s > 0)", avg(u), avg(d), avg(u), avg(c))},
		// Only over a whole day: the first day's maximum, before the
		// pool's first daily peak, would make a ramp of a flat pool.
		{Record: RecPoolPeakRatio, Expr: fmt.Sprintf("max_over_time(%s[1d]) and %s offset 1d", RecPoolLoadRatio, RecPoolLoadRatio)},
		{Record: RecPoolProjectedPeak, Expr: fmt.Sprintf("predict_linear(%s[%s], %d) and %s offset %s",
			RecPoolPeakRatio, projectionWindow, int64(projectionHorizon.Seconds()), RecPoolPeakRatio, projectionMinHistory)},
	}}
}

// projectionAlerts is the projection's alert group.
func projectionAlerts(alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.RuleGroup {
	pool, horizon := poolTemplate(false), model.Duration(projectionHorizon).String()
	return rulefmt.RuleGroup{Name: ProjectionAlertsGroup, Interval: projectionInterval, Rules: []rulefmt.Rule{
		alert(AlertPoolProjectedFull, SeverityWarning, projectionFor, RecPoolProjectedPeak+" >= 1",
			"KV cache of "+pool+" is projected full within "+horizon,
			"At the trend of its daily peaks over the last "+projectionWindow+", the daily peak of KV load (used plus queued demand) of "+pool+
				" reaches {{ $value | humanizePercentage }} of its capacity in "+horizon+". `kvwatch plan` gives the date and the servers to add."),
	}}
}

// projectionPanels are the fleet dashboard's projection panel.
func projectionPanels() []panelSpec {
	return []panelSpec{
		{kind: kindTimeseries, title: "Projection: daily peak of KV load, and in 30 days", unit: "percentunit", min: f(0), w: 24, h: 8,
			description: "Per pool: the highest KV load (used plus queued demand, held for alerts.kv_usage_warning_for) over capacity in the last day, " +
				"and that peak 30 days ahead on the least-squares line through the last 14 days of it (once the pool has 7 days of peaks). " +
				"At 100%, " + AlertPoolProjectedFull + " warns. `kvwatch plan` gives the dates with their band and the servers to add.",
			emptyOK: "Prometheus holds less than a day of the selected pools' load (the projection needs 7 days)",
			queries: []query{
				{expr: RecPoolPeakRatio + poolSel(), legend: "peak " + poolLegend},
				{expr: RecPoolProjectedPeak + poolSel(), legend: "in 30d " + poolLegend},
			},
			steps: []step{{nil, green}, {f(0.9), orange}, {f(1), red}}},
	}
}

// The promtool tests of the projection.

// projectionAnnotations are the expected texts of AlertPoolProjectedFull.
func projectionAnnotations(l map[string]string, value string) (summary, desc string) {
	return "KV cache of " + poolWhere(l) + " is projected full within 30d",
		"At the trend of its daily peaks over the last 14d, the daily peak of KV load (used plus queued demand) of " + poolWhere(l) +
			" reaches " + value + " of its capacity in 30d. `kvwatch plan` gives the date and the servers to add."
}

// projectionRuleTests are the projection's promtool tests, hourly samples
// and evaluations over weeks; the windows (1d peaks, a 14d line, 30d
// ahead, 7d of peaks first, a 6h hold) are written out here by hand. Every
// pool has one server of 100,000 tokens.
//
// The ramp pool pr: used 40,000 + 100 per hour, no cycle. Its daily peak is
// its load now, (40,000 + 100h)/100,000, a straight line, so the projection
// is exact: at hour h, 0.4 + 0.001(h + 720) = 1.12 + 0.001h. The peak is
// absent until the load is a day old (h = 24), the projection until the
// peaks are 7 days old (h = 192), at or above 1 from then on: pending at
// 192, firing from 198 (the 6h hold) with 1.12 + 0.198 = 131.8%.
// Quiet throughout, in the same test: pn, whose daily peak is 80 % ± 5 %
// (alternating days, with ±2 % on every hour and a daily cycle down to
// 60 % of the peak at night): no growth, a projection far below 1; ph, flat
// at a 95 % peak with the cycle: high, not growing; ps, whose peak grows
// 0.25 % a day from 50 %: 56 % after 3 weeks, 64 % a month later.
//
// The cycling pool pc (another test: its projection is no straight line,
// so its value is not written out): its daily peak grows 2 % a day from
// 50 %, with the daily cycle and the noise. After 10 days the line through
// the peaks is at about 0.69 + 0.02 · 30 ≈ 1.29: firing; the flat pools
// are not, and a pool that started growing a day ago (pj, 60 % then 2 % a
// day) has fewer than 7 days of peaks and no projection at all.
func projectionRuleTests(o Options, expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	const days, size = 22, 100000
	n := days * 24
	// cycle is the share of the day's peak at hour h of the day: the peak
	// at 14:00, 60 % at night.
	cycle := func(h int) float64 {
		switch h % 24 {
		case 14:
			return 1
		case 12, 13, 15, 16:
			return 0.9
		case 8, 9, 10, 11, 17, 18, 19, 20:
			return 0.75
		}
		return 0.6
	}
	// noise is ±2 % on every hour, the same sequence for every run.
	noise := func(h int) float64 { return 1 + 0.02*float64((h*7)%5-2)/2 }
	hourly := func(peak func(day int) float64) string {
		vs := make([]string, n)
		for h := range n {
			if p := peak(h / 24); math.IsNaN(p) {
				vs[h] = "_"
			} else {
				vs[h] = num(math.Round(size * min(p*cycle(h)*noise(h), 1)))
			}
		}
		return strings.Join(vs, " ")
	}
	pool := func(p string, used string) []inputSeries {
		s := server(p+"-0", "decode", p)
		return []inputSeries{{s.sel(signal.KVCapacityTokens.Name), constant(size, n)}, {s.sel(signal.KVUsedTokens.Name), used}}
	}
	var quiet []inputSeries
	quiet = append(quiet, pool("pr", ramp(40000, 100, n))...)
	quiet = append(quiet, pool("pn", hourly(func(d int) float64 { return 0.8 + 0.05*float64(1-2*(d%2)) }))...)
	quiet = append(quiet, pool("ph", hourly(func(int) float64 { return 0.95 }))...)
	quiet = append(quiet, pool("ps", hourly(func(d int) float64 { return 0.5 + 0.0025*float64(d) }))...)
	l := map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "pr", signal.LabelRole: "decode", "severity": SeverityWarning}
	none := []expAlert{}
	hours := func(h int) model.Duration { return model.Duration(time.Duration(h) * time.Hour) }
	rec := func(p string) string {
		return renderLabels(map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: p, signal.LabelRole: "decode"})
	}

	var cyc []inputSeries
	cyc = append(cyc, pool("pc", hourly(func(d int) float64 { return 0.5 + 0.02*float64(d) }))...)
	cyc = append(cyc, pool("pn", hourly(func(d int) float64 { return 0.8 + 0.05*float64(1-2*(d%2)) }))...)
	cyc = append(cyc, pool("pj", hourly(func(d int) float64 {
		if d < 9 {
			return math.NaN()
		}
		return 0.6 + 0.02*float64(d-9)
	}))...)
	firing := func(p string) string {
		return fmt.Sprintf(`ALERTS{alertname=%q, alertstate="firing", %s=%q}`, AlertPoolProjectedFull, signal.LabelPool, p)
	}
	at10 := hours(10 * 24)
	return []ruleTest{
		{Interval: projectionTestStep, InputSeries: quiet,
			AlertRuleTests: []alertTest{
				{hours(191), AlertPoolProjectedFull, none},
				{hours(197), AlertPoolProjectedFull, none},
				{hours(198), AlertPoolProjectedFull, []expAlert{expect(AlertPoolProjectedFull, l, humanizePercentage(1.318))}},
				{hours(300), AlertPoolProjectedFull, []expAlert{expect(AlertPoolProjectedFull, l, humanizePercentage(1.42))}},
				{hours(days*24 - 1), AlertPoolProjectedFull, []expAlert{expect(AlertPoolProjectedFull, l, humanizePercentage(1.12+0.001*float64(days*24-1)))}},
			},
			PromqlExprTests: []exprTest{
				{Expr: RecPoolPeakRatio + `{pool="pr"}`, EvalTime: hours(23), ExpSamples: []expSample{}},
				{Expr: RecPoolProjectedPeak + `{pool="pr"}`, EvalTime: hours(191), ExpSamples: []expSample{}},
				{Expr: RecPoolPeakRatio + `{pool="pr"}`, EvalTime: hours(200), ExpSamples: []expSample{{RecPoolPeakRatio + rec("pr"), 0.6}}},
				{Expr: fmt.Sprintf("round(%s{pool=\"pr\"} * 10000)", RecPoolProjectedPeak), EvalTime: hours(200),
					ExpSamples: []expSample{{rec("pr"), 13200}}},
				{Expr: fmt.Sprintf("%s{pool=~\"pn|ph|ps\"} < bool 0.9", RecPoolProjectedPeak), EvalTime: hours(days*24 - 1),
					ExpSamples: []expSample{{rec("pn"), 1}, {rec("ps"), 1}, {rec("ph"), 0}}},
			}},
		{Interval: projectionTestStep, InputSeries: cyc,
			PromqlExprTests: []exprTest{
				{Expr: firing("pc"), EvalTime: at10, ExpSamples: []expSample{{firingLabels("pc"), 1}}},
				{Expr: firing("pn"), EvalTime: at10, ExpSamples: []expSample{}},
				{Expr: RecPoolProjectedPeak + `{pool="pj"}`, EvalTime: at10, ExpSamples: []expSample{}},
				{Expr: firing("pc"), EvalTime: hours(days*24 - 1), ExpSamples: []expSample{{firingLabels("pc"), 1}}},
			}},
	}
}

// firingLabels are the labels of pool p's firing AlertPoolProjectedFull in
// the ALERTS series.
func firingLabels(p string) string {
	return "ALERTS" + renderLabels(map[string]string{"alertname": AlertPoolProjectedFull, "alertstate": "firing",
		signal.LabelCluster: testCluster, signal.LabelPool: p, signal.LabelRole: "decode", "severity": SeverityWarning})
}

// projectionTests is the promtool test file of the projection.
func projectionTests(o Options) ruleTestFile {
	o = o.WithDefaults()
	expect := func(name string, l map[string]string, value string) expAlert {
		s, d := projectionAnnotations(l, value)
		return expAlert{l, valueUnitAnnotation(name, map[string]string{"summary": s, "description": d,
			"runbook_url": o.RunbookURL + "#" + strings.ToLower(name)})}
	}
	return ruleTestFile{
		RuleFiles:          []string{path.Base(RecordingRulesFile), path.Base(AlertRulesFile)},
		EvaluationInterval: projectionTestStep,
		GroupEvalOrder:     groupOrder(o),
		Tests:              projectionRuleTests(o, expect),
	}
}
