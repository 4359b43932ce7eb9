package stack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Paths of the rule files inside the stack directory.
const (
	RecordingRulesFile = "rules/kvwatch-recording.yml"
	AlertRulesFile     = "rules/kvwatch-alerts.yml"
	AlertTestsFile     = "rules/kvwatch-alerts.test.yml"
)

// Severities of the generated alerts; Alertmanager routes on them.
const (
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// rateWindow is the range of every rate in the recording rules: long enough
// to hold several scrapes at the default DefaultScrapeInterval.
const rateWindow = "5m"

// level is an aggregation level of the recording rules. Every level keeps
// role: prefill and decode KV mean different things and are never summed.
type level struct {
	name string
	by   []string
}

func levels() []level {
	return []level{
		{"pool", []string{signal.LabelCluster, signal.LabelPool, signal.LabelRole}},
		{"cluster", []string{signal.LabelCluster, signal.LabelRole}},
		{"fleet", []string{signal.LabelRole}},
	}
}

// Recorded series names. They follow level:metric:operations; the metric
// part is the kvwatch_* family with _total stripped for rates.
func recSum(l string, m signal.Metric) string { return l + ":" + m.Name + ":sum" }
func recRate(l string, m signal.Metric) string {
	return l + ":" + strings.TrimSuffix(m.Name, "_total") + ":rate" + rateWindow
}

// RecUsageRatio is the capacity-weighted KV usage of level l
// (sum of used over sum of capacity, never an average of ratios).
func RecUsageRatio(l string) string { return l + ":kvwatch_kv_used_per_capacity:ratio" }

// RecDemandRatio is the queued KV demand of level l over the capacity of
// the servers that report demand: 0 or more, unbounded above.
func RecDemandRatio(l string) string { return l + ":kvwatch_kv_demand_per_capacity:ratio" }

// RecHitRatio is the prefix-cache hit ratio of level l from counter rates.
func RecHitRatio(l string) string {
	return l + ":kvwatch_prefix_cache_hit_per_query_tokens:ratio_rate" + rateWindow
}

// RecTimeToFull is the per-server estimate of seconds until the KV cache is
// full at the current fill rate (absent while usage is flat or falling).
const RecTimeToFull = "server:kvwatch_kv_seconds_to_full:deriv15m"

func by(labels ...string) string { return "by (" + strings.Join(labels, ", ") + ")" }

// Names of the recording groups.
const (
	// ServerGroup holds the per-server rates and ratios (computed on demand
	// inside serve, see internal/alerting).
	ServerGroup = "kvwatch-server"
	// AggregatesGroup holds the pool, cluster and fleet aggregates, in that
	// order, then the pool planning rules. One group because each level
	// reads the one below (and planning the pool sums): Prometheus orders
	// rules within a group only, and a rule reading another group's output
	// may see the previous evaluation's.
	AggregatesGroup = "kvwatch-aggregates"
)

// RecordingRules returns the recording rule file: server-level rates and
// ratios, then pool, cluster and fleet aggregates and the pool planning
// series.
func RecordingRules(o Options) rulefmt.RuleGroups {
	srv := rulefmt.RuleGroup{Name: ServerGroup}
	rec := func(g *rulefmt.RuleGroup, name, expr string) {
		g.Rules = append(g.Rules, rulefmt.Rule{Record: name, Expr: expr})
	}
	for _, m := range rateMetrics() {
		rec(&srv, recRate("server", m), fmt.Sprintf("rate(%s[%s])", m.Name, rateWindow))
	}
	rec(&srv, RecHitRatio("server"), fmt.Sprintf("%s / (%s > 0)",
		recRate("server", signal.PrefixCacheHitTokens), recRate("server", signal.PrefixCacheQueryTokens)))
	rec(&srv, RecTimeToFull, fmt.Sprintf("(1 - %s) / (deriv(%s[15m]) > 0)",
		signal.KVUsageRatio.Name, signal.KVUsageRatio.Name))

	agg := rulefmt.RuleGroup{Name: AggregatesGroup}
	below := ""
	for _, l := range levels() {
		aggregates(&agg, l, below)
		below = l.name
	}
	planningRecording(&agg)
	return rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{srv, agg}}
}

// rateMetrics are the counters the rules take rates of.
func rateMetrics() []signal.Metric {
	return []signal.Metric{signal.PrefixCacheHitTokens, signal.PrefixCacheQueryTokens,
		signal.Preemptions, signal.PromptTokens, signal.GenerationTokens}
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

// Alert names. Each has a section in docs/runbook.md whose anchor is the
// lower-cased name.
const (
	AlertKVHigh          = "KVCacheUsageHigh"
	AlertKVCritical      = "KVCacheUsageCritical"
	AlertKVFullSoon      = "KVCacheFullSoon"
	AlertQueue           = "RequestQueueBuildingUp"
	AlertPreemptions     = "KVPreemptionsSustained"
	AlertPrefixHitLow    = "PrefixCacheHitRateLow"
	AlertLeak            = "KVCacheLeakSuspected"
	AlertExporterDown    = "KVWatchDown"
	AlertTargetDown      = "EngineTargetDown"
	AlertMetricsDisabled = "EngineMetricsDisabled"
	AlertMetricsStale    = "EngineMetricsStale"
	AlertRankImbalance   = "KVRankImbalance"
	AlertExporterAbsent  = "KVWatchAbsent"
	AlertWatchdog        = "KVWatchWatchdog"
)

// SeverityNone is the watchdog's severity: it pages nobody; Alertmanager
// routes it to the dead man's switch receiver only.
const SeverityNone = "none"

// MetaGroup is the alert group that watches the monitoring itself (kvwatch
// absent from Prometheus, the always-firing watchdog). Only Prometheus
// evaluates it: inside serve, kvwatch is never absent from itself and a
// watchdog would be noise (see ServeRules).
const MetaGroup = "kvwatch-meta"

// AlertNames lists every generated alert in file order.
func AlertNames() []string {
	return []string{AlertKVHigh, AlertKVCritical, AlertKVFullSoon, AlertQueue, AlertPreemptions,
		AlertPrefixHitLow, AlertLeak, AlertExporterDown, AlertTargetDown, AlertMetricsDisabled,
		AlertMetricsStale, AlertTargetWarnings, AlertRankImbalance, AlertPoolFullSoon, AlertPoolDrain, AlertTierFull, AlertExporterAbsent, AlertWatchdog}
}

// ServeRules are the rule groups serve evaluates over its own history when
// given no rule files: the recording rules and every alert group except
// MetaGroup.
func ServeRules(o Options) []rulefmt.RuleGroup {
	out := RecordingRules(o).Groups
	for _, g := range AlertRules(o).Groups {
		if g.Name != MetaGroup {
			out = append(out, g)
		}
	}
	return out
}

// queueAdmission selects the queues where requests wait for admission (not
// the PD transfer queues, which are work in flight).
func queueAdmission() string {
	return fmt.Sprintf(`%s{%s=~"%s|%s|%s"}`, signal.RequestsQueued.Name, signal.LabelQueue,
		signal.QueueWaiting, signal.QueuePrealloc, signal.QueueBootstrap)
}

// ratio formats a ratio threshold as PromQL and prose.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
func pct(v float64) string { return strconv.FormatFloat(v*100, 'g', -1, 64) + "%" }

// AlertRules returns the alert rule file.
func AlertRules(o Options) rulefmt.RuleGroups {
	o = o.WithDefaults()
	a := o.Config.Alerts
	// Only the labels a server has are named: no "cluster , pool " for a
	// target without them.
	srvLabels := "{{ $labels.server }} ({{ $labels.role }}{{ with $labels.cluster }}, cluster {{ . }}{{ end }}{{ with $labels.pool }}, pool {{ . }}{{ end }})"
	alert := func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule {
		return rulefmt.Rule{
			Alert:  name,
			Expr:   expr,
			For:    forD,
			Labels: map[string]string{"severity": severity},
			Annotations: map[string]string{
				"summary":     summary,
				"description": description,
				"runbook_url": o.RunbookURL + "#" + strings.ToLower(name),
			},
		}
	}
	ratio := signal.KVUsageRatio.Name
	kv := rulefmt.RuleGroup{Name: "kvwatch-kv", Rules: []rulefmt.Rule{
		alert(AlertKVHigh, SeverityWarning, a.KVUsageWarningFor,
			fmt.Sprintf("%s > %s", ratio, num(a.KVUsageWarning)),
			"KV cache of "+srvLabels+" is above "+pct(a.KVUsageWarning),
			"The KV cache of {{ $labels.server }} is {{ $value | humanizePercentage }} full (warning above "+pct(a.KVUsageWarning)+
				" for "+a.KVUsageWarningFor.String()+"). New requests will soon queue or be preempted."),
		alert(AlertKVCritical, SeverityCritical, a.KVUsageCriticalFor,
			fmt.Sprintf("%s > %s", ratio, num(a.KVUsageCritical)),
			"KV cache of "+srvLabels+" is nearly full",
			"The KV cache of {{ $labels.server }} is {{ $value | humanizePercentage }} full (critical above "+pct(a.KVUsageCritical)+
				" for "+a.KVUsageCriticalFor.String()+"). Requests queue, and vLLM preempts or SGLang retracts running ones."),
		alert(AlertKVFullSoon, SeverityWarning, o.KVFullFor,
			fmt.Sprintf("predict_linear(%s[15m], %d) >= 1 and %s > %s", ratio,
				int64(time.Duration(a.KVFullWithin)/time.Second), ratio, num(o.KVFullMinUsage)),
			"KV cache of "+srvLabels+" will be full within "+a.KVFullWithin.String(),
			"At the fill rate of the last 15m, the KV cache of {{ $labels.server }} (now above "+pct(o.KVFullMinUsage)+
				") reaches 100% within "+a.KVFullWithin.String()+"."),
		alert(AlertLeak, SeverityWarning, a.LeakFor,
			fmt.Sprintf("%s > %s and sum without (%s) (%s) == 0 and %s == 0", ratio, num(a.LeakUsage),
				signal.LabelQueue, signal.RequestsQueued.Name, signal.RequestsRunning.Name),
			"KV cache of "+srvLabels+" stays used while nothing runs",
			"{{ $labels.server }} holds {{ $value | humanizePercentage }} of its KV cache although no request has been running or waiting for "+
				a.LeakFor.String()+". Blocks are probably leaked (not freed after requests ended)."),
		alert(AlertRankImbalance, SeverityWarning, a.RankSpreadFor,
			fmt.Sprintf("%s > %s", signal.RankSpreadRatio.Name, num(a.RankSpread)),
			"KV usage across the DP ranks of "+srvLabels+" is uneven",
			"The fullest and emptiest DP ranks of {{ $labels.server }} differ by {{ $value | humanizePercentage }} of capacity (threshold "+
				pct(a.RankSpread)+"). The fullest rank fills first and limits the whole server."),
	}}
	load := rulefmt.RuleGroup{Name: "kvwatch-load", Rules: []rulefmt.Rule{
		alert(AlertQueue, SeverityWarning, a.QueueFor,
			fmt.Sprintf("sum without (%s) (%s) > %s", signal.LabelQueue, queueAdmission(), num(a.QueueLength)),
			"Requests are queueing on "+srvLabels,
			"{{ $value }} requests wait for admission on {{ $labels.server }} (threshold "+num(a.QueueLength)+" for "+a.QueueFor.String()+")."),
		alert(AlertPreemptions, SeverityCritical, a.PreemptionsFor,
			fmt.Sprintf("%s > %s", recRate("server", signal.Preemptions), num(a.PreemptionsPerSecond)),
			"Requests are being preempted on "+srvLabels,
			"{{ $labels.server }} preempts or retracts {{ $value | printf \"%.2f\" }} requests/s (threshold "+num(a.PreemptionsPerSecond)+
				"/s for "+a.PreemptionsFor.String()+"): its KV cache is too small for the load, and preempted requests are recomputed."),
		alert(AlertPrefixHitLow, SeverityWarning, a.PrefixHitFor,
			fmt.Sprintf("%s < %s and %s > %s", RecHitRatio("server"), num(a.PrefixHitRatioLow),
				recRate("server", signal.PrefixCacheQueryTokens), num(a.PrefixHitMinTokensPS)),
			"Prefix-cache hit rate of "+srvLabels+" is low",
			"Only {{ $value | humanizePercentage }} of prompt tokens on {{ $labels.server }} hit the prefix cache (threshold "+pct(a.PrefixHitRatioLow)+
				", with more than "+num(a.PrefixHitMinTokensPS)+" prompt tokens/s looked up)."),
	}}
	health := rulefmt.RuleGroup{Name: "kvwatch-health", Rules: []rulefmt.Rule{
		alert(AlertExporterDown, SeverityCritical, a.TargetDownFor,
			`up{job="kvwatch"} == 0`,
			"kvwatch exporter {{ $labels.instance }} is down",
			"Prometheus cannot scrape kvwatch at {{ $labels.instance }}: every KV signal and alert of the fleet is blind."),
		alert(AlertTargetDown, SeverityWarning, a.TargetDownFor,
			fmt.Sprintf(`%s == 0 unless on (%s, job, instance) %s{%s=~"%s|%s"}`, signal.TargetUp.Name, signal.LabelServer,
				signal.TargetScrapeError.Name, signal.LabelReason, signal.ReasonHTTP404, signal.ReasonHTTP501),
			"kvwatch cannot scrape engine {{ $labels.server }}",
			"kvwatch's scrapes of {{ $labels.server }} fail (see kvwatch_target_scrape_error for the reason); its KV signals are unknown."),
		alert(AlertMetricsDisabled, SeverityWarning, a.TargetDownFor,
			fmt.Sprintf(`%s{%s=~"%s|%s"} == 1`, signal.TargetScrapeError.Name, signal.LabelReason, signal.ReasonHTTP404, signal.ReasonHTTP501),
			"Engine {{ $labels.server }} has metrics turned off",
			"{{ $labels.server }} answers 404 (llama.cpp: 501) on its metrics path: the engine runs without metrics (SGLang: start it with --enable-metrics; llama.cpp: --metrics)."),
		alert(AlertMetricsStale, SeverityWarning, 0,
			fmt.Sprintf("time() - %s > %d", signal.TargetLastSuccess.Name, int64(time.Duration(a.StaleAfter)/time.Second)),
			"Metrics of engine {{ $labels.server }} are stale",
			"kvwatch's last successful scrape of {{ $labels.server }} is older than "+a.StaleAfter.String()+"; what dashboards show for it is old."),
	}}
	health.Rules = append(health.Rules, targetWarningsAlert(alert))
	meta := rulefmt.RuleGroup{Name: MetaGroup, Rules: []rulefmt.Rule{
		alert(AlertExporterAbsent, SeverityCritical, a.TargetDownFor,
			`absent(up{job="kvwatch"})`,
			"Prometheus has no kvwatch target",
			"No target of job kvwatch exists in Prometheus (not down: absent), so every KV signal and alert of the fleet is blind. The scrape config, service discovery or the Prometheus Operator's selectors lost kvwatch."),
		alert(AlertWatchdog, SeverityNone, 0,
			"vector(1)",
			"Alerting pipeline heartbeat",
			"Always firing while Prometheus evaluates kvwatch's rules and reaches Alertmanager. Route it to a dead man's switch that pages when it stops."),
	}}
	return rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{kv, load, health, planningAlerts(o, alert), tierAlerts(o, srvLabels, alert), meta}}
}
