package stack

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// The promtool unit-test file format (`promtool test rules`). Only the keys
// Prometheus 2.42 understands are used; promtool decodes strictly.
type ruleTestFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []ruleTest     `yaml:"tests"`
}

type ruleTest struct {
	Interval        model.Duration `yaml:"interval"`
	InputSeries     []inputSeries  `yaml:"input_series"`
	AlertRuleTests  []alertTest    `yaml:"alert_rule_test,omitempty"`
	PromqlExprTests []exprTest     `yaml:"promql_expr_test,omitempty"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

type exprTest struct {
	Expr       string         `yaml:"expr"`
	EvalTime   model.Duration `yaml:"eval_time"`
	ExpSamples []expSample    `yaml:"exp_samples"`
}

type expSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// Identity of the test servers. job and instance are what Prometheus adds
// when it scrapes kvwatch.
const (
	testJob      = "kvwatch"
	testInstance = "127.0.0.1:9477"
	testCluster  = "c1"
)

// srv is one test server's identity labels.
type srv struct{ server, role, pool string }

func (s srv) labels() map[string]string {
	return map[string]string{
		signal.LabelServer: s.server, signal.LabelRole: s.role,
		signal.LabelCluster: testCluster, signal.LabelPool: s.pool,
		"job": testJob, "instance": testInstance,
	}
}

// sel renders metric{labels...,extra} with the server's identity labels.
func (s srv) sel(metric string, extra ...string) string {
	l := s.labels()
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return metric + renderLabels(l)
}

func renderLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// alertLabels are the labels an alert on s carries.
func (s srv) alertLabels(severity string, extra ...string) map[string]string {
	l := s.labels()
	l["severity"] = severity
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// constant is a promtool series of v repeated for n+1 samples.
func constant(v float64, n int) string { return fmt.Sprintf("%sx%d", num(v), n) }

// ramp is a promtool series starting at start and growing by step per sample.
func ramp(start, step float64, n int) string {
	return fmt.Sprintf("%s+%sx%d", num(start), num(step), n)
}

func minutes(d model.Duration) int { return int(time.Duration(d) / time.Minute) }

func mins(n int) model.Duration { return model.Duration(time.Duration(n) * time.Minute) }

// humanizePercentage formats like Prometheus's template function of that name.
func humanizePercentage(v float64) string { return fmt.Sprintf("%.4g%%", v*100) }

// ruleTests returns the promtool unit tests of every alert and the main
// recording rules: for each alert, a case where it fires and cases where it
// must not (below threshold, or before its for-duration has passed). Input
// values are derived from the thresholds so the tests follow the config.
func ruleTests(o Options) ruleTestFile {
	o = o.WithDefaults()
	a := o.Config.Alerts
	rules := AlertRules(o)
	ann := map[string]map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			ann[r.Alert] = r.Annotations
		}
	}
	// expect renders the alert's annotation templates for one alert: the
	// label and value placeholders are replaced by what promtool will
	// render for that input.
	expect := func(name string, labels map[string]string, value string) expAlert {
		out := map[string]string{}
		for k, v := range ann[name] {
			for lk, lv := range labels {
				v = strings.ReplaceAll(v, "{{ $labels."+lk+" }}", lv)
			}
			v = strings.ReplaceAll(v, "{{ $value | humanizePercentage }}", value)
			v = strings.ReplaceAll(v, "{{ $value | printf \"%.2f\" }}", value)
			v = strings.ReplaceAll(v, "{{ $value }}", value)
			out[k] = v
		}
		return expAlert{ExpLabels: labels, ExpAnnotations: out}
	}
	none := []expAlert{}
	dec := srv{"decode-0", "decode", "p1"}
	dec1 := srv{"decode-1", "decode", "p1"}
	pre := srv{"prefill-0", "prefill", "p2"}
	var tests []ruleTest
	step := mins(1)

	// KV high: one server between warning and critical, one below warning.
	{
		n := minutes(a.KVUsageWarningFor) + 10
		v := (a.KVUsageWarning + a.KVUsageCritical) / 2
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(a.KVUsageWarning*0.9, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(minutes(a.KVUsageWarningFor) - 1), AlertKVHigh, none},
				{mins(minutes(a.KVUsageWarningFor) + 1), AlertKVHigh, []expAlert{expect(AlertKVHigh, l, humanizePercentage(v))}},
				{mins(minutes(a.KVUsageWarningFor) + 1), AlertKVCritical, none},
			}})
	}
	// KV critical: one server above critical, one between warning and critical.
	{
		n := minutes(a.KVUsageCriticalFor) + 10
		v := (a.KVUsageCritical + 1) / 2
		l := dec.alertLabels(SeverityCritical)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant((a.KVUsageWarning+a.KVUsageCritical)/2, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(minutes(a.KVUsageCriticalFor) - 1), AlertKVCritical, none},
				{mins(minutes(a.KVUsageCriticalFor) + 1), AlertKVCritical, []expAlert{expect(AlertKVCritical, l, humanizePercentage(v))}},
			}})
	}
	// KV full soon: one server filling linearly so that it reaches 95% at
	// the evaluation time and would pass 100% within the window; one flat.
	{
		t := 15 + minutes(o.KVFullFor) + 1
		start := o.KVFullMinUsage + (1-o.KVFullMinUsage)*0.1
		slope := (0.95 - start) / float64(t)
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), ramp(start, slope, t+5)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(start, t+5)},
			},
			AlertRuleTests: []alertTest{
				{mins(t), AlertKVFullSoon, []expAlert{expect(AlertKVFullSoon, l, "")}},
				{mins(1), AlertKVFullSoon, none},
			}})
	}
	// Leak: used while nothing runs or waits; the same usage with running
	// requests is not a leak.
	{
		n := minutes(a.LeakFor) + 10
		v := (a.LeakUsage + 1) / 2
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec.sel(signal.RequestsRunning.Name), constant(0, n)},
				{dec.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueWaiting), constant(0, n)},
				{dec.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueTransfer), constant(0, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec1.sel(signal.RequestsRunning.Name), constant(3, n)},
				{dec1.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueWaiting), constant(0, n)},
				// Unknown queue (absent) is not "nothing waits": no alert.
				{pre.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{pre.sel(signal.RequestsRunning.Name), constant(0, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(minutes(a.LeakFor) - 1), AlertLeak, none},
				{mins(minutes(a.LeakFor) + 1), AlertLeak, []expAlert{expect(AlertLeak, l, humanizePercentage(v))}},
			}})
	}
	// Rank imbalance.
	{
		n := minutes(a.RankSpreadFor) + 10
		v := (a.RankSpread + 1) / 2
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.RankSpreadRatio.Name), constant(v, n)},
				{dec1.sel(signal.RankSpreadRatio.Name), constant(a.RankSpread/2, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(minutes(a.RankSpreadFor) - 1), AlertRankImbalance, none},
				{mins(minutes(a.RankSpreadFor) + 1), AlertRankImbalance, []expAlert{expect(AlertRankImbalance, l, humanizePercentage(v))}},
			}})
	}
	// Queue: admission queues count, PD transfer queues do not.
	{
		n := minutes(a.QueueFor) + 10
		waiting := a.QueueLength + 10
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueWaiting), constant(waiting-4, n)},
				{dec.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueuePrealloc), constant(4, n)},
				{dec.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueTransfer), constant(1000, n)},
				{dec1.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueWaiting), constant(a.QueueLength/2, n)},
				{dec1.sel(signal.RequestsQueued.Name, signal.LabelQueue, signal.QueueTransfer), constant(a.QueueLength*10, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(minutes(a.QueueFor) - 1), AlertQueue, none},
				{mins(minutes(a.QueueFor) + 1), AlertQueue, []expAlert{expect(AlertQueue, l, num(waiting))}},
			}})
	}
	// Preemptions: twice the threshold rate on one server, half on another.
	{
		n := minutes(a.PreemptionsFor) + 20
		perMin := a.PreemptionsPerSecond * 2 * 60
		l := dec.alertLabels(SeverityCritical)
		eval := minutes(a.PreemptionsFor) + 6
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.Preemptions.Name), ramp(0, perMin, n)},
				{dec1.sel(signal.Preemptions.Name), ramp(0, perMin/4, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(3), AlertPreemptions, none},
				{mins(eval), AlertPreemptions, []expAlert{expect(AlertPreemptions, l, fmt.Sprintf("%.2f", a.PreemptionsPerSecond*2))}},
			}})
	}
	// Prefix hit low: low ratio with traffic fires; low ratio without
	// traffic (below the floor) and high ratio with traffic do not.
	{
		n := minutes(a.PrefixHitFor) + 20
		ratio := a.PrefixHitRatioLow / 2
		query := a.PrefixHitMinTokensPS * 2 * 60
		l := dec.alertLabels(SeverityWarning)
		eval := minutes(a.PrefixHitFor) + 6
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query, n)},
				{dec.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query*ratio, n)},
				{dec1.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query/8, n)},
				{dec1.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query/8*ratio, n)},
				{pre.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query, n)},
				{pre.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query*0.9, n)},
			},
			AlertRuleTests: []alertTest{
				{mins(3), AlertPrefixHitLow, none},
				{mins(eval), AlertPrefixHitLow, []expAlert{expect(AlertPrefixHitLow, l, humanizePercentage(ratio))}},
			}})
	}
	// Scrape health: kvwatch itself down; an engine down; an engine with
	// metrics off (404: MetricsDisabled, not TargetDown); a healthy engine;
	// a stale engine.
	{
		down := minutes(a.TargetDownFor)
		n := down + minutes(a.StaleAfter) + 10
		kvDown := map[string]string{"job": testJob, "instance": "127.0.0.2:9477"}
		kvUp := map[string]string{"job": testJob, "instance": testInstance}
		ok := srv{"ok-0", "decode", "p1"}
		off := srv{"off-0", "prefill", "p2"}
		stale := srv{"stale-0", "decode", "p1"}
		stalled := 60 // the stale engine's last success, in seconds since the test's epoch
		staleEval := stalled/60 + minutes(a.StaleAfter) + 2
		staleLabels := stale.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{"up" + renderLabels(kvDown), constant(0, n)},
				{"up" + renderLabels(kvUp), constant(1, n)},
				{dec.sel(signal.TargetUp.Name), constant(0, n)},
				{dec.sel(signal.TargetScrapeError.Name, signal.LabelReason, signal.ReasonRefused), constant(1, n)},
				{off.sel(signal.TargetUp.Name), constant(0, n)},
				{off.sel(signal.TargetScrapeError.Name, signal.LabelReason, signal.ReasonHTTP404), constant(1, n)},
				{ok.sel(signal.TargetUp.Name), constant(1, n)},
				{ok.sel(signal.TargetLastSuccess.Name), ramp(0, 60, n)},
				{stale.sel(signal.TargetUp.Name), constant(1, n)},
				{stale.sel(signal.TargetLastSuccess.Name), constant(float64(stalled), n)},
			},
			AlertRuleTests: []alertTest{
				{mins(down - 1), AlertExporterDown, none},
				{mins(down + 1), AlertExporterDown, []expAlert{expect(AlertExporterDown,
					map[string]string{"job": testJob, "instance": "127.0.0.2:9477", "severity": SeverityCritical}, "")}},
				{mins(down - 1), AlertTargetDown, none},
				{mins(down + 1), AlertTargetDown, []expAlert{expect(AlertTargetDown, dec.alertLabels(SeverityWarning), "")}},
				{mins(down - 1), AlertMetricsDisabled, none},
				{mins(down + 1), AlertMetricsDisabled, []expAlert{expect(AlertMetricsDisabled,
					off.alertLabels(SeverityWarning, signal.LabelReason, signal.ReasonHTTP404), "")}},
				{mins(stalled/60 + minutes(a.StaleAfter) - 1), AlertMetricsStale, none},
				{mins(staleEval), AlertMetricsStale, []expAlert{expect(AlertMetricsStale, staleLabels, "")}},
			}})
	}
	// Recording rules, worked out by hand: in pool p1 decode-0 holds 900 of
	// 1000 tokens and decode-1 300 of 3000, so the capacity-weighted usage is
	// 1200/4000 = 0.3 (the average of ratios would be 0.5). prefill-0
	// reports used but no capacity and is left out of both sides. Prefix
	// cache: decode-0 hits 30 of 60 tokens/min, decode-1 0 of 60, so the pool
	// ratio is 30/120 = 0.25. decode-0's usage grows 0.01/min from 0.5; at
	// 20m it is 0.7, so full is (1-0.7)/(0.01/60) = 1800s away.
	// Demand: decode-0 wants 17,600 tokens (17.6× its 1000), decode-1
	// reports none; the pool's demand is 17,600 over decode-0's 1000 = 17.6,
	// never over decode-1's capacity too.
	{
		p1 := map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "p1", signal.LabelRole: "decode"}
		fleetDecode := map[string]string{signal.LabelRole: "decode"}
		lbl := func(name string, l map[string]string) string { return name + renderLabels(l) }
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsedTokens.Name), constant(900, 30)},
				{dec.sel(signal.KVCapacityTokens.Name), constant(1000, 30)},
				{dec1.sel(signal.KVUsedTokens.Name), constant(300, 30)},
				{dec1.sel(signal.KVCapacityTokens.Name), constant(3000, 30)},
				{pre.sel(signal.KVUsedTokens.Name), constant(500, 30)},
				{dec.sel(signal.PrefixCacheHitTokens.Name), ramp(0, 30, 30)},
				{dec.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, 60, 30)},
				{dec1.sel(signal.PrefixCacheHitTokens.Name), constant(0, 30)},
				{dec1.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, 60, 30)},
				{dec.sel(signal.KVUsageRatio.Name), ramp(0.5, 0.01, 30)},
				{dec.sel(signal.KVDemandTokens.Name), constant(17600, 30)},
			},
			PromqlExprTests: []exprTest{
				{Expr: RecUsageRatio("pool"), EvalTime: mins(10), ExpSamples: []expSample{{lbl(RecUsageRatio("pool"), p1), 0.3}}},
				{Expr: RecUsageRatio("fleet"), EvalTime: mins(10), ExpSamples: []expSample{{lbl(RecUsageRatio("fleet"), fleetDecode), 0.3}}},
				{Expr: recSum("pool", signal.KVCapacityTokens), EvalTime: mins(10), ExpSamples: []expSample{{lbl(recSum("pool", signal.KVCapacityTokens), p1), 4000}}},
				{Expr: recSum("pool", signal.KVDemandTokens), EvalTime: mins(10), ExpSamples: []expSample{{lbl(recSum("pool", signal.KVDemandTokens), p1), 17600}}},
				{Expr: RecDemandRatio("pool"), EvalTime: mins(10), ExpSamples: []expSample{{lbl(RecDemandRatio("pool"), p1), 17.6}}},
				{Expr: RecHitRatio("pool"), EvalTime: mins(10), ExpSamples: []expSample{{lbl(RecHitRatio("pool"), p1), 0.25}}},
				{Expr: "round(" + RecTimeToFull + ")", EvalTime: mins(20), ExpSamples: []expSample{{renderLabels(dec.labels()), 1800}}},
			}})
	}
	tests = append(tests, planningRuleTests(o, expect)...)
	return ruleTestFile{
		RuleFiles:          []string{path.Base(RecordingRulesFile), path.Base(AlertRulesFile)},
		EvaluationInterval: step,
		Tests:              tests,
	}
}
