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

// counterRate is the per-second rate of counter selector sel over window
// (offset off, "" for none), absent over any window in which the counter
// went down: `(rate(X[w]) unless resets(X[w]) > 0)`, the query of kvwatch's
// web UI (rateOf in internal/web/static/app.js), as status and top show no
// rate over a window with a counter reset (kv.RatesBetween). kvwatch's
// counters are the engines' counters passed through: rate() takes a
// decrease for a restart from 0 and counts the new reading as the
// increase, right after a restart, but a counter that went back a little
// (a target now answered by another engine, a counter read mid-update)
// would read as hundreds of thousands per second. The price: no rate for
// one window after an engine restart (docs/stack.md, "Recording rules").
func counterRate(sel, window, off string) string {
	r := sel + "[" + window + "]"
	if off != "" {
		r += " offset " + off
	}
	return "(rate(" + r + ") unless resets(" + r + ") > 0)"
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
		rec(&srv, recRate("server", m), counterRate(m.Name, rateWindow, ""))
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
	autoscalingRecording(&agg, o)
	return rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{srv, agg, projectionRecording(o)}}
}

// rateMetrics are the counters the rules take rates of.
func rateMetrics() []signal.Metric {
	return []signal.Metric{signal.PrefixCacheHitTokens, signal.PrefixCacheQueryTokens,
		signal.Preemptions, signal.PromptTokens, signal.GenerationTokens}
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
	return []string{AlertKVHigh, AlertKVCritical, AlertKVExhausted, AlertKVFullSoon, AlertQueue, AlertPreemptions,
		AlertPrefixHitLow, AlertLeak, AlertExporterDown, AlertTargetDown, AlertMetricsDisabled,
		AlertMetricsStale, AlertTargetWarnings, AlertRankImbalance, AlertStateHigh, AlertPoolFullSoon, AlertPoolDrain, AlertTierFull, AlertPoolProjectedFull, AlertExporterAbsent, AlertWatchdog}
}

// ServeRules are the rule groups serve evaluates over its own history when
// given no rule files: every group except MetaGroup and the projection's
// (ProjectionGroup, ProjectionAlertsGroup: days of history, which serve
// plans with its own projection instead).
func ServeRules(o Options) []rulefmt.RuleGroup {
	var out []rulefmt.RuleGroup
	for _, g := range append(RecordingRules(o).Groups, AlertRules(o).Groups...) {
		if g.Name != MetaGroup && g.Name != ProjectionGroup && g.Name != ProjectionAlertsGroup {
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
	srvLabels := "{{ $labels.server }} ({{ $labels.role }}{{ with $labels." + signal.LabelCluster + " }}, cluster {{ . }}{{ end }}{{ with $labels.pool }}, pool {{ . }}{{ end }})"
	alert := func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule {
		return rulefmt.Rule{
			Alert:  name,
			Expr:   expr,
			For:    forD,
			Labels: map[string]string{"severity": severity},
			Annotations: valueUnitAnnotation(name, map[string]string{
				"summary":     summary,
				"description": description,
				"runbook_url": o.RunbookURL + "#" + strings.ToLower(name),
			}),
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
		exhaustedAlert(o, srvLabels, alert),
		// The value is the usage now: the texts say "full now" above the
		// fast window's threshold.
		alert(AlertKVFullSoon, SeverityWarning, o.KVFullFor,
			fmt.Sprintf("%s > %s and predict_linear(%s[15m], %d) >= 1", ratio, num(o.KVFullMinUsage), ratio,
				int64(time.Duration(a.KVFullWithin)/time.Second)),
			"KV cache of "+srvLabels+" "+ifValue(serverFullNow(o), "is full", "will be full within "+a.KVFullWithin.String()),
			ifValue(serverFullNow(o),
				"The KV cache of {{ $labels.server }} is full now ({{ $value | humanizePercentage }}, above "+pct(a.KVUsageExhausted)+
					") and was still filling over the last 15m; "+AlertKVExhausted+" pages once it stays full for "+a.KVUsageExhaustedWindow.String()+".",
				"At the fill rate of the last 15m, the KV cache of {{ $labels.server }} (now above "+pct(o.KVFullMinUsage)+
					") reaches 100% within "+a.KVFullWithin.String()+".")),
		// The diagnosis (kvwatch_server_state, kv.Diagnose) names the
		// leak whatever the queue: a leaking server under load fills and
		// queues. Its value is the usage, for the description.
		alert(AlertLeak, SeverityWarning, a.LeakFor,
			fmt.Sprintf(`%s and ignoring (%s) %s{%s="%s"} == 1`, ratio, signal.LabelState, signal.ServerState.Name, signal.LabelState, kv.StateLeak),
			"KV cache of "+srvLabels+" is held by requests that do not run",
			"{{ $labels.server }} holds {{ $value | humanizePercentage }} of its KV cache while the requests that could hold it do not run, for "+
				a.LeakFor.String()+" (whatever waits in its queues): blocks are probably not freed after requests end. Restart the engine; more capacity will fill the same way."),
		alert(AlertRankImbalance, SeverityWarning, a.RankSpreadFor,
			fmt.Sprintf("%s > %s", signal.RankSpreadRatio.Name, num(a.RankSpread)),
			"KV usage across the DP ranks of "+srvLabels+" is uneven",
			"The fullest and emptiest DP ranks of {{ $labels.server }} differ by {{ $value | humanizePercentage }} of capacity (threshold "+
				pct(a.RankSpread)+"). The fullest rank fills first and limits the whole server."),
		stateAlert(o, srvLabels, alert),
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
		// kvwatch is there when scraped (up) or when serve pushes its own
		// series itself (--remote-write.url: no up is written then).
		alert(AlertExporterAbsent, SeverityCritical, a.TargetDownFor,
			fmt.Sprintf(`absent(up{job="kvwatch"}) and absent(%s{job="kvwatch"})`, signal.Targets.Name),
			"kvwatch is absent: neither scraped nor pushing",
			"No target of job kvwatch exists here (not down: absent) and no kvwatch serve pushes its series, so every KV signal and alert of the fleet is blind. "+
				"The scrape config, service discovery or the Prometheus Operator's selectors lost kvwatch, or a serve that remote-writes stopped or cannot reach the store."),
		alert(AlertWatchdog, SeverityNone, 0,
			"vector(1)",
			"Alerting pipeline heartbeat",
			"Always firing while Prometheus evaluates kvwatch's rules and reaches Alertmanager. Route it to a dead man's switch that pages when it stops."),
	}}
	return rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{kv, load, health, planningAlerts(o, alert), tierAlerts(o, srvLabels, alert), projectionAlerts(alert), meta}}
}

// AlertTargetWarnings fires while kvwatch flags a target's page as
// implausible (kvwatch_target_warnings{reason} > 0: negative values, used
// beyond capacity, values beyond 2^53, duplicate series, a page that
// matches two engines). The values concerned are not exported, so the
// server's signals are partly unknown, and nothing else says so: the
// target is up. It has a section in docs/runbook.md.
const AlertTargetWarnings = "EngineValuesImplausible"

// targetWarningsFor is its hold time: a page with a transient glitch (a
// counter read mid-update, a restart) is no reason to warn anyone; a
// warning that stays this long is the engine's or the config's.
const targetWarningsFor = model.Duration(10 * time.Minute)

// targetWarningsAlert returns the rule of AlertTargetWarnings (in the
// health group).
func targetWarningsAlert(alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.Rule {
	return alert(AlertTargetWarnings, SeverityWarning, targetWarningsFor,
		signal.TargetWarnings.Name+" > 0",
		"Engine {{ $labels.server }} reports implausible values ({{ $labels.reason }})",
		"The last page of {{ $labels.server }} had {{ $value }} {{ $labels.reason }} warnings, and its pages have had some for "+targetWarningsFor.String()+
			": the values concerned are not exported, so its KV signals are partly unknown. `kvwatch status` shows each warning's text.")
}
