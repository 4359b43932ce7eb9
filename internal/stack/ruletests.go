package stack

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// The promtool unit-test file format (`promtool test rules`). Only the keys
// Prometheus 2.42 understands are used; promtool decodes strictly.
type ruleTestFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	// GroupEvalOrder is the order promtool evaluates the groups in at each
	// step (without it, an order of its own choosing).
	GroupEvalOrder []string   `yaml:"group_eval_order,omitempty"`
	Tests          []ruleTest `yaml:"tests"`
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

// srv is one test server's identity labels; cluster and pool may be empty
// (a target without them).
type srv struct{ server, role, cluster, pool string }

// server returns a test server in cluster c1.
func server(name, role, pool string) srv { return srv{name, role, testCluster, pool} }

func (s srv) labels() map[string]string {
	l := map[string]string{signal.LabelServer: s.server, signal.LabelRole: s.role, "job": testJob, "instance": testInstance}
	if s.cluster != "" {
		l[signal.LabelCluster] = s.cluster
	}
	if s.pool != "" {
		l[signal.LabelPool] = s.pool
	}
	return l
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

// ceilMinutes is d in whole minutes, rounded up: the number of 1m samples
// that cover d.
func ceilMinutes(d model.Duration) int {
	return int((time.Duration(d) + time.Minute - 1) / time.Minute)
}

func mins(n int) model.Duration { return model.Duration(time.Duration(n) * time.Minute) }

// testStep is the series interval and evaluation interval of the tests.
const testStep = model.Duration(time.Minute)

// The evaluation times around a for-duration, for an alert whose
// expression is true from activeAt on. promtool checks an eval_time against
// the state of the last rule evaluation at or before it (evaluations run
// every testStep from 0), and an alert fires at the first evaluation at
// least forD after activeAt. So at activeAt+forD-1ms it is still pending
// (for any forD > 0, sub-minute included), and at activeAt+forD+testStep
// it fires.
func beforeFor(activeAt, forD model.Duration) model.Duration {
	return activeAt + forD - model.Duration(time.Millisecond)
}

func afterFor(activeAt, forD model.Duration) model.Duration { return activeAt + forD + testStep }

// humanizePercentage formats like Prometheus's template function of that name.
func humanizePercentage(v float64) string { return fmt.Sprintf("%.4g%%", v*100) }

// percent formats a ratio threshold as the alert texts state it.
func percent(v float64) string { return fmt.Sprintf("%v%%", v*100) }

// expectedAnnotations are the annotations promtool must render for alert
// name on a series with labels l and value value, written out here from
// the thresholds (not from the rules' templates), so a rule that names the
// wrong threshold, duration or label fails its unit test.
func expectedAnnotations(o Options, name string, l map[string]string, value string) map[string]string {
	a := o.Config.Alerts
	srvName, where := l[signal.LabelServer], serverWhere(l)
	var summary, desc string
	switch name {
	case AlertKVHigh:
		summary = "KV cache of " + where + " is above " + percent(a.KVUsageWarning)
		desc = "The KV cache of " + srvName + " is " + value + " full (warning above " + percent(a.KVUsageWarning) +
			" for " + a.KVUsageWarningFor.String() + "). New requests will soon queue or be preempted."
	case AlertKVCritical:
		summary = "KV cache of " + where + " is nearly full"
		desc = "The KV cache of " + srvName + " is " + value + " full (critical above " + percent(a.KVUsageCritical) +
			" for " + a.KVUsageCriticalFor.String() + "). Requests queue, and vLLM preempts or SGLang retracts running ones."
	case AlertKVExhausted:
		summary = "KV cache of " + where + " is exhausted"
		desc = "Every sample of the KV cache usage of " + srvName + " in the last " + a.KVUsageExhaustedWindow.String() + " is above " +
			percent(a.KVUsageExhausted) + ": the cache is full. New requests wait for KV, and vLLM preempts or SGLang retracts running ones."
	case AlertKVFullSoon:
		// value: the usage now when it is full now (above
		// kv_usage_exhausted), else empty.
		summary = "KV cache of " + where + " will be full within " + a.KVFullWithin.String()
		desc = "At the fill rate of the last 15m, the KV cache of " + srvName + " (now above " + percent(o.KVFullMinUsage) +
			") reaches 100% within " + a.KVFullWithin.String() + "."
		if value != "" {
			summary = "KV cache of " + where + " is full"
			desc = "The KV cache of " + srvName + " is full now (" + value + ", above " + percent(a.KVUsageExhausted) +
				") and was still filling over the last 15m; " + AlertKVExhausted + " pages once it stays full for " + a.KVUsageExhaustedWindow.String() + "."
		}
	case AlertLeak:
		summary = "KV cache of " + where + " is held by requests that do not run"
		desc = srvName + " holds " + value + " of its KV cache while the requests that could hold it do not run, for " +
			a.LeakFor.String() + " (whatever waits in its queues): blocks are probably not freed after requests end. Restart the engine; more capacity will fill the same way."
	case AlertRankImbalance:
		summary = "KV usage across the DP ranks of " + where + " is uneven"
		desc = "The fullest and emptiest DP ranks of " + srvName + " differ by " + value + " of capacity (threshold " +
			percent(a.RankSpread) + "). The fullest rank fills first and limits the whole server."
	case AlertQueue:
		summary = "Requests are queueing on " + where
		desc = fmt.Sprintf("%s requests wait for admission on %s (threshold %v for %s).", value, srvName, a.QueueLength, a.QueueFor)
	case AlertPreemptions:
		summary = "Requests are being preempted on " + where
		desc = fmt.Sprintf("%s preempts or retracts %s requests/s (threshold %v/s for %s): its KV cache is too small for the load, and preempted requests are recomputed.",
			srvName, value, a.PreemptionsPerSecond, a.PreemptionsFor)
	case AlertPrefixHitLow:
		summary = "Prefix-cache hit rate of " + where + " is low"
		desc = fmt.Sprintf("Only %s of prompt tokens on %s hit the prefix cache (threshold %s, with more than %v prompt tokens/s looked up).",
			value, srvName, percent(a.PrefixHitRatioLow), a.PrefixHitMinTokensPS)
	case AlertExporterDown:
		summary = "kvwatch exporter " + l["instance"] + " is down"
		desc = "Prometheus cannot scrape kvwatch at " + l["instance"] + ": every KV signal and alert of the fleet is blind."
	case AlertTargetDown:
		summary = "kvwatch cannot scrape engine " + srvName
		desc = "kvwatch's scrapes of " + srvName + " fail (see kvwatch_target_scrape_error for the reason); its KV signals are unknown."
	case AlertMetricsDisabled:
		summary = "Engine " + srvName + " has metrics turned off"
		desc = srvName + " answers 404 (llama.cpp: 501) on its metrics path: the engine runs without metrics (SGLang: start it with --enable-metrics; llama.cpp: --metrics)."
	case AlertMetricsStale:
		summary = "Metrics of engine " + srvName + " are stale"
		desc = "kvwatch's last successful scrape of " + srvName + " is older than " + a.StaleAfter.String() + "; what dashboards show for it is old."
	case AlertPoolFullSoon:
		summary = "KV cache of " + poolWhere(l) + " will be full within " + a.KVFullWithin.String()
		desc = "At the fill trend of the last 15m plus the KV its queued requests need, the free KV of " + poolWhere(l) +
			" is gone in " + value + " (threshold " + a.KVFullWithin.String() + ")."
		if value == humanizeDuration(0) { // full now
			summary = "KV cache of " + poolWhere(l) + " is full"
			desc = "The free KV of " + poolWhere(l) + " is gone now: what its servers hold plus what its queued requests need is at least its capacity."
		}
	case AlertPoolDrain:
		where := poolWhere(l)
		summary = strings.ToUpper(where[:1]) + where[1:] + " cannot lose its largest server"
		desc = "Draining the largest server of " + poolWhere(l) + " would put the rest above the " + percent(a.KVUsageWarning) +
			" warning: the margin is " + value + " of the rest's capacity. Add capacity before maintenance."
	case AlertTargetWarnings:
		summary, desc = targetWarningsAnnotations(l, value)
	case AlertTierFull:
		summary, desc = tierAnnotations(o, l, value)
	case AlertExporterAbsent:
		summary = "kvwatch is absent: neither scraped nor pushing"
		desc = "No target of job kvwatch exists here (not down: absent) and no kvwatch serve pushes its series, so every KV signal and alert of the fleet is blind. " +
			"The scrape config, service discovery or the Prometheus Operator's selectors lost kvwatch, or a serve that remote-writes stopped or cannot reach the store."
	case AlertWatchdog:
		summary = "Alerting pipeline heartbeat"
		desc = "Always firing while Prometheus evaluates kvwatch's rules and reaches Alertmanager. Route it to a dead man's switch that pages when it stops."
	default:
		panic("expectedAnnotations: no expectation for alert " + name)
	}
	return valueUnitAnnotation(name, map[string]string{"summary": summary, "description": desc,
		"runbook_url": o.RunbookURL + "#" + strings.ToLower(name)})
}

// serverWhere names a server as the alert texts do: "decode-0 (decode,
// cluster c1, pool p1)", with only the labels it has.
func serverWhere(l map[string]string) string {
	where := l[signal.LabelServer] + " (" + l[signal.LabelRole]
	if c := l[signal.LabelCluster]; c != "" {
		where += ", cluster " + c
	}
	if p := l[signal.LabelPool]; p != "" {
		where += ", pool " + p
	}
	return where + ")"
}

// poolWhere names a pool as the planning alerts do: "pool p1 (decode,
// cluster c1)", the cluster only when the pool has one; a pool without a
// pool label is "the decode pool of cluster c1" (or "the decode pool").
func poolWhere(l map[string]string) string {
	c := l[signal.LabelCluster]
	if p := l[signal.LabelPool]; p != "" {
		w := "pool " + p + " (" + l[signal.LabelRole]
		if c != "" {
			w += ", cluster " + c
		}
		return w + ")"
	}
	w := "the " + l[signal.LabelRole] + " pool"
	if c != "" {
		w += " of cluster " + c
	}
	return w
}

// ruleTests returns the promtool unit tests of every alert and the main
// recording rules: for each alert, a case where it fires and cases where it
// must not (below threshold, or before its for-duration has passed). Input
// values are derived from the thresholds so the tests follow the config,
// for any for-duration the config accepts (sub-minute ones included).
func ruleTests(o Options) ruleTestFile {
	o = o.WithDefaults()
	a := o.Config.Alerts
	expect := func(name string, labels map[string]string, value string) expAlert {
		return expAlert{ExpLabels: labels, ExpAnnotations: expectedAnnotations(o, name, labels, value)}
	}
	none := []expAlert{}
	dec := server("decode-0", "decode", "p1")
	dec1 := server("decode-1", "decode", "p1")
	pre := server("prefill-0", "prefill", "p2")
	bare := srv{"decode-2", "decode", "", ""} // a target without cluster and pool labels
	var tests []ruleTest
	step := testStep
	// forChecks are the two checks around a for-duration: quiet just before
	// it has passed (when there is a for-duration), firing after.
	forChecks := func(name string, activeAt, forD model.Duration, fire []expAlert) []alertTest {
		var out []alertTest
		if forD > 0 {
			out = append(out, alertTest{beforeFor(activeAt, forD), name, none})
		}
		return append(out, alertTest{afterFor(activeAt, forD), name, fire})
	}

	// KV high: one server between warning and critical, one below warning.
	{
		n := ceilMinutes(afterFor(0, a.KVUsageWarningFor)) + 10
		v := (a.KVUsageWarning + a.KVUsageCritical) / 2
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(a.KVUsageWarning*0.9, n)},
			},
			AlertRuleTests: append(forChecks(AlertKVHigh, 0, a.KVUsageWarningFor, []expAlert{expect(AlertKVHigh, l, humanizePercentage(v))}),
				alertTest{afterFor(0, a.KVUsageWarningFor), AlertKVCritical, none}),
		})
	}
	// KV critical: one server above critical, one between warning and
	// critical, one above critical without cluster and pool labels (its
	// texts name only the labels it has).
	{
		n := ceilMinutes(afterFor(0, a.KVUsageCriticalFor)) + 10
		v := (a.KVUsageCritical + 1) / 2
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant((a.KVUsageWarning+a.KVUsageCritical)/2, n)},
				{bare.sel(signal.KVUsageRatio.Name), constant(v, n)},
			},
			AlertRuleTests: forChecks(AlertKVCritical, 0, a.KVUsageCriticalFor, []expAlert{
				expect(AlertKVCritical, dec.alertLabels(SeverityCritical), humanizePercentage(v)),
				expect(AlertKVCritical, bare.alertLabels(SeverityCritical), humanizePercentage(v)),
			}),
		})
	}
	// KV full soon: one server filling linearly at 1.2 times the rate that
	// fills its free cache within kv_full_within, so predict_linear says
	// "full" from the second sample (1m) on; one flat. A for-duration
	// longer than the window lets the ramp pass 100%: the rule does not
	// look at the level, and the test checks the for-duration.
	{
		start := o.KVFullMinUsage + (1-o.KVFullMinUsage)*0.1
		within := time.Duration(a.KVFullWithin).Minutes()
		slope := 1.2 * (1 - start) / within
		n := ceilMinutes(afterFor(mins(1), o.KVFullFor)) + 5
		l := dec.alertLabels(SeverityWarning)
		// The usage at the evaluation that fires, if the ramp has passed
		// kv_usage_exhausted by then: the texts say "full now".
		now := ""
		if v := start + slope*float64(time.Duration(afterFor(mins(1), o.KVFullFor))/time.Minute); v > a.KVUsageExhausted {
			now = humanizePercentage(v)
		}
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), ramp(start, slope, n)},
				{dec1.sel(signal.KVUsageRatio.Name), constant(start, n)},
			},
			AlertRuleTests: append([]alertTest{{0, AlertKVFullSoon, none}},
				forChecks(AlertKVFullSoon, mins(1), o.KVFullFor, []expAlert{expect(AlertKVFullSoon, l, now)})...),
		})
	}
	// Leak: the server's diagnosis says leak_suspected (kv.Diagnose, which
	// names it whatever the queue); the same usage in another state is
	// not a leak, and a leak that ends before leak_for does not alert.
	{
		n := ceilMinutes(afterFor(0, a.LeakFor)) + 10
		v := (a.LeakUsage + 1) / 2
		l := dec.alertLabels(SeverityWarning)
		state := func(s srv, st kv.State, vals string) inputSeries {
			return inputSeries{s.sel(signal.ServerState.Name, signal.LabelState, string(st)), vals}
		}
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.KVUsageRatio.Name), constant(v, n)},
				state(dec, kv.StateLeak, constant(1, n)),
				state(dec, kv.StateFull, constant(0, n)),
				// Full and busy: not a leak.
				{dec1.sel(signal.KVUsageRatio.Name), constant(v, n)},
				state(dec1, kv.StateLeak, constant(0, n)),
				state(dec1, kv.StateFull, constant(1, n)),
				// A leak for a few minutes only (a burst of transfers
				// that ends): no alert.
				{pre.sel(signal.KVUsageRatio.Name), constant(v, n)},
				state(pre, kv.StateLeak, constant(1, 0)+" "+constant(0, n-1)),
			},
			AlertRuleTests: forChecks(AlertLeak, 0, a.LeakFor, []expAlert{expect(AlertLeak, l, humanizePercentage(v))}),
		})
	}
	// Rank imbalance.
	{
		n := ceilMinutes(afterFor(0, a.RankSpreadFor)) + 10
		v := (a.RankSpread + 1) / 2
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.RankSpreadRatio.Name), constant(v, n)},
				{dec1.sel(signal.RankSpreadRatio.Name), constant(a.RankSpread/2, n)},
			},
			AlertRuleTests: forChecks(AlertRankImbalance, 0, a.RankSpreadFor, []expAlert{expect(AlertRankImbalance, l, humanizePercentage(v))}),
		})
	}
	// Queue: admission queues count, PD transfer queues do not.
	{
		n := ceilMinutes(afterFor(0, a.QueueFor)) + 10
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
			AlertRuleTests: forChecks(AlertQueue, 0, a.QueueFor, []expAlert{expect(AlertQueue, l, num(waiting))}),
		})
	}
	// Preemptions: twice the threshold rate on one server, a quarter on
	// another. A counter starting at 0 makes rate over 5m (1m samples) read
	// k/5 of the true rate k minutes in, so twice the threshold is above it
	// from 3m on. The alert reads the recorded rate, which may be one
	// evaluation old, so it is active from 3m or 4m: quiet until 3m plus
	// the for-duration, firing from 4m plus the for-duration plus a step,
	// and not before 6m, when the recorded rate (even one step old) had a
	// full window and equals the true rate.
	{
		fire := max(afterFor(mins(4), a.PreemptionsFor), mins(6))
		n := ceilMinutes(fire) + 10
		perMin := a.PreemptionsPerSecond * 2 * 60
		l := dec.alertLabels(SeverityCritical)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.Preemptions.Name), ramp(0, perMin, n)},
				{dec1.sel(signal.Preemptions.Name), ramp(0, perMin/4, n)},
			},
			AlertRuleTests: append([]alertTest{{mins(2), AlertPreemptions, none}},
				alertTest{beforeFor(mins(3), a.PreemptionsFor), AlertPreemptions, none},
				alertTest{fire, AlertPreemptions, []expAlert{expect(AlertPreemptions, l, fmt.Sprintf("%.2f", a.PreemptionsPerSecond*2))}}),
		})
	}
	// Prefix hit low: low ratio with traffic fires; low ratio without
	// traffic (below the floor) and high ratio with traffic do not. The
	// alert is active from 4m on, as for preemptions.
	{
		fire := max(afterFor(mins(4), a.PrefixHitFor), mins(6))
		n := ceilMinutes(fire) + 10
		high := (a.PrefixHitRatioLow + 1) / 2
		ratio := a.PrefixHitRatioLow / 2
		query := a.PrefixHitMinTokensPS * 2 * 60
		l := dec.alertLabels(SeverityWarning)
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{dec.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query, n)},
				{dec.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query*ratio, n)},
				{dec1.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query/8, n)},
				{dec1.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query/8*ratio, n)},
				{pre.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, query, n)},
				{pre.sel(signal.PrefixCacheHitTokens.Name), ramp(0, query*high, n)},
			},
			AlertRuleTests: append([]alertTest{{mins(2), AlertPrefixHitLow, none}},
				alertTest{beforeFor(mins(3), a.PrefixHitFor), AlertPrefixHitLow, none},
				alertTest{fire, AlertPrefixHitLow, []expAlert{expect(AlertPrefixHitLow, l, humanizePercentage(ratio))}}),
		})
	}
	// Scrape health: kvwatch itself down; an engine down; an engine with
	// metrics off (404: MetricsDisabled, not TargetDown); a healthy engine;
	// a stale engine. kvwatch is present, so KVWatchAbsent stays quiet; the
	// watchdog fires from the first evaluation on.
	{
		down := a.TargetDownFor
		stalled := model.Duration(time.Minute) // the stale engine's last success, since the test's epoch
		staleAt := stalled + a.StaleAfter      // time() - last success > stale_after after this
		n := ceilMinutes(afterFor(staleAt, 0)+afterFor(0, down)) + 10
		kvDown := map[string]string{"job": testJob, "instance": "127.0.0.2:9477"}
		kvUp := map[string]string{"job": testJob, "instance": testInstance}
		ok := server("ok-0", "decode", "p1")
		off := server("off-0", "prefill", "p2")
		stale := server("stale-0", "decode", "p1")
		staleLabels := stale.alertLabels(SeverityWarning)
		kvDownLabels := map[string]string{"job": testJob, "instance": "127.0.0.2:9477", "severity": SeverityCritical}
		checks := forChecks(AlertExporterDown, 0, down, []expAlert{expect(AlertExporterDown, kvDownLabels, "")})
		checks = append(checks, forChecks(AlertTargetDown, 0, down, []expAlert{expect(AlertTargetDown, dec.alertLabels(SeverityWarning), "")})...)
		checks = append(checks, forChecks(AlertMetricsDisabled, 0, down, []expAlert{expect(AlertMetricsDisabled,
			off.alertLabels(SeverityWarning, signal.LabelReason, signal.ReasonHTTP404), "")})...)
		checks = append(checks,
			alertTest{staleAt, AlertMetricsStale, none},
			alertTest{afterFor(staleAt, 0), AlertMetricsStale, []expAlert{expect(AlertMetricsStale, staleLabels, "")}},
			alertTest{afterFor(0, down), AlertExporterAbsent, none},
			alertTest{0, AlertWatchdog, []expAlert{expect(AlertWatchdog, map[string]string{"severity": SeverityNone}, "")}},
		)
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
				{stale.sel(signal.TargetLastSuccess.Name), constant(time.Duration(stalled).Seconds(), n)},
			},
			AlertRuleTests: checks,
		})
	}
	// kvwatch absent from Prometheus (no up{job="kvwatch"} series at all,
	// only another job's, and no serve pushing): KVWatchAbsent fires with
	// the job label absent() derives from its selectors.
	{
		down := a.TargetDownFor
		n := ceilMinutes(afterFor(0, down)) + 5
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{"up" + renderLabels(map[string]string{"job": "prometheus", "instance": "127.0.0.1:9090"}), constant(1, n)},
				{signal.Targets.Name + renderLabels(map[string]string{"job": "other", "instance": testInstance}), constant(3, n)},
			},
			AlertRuleTests: forChecks(AlertExporterAbsent, 0, down, []expAlert{expect(AlertExporterAbsent,
				map[string]string{"job": testJob, "severity": SeverityCritical}, "")}),
		})
	}
	// The push layout (serve --remote-write.url into a store that a ruler
	// reads): no up{job="kvwatch"} anywhere, but serve's own series arrive
	// with job kvwatch, so KVWatchAbsent stays quiet; when the pushes stop
	// (the series end), it fires once the lookback (5m) has passed: at the
	// evaluation 5m after the last push on Prometheus 3 (lookback open at
	// its start), 6m after on 2.x (closed): both are checked clear of the
	// edge.
	{
		down := a.TargetDownFor
		pushed := ceilMinutes(afterFor(0, down)) + 2 // minutes of pushes
		stop := mins(pushed)
		fire := []expAlert{expect(AlertExporterAbsent, map[string]string{"job": testJob, "severity": SeverityCritical}, "")}
		tests = append(tests, ruleTest{Interval: step,
			InputSeries: []inputSeries{
				{signal.Targets.Name + renderLabels(map[string]string{"job": testJob, "instance": testInstance}), constant(3, pushed)},
			},
			AlertRuleTests: []alertTest{
				{afterFor(0, down), AlertExporterAbsent, none},
				{stop + mins(4), AlertExporterAbsent, none},
				{beforeFor(stop+mins(5), down), AlertExporterAbsent, none},
				{afterFor(stop+mins(6), down), AlertExporterAbsent, fire},
			},
		})
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
	tests = append(tests, counterResetRuleTests())
	tests = append(tests, fullNowRuleTests(o, expect)...)
	tests = append(tests, planningRuleTests(o, expect)...)
	tests = append(tests, autoscalingRuleTests(o)...)
	tests = append(tests, tierRuleTests(o, expect)...)
	tests = append(tests, stateRuleTests(o)...)
	tests = append(tests, targetWarningsRuleTests(expect)...)
	tests = append(tests, countRuleTests()...)
	tests = append(tests, aggregateRuleTests()...)
	return ruleTestFile{
		RuleFiles:          []string{path.Base(RecordingRulesFile), path.Base(AlertRulesFile)},
		EvaluationInterval: step,
		GroupEvalOrder:     groupOrder(o),
		Tests:              tests,
	}
}

// counterResetRuleTests checks the server rates (counterRate) over 1m
// samples, worked out by hand: each counter grows 600 prompt tokens a
// minute (10/s). decode-0's counter only grows. decode-1's goes back a
// little between 10m and 11m (from 1,006,000 to 1,001,000: a page read
// mid-update, or the target answered by another engine), where rate()
// alone would read (1,200 + 1,001,600) × 5/4 / 300 ≈ 4,178/s at 12m
// (Prometheus 3);
// prefill-0 restarts from 0 at 11m. Every window holding the drop (the
// evaluations from 11m to 15m) has no rate for those two; from 16m the
// window starts after the drop and the rate is 10/s again. The pool rate
// sums the servers that have one: 10/s while decode-1 has none. decode-1's
// hit counter grows steadily (2.5/s) and its query counter drops with the
// prompt counter: its hit ratio (0.25) is absent with the query rate.
// Checked at 10m (before), 12m and 14m (in) and 18m (after): clear of the
// window's edge, which Prometheus 2 (closed at the start), 3 (open) and
// vmalert-tool (its rate reads the sample before the window, and a rule
// reads the evaluation before of a rule it follows) place a step apart.
func counterResetRuleTests() ruleTest {
	dec := server("decode-0", "decode", "p1")
	dec1 := server("decode-1", "decode", "p1")
	pre := server("prefill-0", "prefill", "p2")
	const n = 30 // minutes of samples
	back := fmt.Sprintf("1000000+600x10 1001000+600x%d", n-11)
	lbl := func(name string, l map[string]string) string { return name + renderLabels(l) }
	prompt := recRate("server", signal.PromptTokens)
	ratio := RecHitRatio("server")
	pool := recRate("pool", signal.PromptTokens)
	p1 := map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "p1", signal.LabelRole: "decode"}
	var checks []exprTest
	for _, c := range []struct {
		at       int
		present  []srv
		poolRate float64
	}{
		{10, []srv{dec, dec1, pre}, 20},
		{12, []srv{dec}, 10},
		{14, []srv{dec}, 10},
		{18, []srv{dec, dec1, pre}, 20},
	} {
		rates := []expSample{}
		hasDec1 := false
		for _, s := range c.present {
			rates = append(rates, expSample{lbl(prompt, s.labels()), 10})
			hasDec1 = hasDec1 || s == dec1
		}
		ratios := []expSample{}
		if hasDec1 {
			ratios = append(ratios, expSample{lbl(ratio, dec1.labels()), 0.25})
		}
		checks = append(checks,
			exprTest{Expr: prompt, EvalTime: mins(c.at), ExpSamples: rates},
			exprTest{Expr: ratio, EvalTime: mins(c.at), ExpSamples: ratios},
			exprTest{Expr: pool + renderLabels(p1), EvalTime: mins(c.at), ExpSamples: []expSample{{lbl(pool, p1), c.poolRate}}})
	}
	return ruleTest{Interval: testStep,
		InputSeries: []inputSeries{
			{dec.sel(signal.PromptTokens.Name), ramp(0, 600, n)},
			{dec1.sel(signal.PromptTokens.Name), back},
			{dec1.sel(signal.PrefixCacheQueryTokens.Name), back},
			{dec1.sel(signal.PrefixCacheHitTokens.Name), ramp(250000, 150, n)},
			{pre.sel(signal.PromptTokens.Name), fmt.Sprintf("500000+600x10 0+600x%d", n-11)},
		},
		PromqlExprTests: checks,
	}
}

// groupOrder names the groups in file order, the recording groups first:
// the order serve evaluates them in at each evaluation (alerting.Manager),
// in which KVPoolFullSoon reads the forecast the aggregates group recorded
// at the same step. Prometheus keeps a schedule per group instead, where
// it may read the step before (docs/stack.md).
func groupOrder(o Options) []string {
	var out []string
	for _, g := range append(RecordingRules(o).Groups, AlertRules(o).Groups...) {
		out = append(out, g.Name)
	}
	return out
}

// targetWarningsAnnotations are the expected texts of AlertTargetWarnings.
func targetWarningsAnnotations(l map[string]string, value string) (summary, desc string) {
	s, r := l[signal.LabelServer], l[signal.LabelReason]
	return "Engine " + s + " reports implausible values (" + r + ")",
		"The last page of " + s + " had " + value + " " + r + " warnings, and its pages have had some for 10m: " +
			"the values concerned are not exported, so its KV signals are partly unknown. `kvwatch status` shows each warning's text."
}

// targetWarningsRuleTests: decode-0 has 2 negative warnings on every page
// from 0 on, so the alert is pending until the 10m hold has passed (quiet
// at 9m) and fires at 11m with the value 2. decode-1 reports 0 warnings
// (a clean page): never. prefill-0 has a used_over_capacity warning for 5m
// only, then clean pages: never.
func targetWarningsRuleTests(expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	const n = 20
	dec, dec1 := server("decode-0", "decode", "p1"), server("decode-1", "decode", "p1")
	pre := server("prefill-0", "prefill", "p2")
	w := signal.TargetWarnings.Name
	l := dec.alertLabels(SeverityWarning, signal.LabelReason, "negative")
	return []ruleTest{{Interval: testStep,
		InputSeries: []inputSeries{
			{dec.sel(w, signal.LabelReason, "negative"), constant(2, n)},
			{dec1.sel(w, signal.LabelReason, "negative"), constant(0, n)},
			{pre.sel(w, signal.LabelReason, "used_over_capacity"), constant(1, 5) + " " + constant(0, n-6)},
		},
		AlertRuleTests: []alertTest{
			{mins(9), AlertTargetWarnings, []expAlert{}},
			{mins(11), AlertTargetWarnings, []expAlert{expect(AlertTargetWarnings, l, "2")}},
		}}}
}
