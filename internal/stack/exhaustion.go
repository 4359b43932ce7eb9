package stack

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// KV exhaustion in the stack (issue 28): the fast window of the KV alerts,
// the "full now" texts of the full-soon alerts, and their promtool tests.
//
// A KV cache fills in seconds (5 % to 100 % in 25 s on a decode server),
// while the slow windows (KVCacheUsageCritical, KVCacheUsageHigh) hold
// their threshold for minutes so that bursts do not page. In the style of
// SRE burn-rate alerts, a fast window with a high threshold pages on a
// full cache: KVCacheExhausted fires when every sample of
// alerts.kv_usage_exhausted_window is above alerts.kv_usage_exhausted,
// with no for-duration. A cache that reaches the threshold and stays
// there fires within the window and one evaluation interval; a burst to
// full shorter than the window less one scrape interval does not
// (docs/stack.md, "Fast and slow KV alerts").

// AlertKVExhausted is the fast KV alert; it has a section in docs/runbook.md.
const AlertKVExhausted = "KVCacheExhausted"

// AlertFastTestsFile holds the promtool tests of the fast window. They
// run at the real evaluation interval (global.evaluation_interval) on
// series at the real scrape intervals, which the tests of AlertTestsFile
// (one evaluation a minute) cannot resolve.
const AlertFastTestsFile = "rules/kvwatch-alerts-fast.test.yml"

// fillDuration and spikeDuration are the fill and the burst of the fast
// window's tests: a cache filled from 5 % to 100 % in 25 s, and a burst at
// 100 % for 20 s that drains.
const (
	fillDuration  = 25 * time.Second
	spikeDuration = 20 * time.Second
)

// exhaustedAlert returns KVCacheExhausted (in the kv group).
func exhaustedAlert(o Options, srvLabels string, alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.Rule {
	a := o.Config.Alerts
	w := a.KVUsageExhaustedWindow.String()
	// No for-duration: the window is the hold. min_over_time is above the
	// threshold only when every sample of the window is.
	return alert(AlertKVExhausted, SeverityCritical, 0,
		fmt.Sprintf("min_over_time(%s[%s]) > %s", signal.KVUsageRatio.Name, w, num(a.KVUsageExhausted)),
		"KV cache of "+srvLabels+" is exhausted",
		"Every sample of the KV cache usage of {{ $labels.server }} in the last "+w+" is above "+pct(a.KVUsageExhausted)+
			": the cache is full. New requests wait for KV, and vLLM preempts or SGLang retracts running ones.")
}

// ifValue is an alert text that reads then while the comparison cmp of
// $value (e.g. "gt $value 0.99") holds, and otherwise else.
func ifValue(cmp, then, otherwise string) string {
	return "{{ if " + cmp + " }}" + then + "{{ else }}" + otherwise + "{{ end }}"
}

// tmplFloat writes v as a float constant of Go's templates: $value is a
// float64, and comparing it with an integer constant ("1") is an error.
func tmplFloat(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// serverFullNow is the condition on KVCacheFullSoon's value (the usage
// now) under which its texts say the cache is full now: the usage is above
// the fast window's threshold.
func serverFullNow(o Options) string {
	return "gt $value " + tmplFloat(o.Config.Alerts.KVUsageExhausted)
}

// poolFullNow is the condition on KVPoolFullSoon's value (the seconds to
// full) under which its texts say the pool is full now: 0, the free KV
// after the queued demand is gone.
const poolFullNow = "le $value 0.0"

// fullNowRuleTests are the promtool tests of the full-now texts, at the
// tests' one-minute steps.
//
// KVCacheFullSoon: decode-0 is at a tenth of the way from
// KVFullMinUsage to full at 0 (55 % at the default 50 %), six tenths at 1m
// (80 %) and 100 % from 2m on: predict_linear over 15m says full (the
// slope of a filled cache is positive, and a flat 100 % forecasts
// 100 %), and the usage is above KVFullMinUsage, from 1m on; after
// KVFullFor it fires with the usage now, 100 %: "is full". decode-1 stays
// at the first value: never.
//
// KVPoolFullSoon: pool pq holds two tenths of the way from KVFullMinUsage
// to full of its 100,000 tokens (60,000 at the default), flat, and its
// queued requests need 10,000 more than the rest: free after demand
// −10,000, time to full 0 from the first evaluation on, usage above
// KVFullMinUsage. After KVFullFor it fires: "is full".
func fullNowRuleTests(o Options, expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	o = o.WithDefaults()
	none := []expAlert{}
	dec, dec1 := server("decode-0", "decode", "p1"), server("decode-1", "decode", "p1")
	var tests []ruleTest
	{
		n := ceilMinutes(afterFor(mins(1), o.KVFullFor)) + 5
		l := dec.alertLabels(SeverityWarning)
		way := func(f float64) float64 { return o.KVFullMinUsage + (1-o.KVFullMinUsage)*f }
		tests = append(tests, ruleTest{Interval: testStep,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), num(way(0.1)) + " " + num(way(0.6)) + " " + constant(1, n-2)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(way(0.1), n)},
			},
			AlertRuleTests: []alertTest{
				{0, AlertKVFullSoon, none},
				{beforeFor(mins(1), o.KVFullFor), AlertKVFullSoon, none},
				{afterFor(mins(1), o.KVFullFor), AlertKVFullSoon, []expAlert{expect(AlertKVFullSoon, l, humanizePercentage(1))}},
			}})
	}
	{
		n := ceilMinutes(afterFor(0, o.KVFullFor)) + 5
		used := math.Round(100000 * (o.KVFullMinUsage + (1-o.KVFullMinUsage)*0.2))
		pq := srv{"demand-0", "decode", testCluster, "pq"}
		l := map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "pq", signal.LabelRole: "decode", "severity": SeverityWarning}
		tests = append(tests, ruleTest{Interval: testStep,
			InputSeries: []inputSeries{
				{pq.sel(signal.KVCapacityTokens.Name), constant(100000, n)},
				{pq.sel(signal.KVUsedTokens.Name), constant(used, n)},
				{pq.sel(signal.KVDemandTokens.Name), constant(100000-used+10000, n)},
			},
			AlertRuleTests: []alertTest{
				{beforeFor(0, o.KVFullFor), AlertPoolFullSoon, none},
				{afterFor(0, o.KVFullFor), AlertPoolFullSoon, []expAlert{expect(AlertPoolFullSoon, l, humanizeDuration(0))}},
			}})
	}
	return tests
}

// cadence is how often one evaluator's series of the KV usage has a
// sample, and the burst it must ride out.
type cadence struct {
	step  time.Duration // the sample interval
	spike time.Duration // a burst to 100 % as the series shows it
}

// cadences are the two evaluators of the rules: serve, over its own
// scrapes of the engines (global.scrape_interval), and the stack's
// Prometheus, over its scrapes of serve (Options.ScrapeInterval), where
// serve's answer stays at a burst's value until serve's next scrape, up
// to one of serve's scrape intervals longer than the burst.
func cadences(o Options) []cadence {
	s := time.Duration(o.Config.Global.ScrapeInterval)
	out := []cadence{{s, spikeDuration}}
	if p := time.Duration(o.ScrapeInterval); p != s {
		out = append(out, cadence{p, spikeDuration + s})
	}
	return out
}

// fastRuleTests returns the promtool tests of the fast window
// (AlertFastTestsFile), evaluated every global.evaluation_interval over
// series at each evaluator's sample interval (cadences). The expectations
// follow from the window's definition, not from the rule:
//
//   - a fill from 5 % to 100 % in 25 s, starting at every phase of the
//     evaluation interval (whole seconds): quiet at every evaluation before
//     the usage passes the threshold, firing by then plus the window and
//     one evaluation interval. The first sample above the threshold comes
//     at most one sample interval after it; the window holds no earlier
//     sample one window less one sample interval later; the next
//     evaluation comes within one evaluation interval.
//   - a burst at 100 % for 20 s that drains, at every phase of the sample
//     interval: quiet throughout and after. A window holds at least
//     floor(window / interval) samples and the burst shows in at most
//     floor(burst / interval) + 1. A window too short to ride out 20 s
//     (at the Prometheus cadence, 20 s and one of serve's scrapes) is
//     tested with the longest burst it does ride out.
//   - a slow climb: KVCacheUsageHigh, the slow window, warns before the
//     usage passes the fast window's threshold; KVCacheExhausted is quiet
//     until then and fires by then plus the window and one evaluation
//     interval (serve's cadence).
func fastRuleTests(o Options) ruleTestFile {
	o = o.WithDefaults()
	a := o.Config.Alerts
	e := time.Duration(o.EvaluationInterval)
	w := time.Duration(a.KVUsageExhaustedWindow)
	thr := a.KVUsageExhausted
	dec := server("decode-0", "decode", "p1")
	l := dec.alertLabels(SeverityCritical)
	fire := []expAlert{{l, expectedAnnotations(o, AlertKVExhausted, l, "")}}
	// The usage before the fill and around the burst: 5 %, or 0 under a
	// threshold as low as 10 %.
	low := 0.05
	if thr <= 2*low {
		low = 0
	}
	var tests []ruleTest
	for _, c := range cadences(o) {
		// The fill. Above a threshold of 1 (never) nothing fires.
		if thr < 1 {
			for _, phase := range phases(e) {
				t0 := w + e + phase
				full := t0.Seconds() + fillDuration.Seconds()*(thr-low)/(1-low) // the usage passes thr
				by := time.Duration(math.Ceil(full*1000))*time.Millisecond + w + e
				truth := func(t time.Duration) float64 {
					switch {
					case t <= t0:
						return low
					case t >= t0+fillDuration:
						return 1
					}
					return low + (1-low)*float64(t-t0)/float64(fillDuration)
				}
				var checks []alertTest
				for t := time.Duration(0); t.Seconds() < full; t += e {
					checks = append(checks, alertTest{model.Duration(t), AlertKVExhausted, []expAlert{}})
				}
				checks = append(checks, alertTest{model.Duration(by), AlertKVExhausted, fire})
				tests = append(tests, ruleTest{Interval: model.Duration(c.step),
					InputSeries:    []inputSeries{{dec.sel(signal.KVUsageRatio.Name), sampled(truth, c.step, by+e)}},
					AlertRuleTests: checks})
			}
		}
		// The burst: the longest of at most c.spike that the window rides
		// out at this cadence.
		d := min(c.spike, time.Duration(int64(w/c.step)-1)*c.step-time.Second)
		if d < 0 {
			continue
		}
		for _, phase := range phases(c.step) {
			t0 := w + e + phase
			end := t0 + d + w + 2*e
			truth := func(t time.Duration) float64 {
				if t >= t0 && t <= t0+d {
					return 1
				}
				return low
			}
			var checks []alertTest
			for t := time.Duration(0); t <= end; t += e {
				checks = append(checks, alertTest{model.Duration(t), AlertKVExhausted, []expAlert{}})
			}
			tests = append(tests, ruleTest{Interval: model.Duration(c.step),
				InputSeries:    []inputSeries{{dec.sel(signal.KVUsageRatio.Name), sampled(truth, c.step, end)}},
				AlertRuleTests: checks})
		}
	}
	if thr < 1 {
		if t, ok := slowClimbRuleTest(o, dec, fire); ok {
			tests = append(tests, t)
		}
	}
	return ruleTestFile{
		RuleFiles:          []string{path.Base(RecordingRulesFile), path.Base(AlertRulesFile)},
		EvaluationInterval: o.EvaluationInterval,
		GroupEvalOrder:     groupOrder(o),
		Tests:              tests,
	}
}

// slowClimbRuleTest: decode-0 climbs from below kv_usage_warning past
// kv_usage_exhausted at serve's cadence, taking from the one to the other
// at least 10m and twice kv_usage_warning_for and an evaluation interval,
// plus the window, then levels off at its first sample above
// kv_usage_exhausted. KVCacheUsageHigh warns early: it fires by
// kv_usage_warning_for and two evaluation intervals after the climb's
// first sample above kv_usage_warning, long before the climb passes
// kv_usage_exhausted; KVCacheExhausted is quiet until then and fires by
// then plus the window and one evaluation interval. The climb's values
// are multiples of 2^-24, so that promtool's running sum of the steps is
// exact; a climb too slow for steps of 2^-24 is not tested (false).
func slowClimbRuleTest(o Options, dec srv, fire []expAlert) (ruleTest, bool) {
	a := o.Config.Alerts
	e := time.Duration(o.EvaluationInterval)
	w := time.Duration(a.KVUsageExhaustedWindow)
	s := time.Duration(o.Config.Global.ScrapeInterval)
	dyadic := func(v float64) float64 { return math.Floor(v*(1<<24)) / (1 << 24) }
	climb := max(10*time.Minute, 2*(time.Duration(a.KVUsageWarningFor)+e)+w+time.Minute)
	step := dyadic((a.KVUsageExhausted - a.KVUsageWarning) * float64(s) / float64(climb))
	if step <= 0 {
		return ruleTest{}, false
	}
	start := max(0, dyadic(a.KVUsageWarning-step*float64(e+time.Minute)/float64(s)))
	// The climb passes kv_usage_exhausted at passed (continuously) and its
	// first sample above it is sample top.
	passed := float64(s) * (a.KVUsageExhausted - start) / step
	top := int(math.Floor((a.KVUsageExhausted-start)/step)) + 1
	level := start + float64(top)*step
	before := time.Duration(math.Ceil(passed/float64(time.Millisecond))-1) * time.Millisecond
	by := before + time.Millisecond + w + e
	n := int((by+e)/s) + 1
	// KVCacheUsageHigh: its first sample above kv_usage_warning at
	// warned; pending from the next evaluation, within one interval;
	// firing kv_usage_warning_for later, at the next evaluation again.
	warned := time.Duration(math.Floor((a.KVUsageWarning-start)/step)+1) * s
	warnBy := warned + time.Duration(a.KVUsageWarningFor) + 2*e
	value := start + float64(warnBy/e*e/s)*step // the last sample at the last evaluation by then
	high := dec.alertLabels(SeverityWarning)
	return ruleTest{Interval: model.Duration(s),
		InputSeries: []inputSeries{{dec.sel(signal.KVUsageRatio.Name),
			fmt.Sprintf("%s+%sx%d %s", num(start), num(step), top, constant(level, n-top-1))}},
		AlertRuleTests: []alertTest{
			{model.Duration(warnBy), AlertKVHigh, []expAlert{{high, expectedAnnotations(o, AlertKVHigh, high, humanizePercentage(value))}}},
			{model.Duration(warnBy), AlertKVExhausted, []expAlert{}},
			{model.Duration(before), AlertKVExhausted, []expAlert{}},
			{model.Duration(by), AlertKVExhausted, fire},
		}}, true
}

// phases are the offsets, in whole seconds, at which a test starts within
// one period: every second, or 15 evenly spaced ones.
func phases(period time.Duration) []time.Duration {
	step := max(time.Second, (period / 15).Truncate(time.Second))
	var out []time.Duration
	for p := time.Duration(0); p < period; p += step {
		out = append(out, p)
	}
	return out
}

// sampled writes truth as a promtool series at interval step from 0 to
// end: runs of one value in the a x n form, others one by one, each value
// with at most four decimals (the fills and bursts above have no more).
func sampled(truth func(time.Duration) float64, step, end time.Duration) string {
	var parts []string
	n := int(end/step) + 1
	for i := 0; i < n; {
		v := math.Round(truth(time.Duration(i)*step)*1e4) / 1e4
		j := i + 1
		for j < n && math.Round(truth(time.Duration(j)*step)*1e4)/1e4 == v {
			j++
		}
		if j-i > 1 {
			parts = append(parts, constant(v, j-i-1))
		} else {
			parts = append(parts, num(v))
		}
		i = j
	}
	return strings.Join(parts, " ")
}
