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

// Capacity-planning rules (docs/planning.md): the demand-aware time until a
// pool's free KV is gone, and the alerts on it and on N−1 drain safety.

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
	return "{{ with $labels.pool }}" + named + " {{ . }} ({{ $labels.role }}{{ with $labels.cluster }}, cluster {{ . }}{{ end }})" +
		"{{ else }}" + unnamed + " {{ $labels.role }} pool{{ with $labels.cluster }} of cluster {{ . }}{{ end }}{{ end }}"
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
			"KV cache of "+pool+" will be full within "+a.KVFullWithin.String(),
			"At the fill trend of the last "+fillWindow+" plus the KV its queued requests need, the free KV of "+pool+
				" is gone in {{ $value | humanizeDuration }} (threshold "+a.KVFullWithin.String()+")."),
		alert(AlertPoolDrain, SeverityWarning, drainUnsafeFor,
			fmt.Sprintf("%s < 0 and on (%s) (%s > 1)", signal.PoolDrainMarginRatio.Name, pl, signal.PoolServers.Name),
			poolCap+" cannot lose its largest server",
			"Draining the largest server of "+pool+" would put the rest above the "+pct(a.KVUsageWarning)+
				" warning: the margin is {{ $value | humanizePercentage }} of the rest's capacity. Add capacity before maintenance."),
	}}
}
