// Package forecast projects each pool's KV capacity over days: from the
// kvwatch_* series in a central store (Prometheus, VictoriaMetrics, Mimir,
// Thanos, kvwatch serve), the per-period peaks of a pool's KV load, a
// robust trend through them, the dates the peak reaches the warning
// threshold, full and the end of N−1 safety, and the servers to add to
// stay under the threshold at a horizon (docs/planning.md, "kvwatch
// plan"). store.go reads the store, trend.go fits the line, this file
// plans, text.go writes the answer.
//
// It plans each pool (one role, cluster and pool label) alone: prefill
// and decode are never summed. It does not forecast seasonality, bursts
// or anything within a day (the per-period peak removes them), and it
// projects a straight line: an accelerating ramp arrives sooner.
package forecast

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// Bounds of the plan.
const (
	// MinPeriods is how many usable periods a trend needs.
	MinPeriods = 5
	// MinCoverage is the share of a whole period's samples a period must
	// have for its peak to count: with less, the peak may have been missed.
	MinCoverage = 0.5
	// CapacityTolerance is the relative change of a pool's capacity that
	// counts as a change (a restarted engine may size its KV cache a few
	// blocks differently).
	CapacityTolerance = 0.01
	// saturatedRatio is the peak used share of capacity from which a
	// pool is full at its peak: growth beyond it is not seen in used KV.
	saturatedRatio = 0.99
)

// day is the unit of the trend's x: slopes are per day.
const day = 24 * time.Hour

// Period is one period (End − period, End] of a pool's history. The peaks
// are the highest mean over the hold window within the period (a burst
// shorter than the warning's hold does not count); nil when the store has
// no sample for them.
type Period struct {
	End time.Time `json:"end"`
	// PeakLoad is the peak of used plus queued demand at one instant (used
	// alone on servers that report no demand), in tokens.
	PeakLoad    *float64 `json:"peak_load_tokens"`
	PeakUsed    *float64 `json:"peak_used_tokens"`
	PeakDemand  *float64 `json:"peak_demand_tokens"`
	PeakRunning *float64 `json:"peak_running_requests"`
	// CapacityTokens is the capacity of every server seen in the period
	// (each at its largest): a restart does not lower it, a server added
	// or removed within the period counts until it is gone.
	CapacityTokens *float64 `json:"capacity_tokens"`
	// Servers is the number of servers seen in the period.
	Servers *float64 `json:"servers"`
	// Samples and SamplesMin are the most and fewest samples of used
	// tokens one server of the pool has in the period; Coverage is Samples
	// over the pool's median per period (0–1): a period with less than
	// MinCoverage may have missed its peak.
	Samples    *float64 `json:"samples"`
	SamplesMin *float64 `json:"samples_min"`
	Coverage   float64  `json:"coverage"`
	// ServerGaps is true when some server has fewer than 95 % of the
	// samples of the fullest: a restart, a failed scrape, a server that
	// came or went.
	ServerGaps bool `json:"server_gaps"`
	// Use says whether the period's peak is in the fit, and why not.
	Use Use `json:"use"`
}

// Use is what the plan did with a period.
type Use string

// The uses of a period.
const (
	UseFitted         Use = "fitted"
	UseNoData         Use = "no_data"         // no sample in the period
	UsePartial        Use = "partial"         // coverage below MinCoverage
	UseBeforeChange   Use = "before_change"   // before the pool's last capacity change
	UseCapacityChange Use = "capacity_change" // the first period at a new capacity: the change may be within it
	UseUnused         Use = "unused"          // data, in a pool with none lately: not planned
)

// History is what the store holds about one pool.
type History struct {
	Key kv.PoolKey
	// Periods are the window's periods, oldest first, every one present
	// (a period without data has no values).
	Periods []Period
	// Servers are the capacities of the servers that reported one in the
	// last period, in tokens.
	Servers []float64
}

// Options are the plan's parameters.
type Options struct {
	// At is the end of the window: the plan's now.
	At time.Time
	// Period is the length of one peak's period (a day).
	Period time.Duration
	// Horizon is how far ahead dates and servers are planned.
	Horizon time.Duration
	// Warning is the usage ratio (0–1) the peak is to stay under:
	// alerts.kv_usage_warning.
	Warning float64
}

// State says whether a pool was planned.
type State string

// The states of a pool's plan.
const (
	Planned   State = "planned"
	TooShort  State = "too_short"  // fewer than MinPeriods usable periods
	NoData    State = "no_data"    // no samples in the window, or none lately
	NoServers State = "no_servers" // no server capacity in the last period
)

// Trend directions: growing when the slope's interval is above 0,
// shrinking when below, flat when it holds 0.
const (
	Growing   = "growing"
	Flat      = "flat"
	Shrinking = "shrinking"
)

// PoolPlan is the plan of one pool.
type PoolPlan struct {
	kv.PoolKey
	Name  string `json:"name"`
	State State  `json:"state"`
	// Reason says why a pool is not planned, and what would make it so.
	Reason string `json:"reason,omitempty"`

	// Servers is the number of servers that reported capacity in the last
	// period; ServerTokens their median capacity (the size a new server
	// is planned with), LargestServerTokens the largest (the one N−1
	// drains), CapacityTokens the pool's capacity in the last period.
	Servers             int     `json:"servers"`
	ServerTokens        float64 `json:"server_tokens,omitempty"`
	LargestServerTokens float64 `json:"largest_server_tokens,omitempty"`
	CapacityTokens      float64 `json:"capacity_tokens,omitempty"`
	// DemandCounted is true when some server of the pool reports queued
	// demand in the fitted periods (SGLang PD decode): the load is used
	// plus demand; else used alone.
	DemandCounted bool `json:"demand_counted"`
	// Change is the pool's last capacity change in the window: the fit
	// starts after it.
	Change *Change `json:"capacity_change,omitempty"`

	Periods []Period `json:"periods"`
	Fitted  int      `json:"fitted_periods"`

	Trend string `json:"trend,omitempty"`
	// PeakNowTokens is the planned peak load now (the trend's value at
	// At; a flat pool's median peak), PeakNowRatio that over the capacity.
	PeakNowTokens *float64 `json:"peak_now_tokens,omitempty"`
	PeakNowRatio  *float64 `json:"peak_now_ratio,omitempty"`
	// Growth is the slope of the peak load per day, with its 95 % bounds.
	Growth *Growth `json:"growth,omitempty"`
	// PeakRunning is the last fitted period's peak of running requests,
	// RunningGrowthPerDay its trend (requests per day).
	PeakRunning         *float64 `json:"peak_running_requests,omitempty"`
	RunningGrowthPerDay *float64 `json:"running_growth_per_day,omitempty"`

	// Warning, Full and NMinusOne are when the planned peak reaches the
	// warning threshold, the capacity, and the load the pool can take at
	// the warning threshold with its largest server drained.
	Warning   *Crossing `json:"warning,omitempty"`
	Full      *Crossing `json:"full,omitempty"`
	NMinusOne *Crossing `json:"n1,omitempty"`

	// PeakAtHorizonTokens is the planned peak at the horizon, and
	// PeakAtHorizonHighTokens that at the slope's upper bound.
	PeakAtHorizonTokens     *float64 `json:"peak_at_horizon_tokens,omitempty"`
	PeakAtHorizonHighTokens *float64 `json:"peak_at_horizon_high_tokens,omitempty"`
	// ServersToAdd is how many servers of ServerTokens keep the planned
	// peak at the horizon under the warning threshold with the largest
	// server drained (N−1); ServersToAddHigh the same at the slope's
	// upper bound.
	ServersToAdd     *int `json:"servers_to_add,omitempty"`
	ServersToAddHigh *int `json:"servers_to_add_high,omitempty"`

	// Line is the planned peak with its band from the first fitted
	// period's middle to the horizon, at the points where either bends
	// (straight lines between them): what a chart draws (serve's web UI
	// planner).
	Line []LinePoint `json:"line,omitempty"`

	Notes []string `json:"notes,omitempty"`
}

// LinePoint is the planned peak load at one time, and the band between the
// lines of the growth's 95 % bounds (widened to hold the planned line).
type LinePoint struct {
	At         time.Time `json:"at"`
	Tokens     float64   `json:"tokens"`
	LowTokens  float64   `json:"low_tokens"`
	HighTokens float64   `json:"high_tokens"`
}

// Change is a change of a pool's capacity between two periods.
type Change struct {
	// PeriodEnd is the end of the first period at the new capacity.
	PeriodEnd   time.Time `json:"period_end"`
	FromTokens  float64   `json:"from_tokens"`
	ToTokens    float64   `json:"to_tokens"`
	FromServers *float64  `json:"from_servers"`
	ToServers   *float64  `json:"to_servers"`
}

// Growth is the trend's slope in tokens per day, with its 95 % bounds,
// and as a share of the capacity per day.
type Growth struct {
	TokensPerDay     float64 `json:"tokens_per_day"`
	LowTokensPerDay  float64 `json:"low_tokens_per_day"`
	HighTokensPerDay float64 `json:"high_tokens_per_day"`
	RatioPerDay      float64 `json:"ratio_per_day"`
}

// CrossState says when a threshold is reached.
type CrossState string

// The states of a Crossing.
const (
	CrossNow      CrossState = "now"            // the planned peak is at or above it already
	CrossDate     CrossState = "date"           // on Date, within the horizon
	CrossBeyond   CrossState = "beyond_horizon" // growing, but not within the horizon
	CrossNoGrowth CrossState = "no_growth"      // flat or shrinking: no date
)

// Crossing is when the planned peak reaches a threshold.
type Crossing struct {
	ThresholdTokens float64    `json:"threshold_tokens"`
	State           CrossState `json:"state"`
	// Date is the day the trend reaches the threshold (now when State is
	// now); Earliest and Latest the days at the slope's upper and lower
	// bounds; each nil when not within the horizon.
	Date     *time.Time `json:"date,omitempty"`
	Earliest *time.Time `json:"earliest,omitempty"`
	Latest   *time.Time `json:"latest,omitempty"`
}

// Plan plans one pool from its history.
func Plan(h History, o Options) PoolPlan {
	p := PoolPlan{PoolKey: h.Key, Name: h.Key.String(), Periods: slices.Clone(h.Periods)}
	last := -1 // the last period with data
	for i, pe := range p.Periods {
		if pe.PeakLoad != nil && pe.CapacityTokens != nil {
			last = i
		} else {
			p.Periods[i].Use = UseNoData
		}
	}
	if last < 0 {
		p.State = NoData
		p.Reason = "no samples in the window"
		return p
	}
	if last < len(p.Periods)-1 {
		for i := range p.Periods {
			if p.Periods[i].Use == "" {
				p.Periods[i].Use = UseUnused
			}
		}
		p.State = NoData
		p.Reason = fmt.Sprintf("no samples since %s: the pool is gone, or nothing writes its series to the store any more",
			day0(p.Periods[last].End))
		return p
	}
	first := p.classify(o)
	p.fitted()
	if p.Fitted < MinPeriods {
		p.State = TooShort
		p.Reason = p.tooShort(o, first)
		return p
	}
	if len(h.Servers) == 0 {
		p.State = NoServers
		p.Reason = "no server reported its capacity in the last period"
		return p
	}
	p.State = Planned
	p.plan(h.Servers, o)
	return p
}

// classify marks the periods before the last capacity change and the
// first period at the new capacity (the change may be within it: an
// added server counts from the period it came in, a removed one until the
// period it left), and the partial ones; it returns the index of the
// first period with data.
func (p *PoolPlan) classify(o Options) (first int) {
	ps := p.Periods
	first = slices.IndexFunc(ps, func(pe Period) bool { return pe.Use != UseNoData })
	last := len(ps) - 1
	level := *ps[last].CapacityTokens
	p.CapacityTokens = level
	// The last change: walking back from the end, the first period at
	// another capacity.
	for i := last - 1; i >= 0; i-- {
		pe := &ps[i]
		if pe.Use == UseNoData || !differs(*pe.CapacityTokens, level) {
			continue
		}
		next := i + 1
		for ps[next].Use == UseNoData {
			next++
		}
		p.Change = &Change{PeriodEnd: ps[next].End, FromTokens: *pe.CapacityTokens, ToTokens: level,
			FromServers: pe.Servers, ToServers: ps[next].Servers}
		for j := 0; j <= i; j++ {
			ps[j].Use = UseBeforeChange
		}
		ps[next].Use = UseCapacityChange
		break
	}
	for i := range ps {
		if ps[i].Use == "" {
			ps[i].Use = UseFitted
			if ps[i].Coverage < MinCoverage {
				ps[i].Use = UsePartial
			}
		}
	}
	return first
}

// differs reports whether capacity a differs from level by more than
// CapacityTolerance.
func differs(a, level float64) bool {
	return math.Abs(a-level) > CapacityTolerance*level
}

func (p *PoolPlan) fitted() {
	p.Fitted = 0
	for _, pe := range p.Periods {
		if pe.Use == UseFitted {
			p.Fitted++
		}
	}
}

// tooShort says why the pool has too few periods, and when it will have
// enough.
func (p *PoolPlan) tooShort(o Options, first int) string {
	need := MinPeriods - p.Fitted
	again := day0(o.At.Add(time.Duration(need) * o.Period))
	unit := periodName(o.Period)
	if c := p.Change; c != nil {
		return fmt.Sprintf("capacity changed from %s to %s tokens%s in the %s ending %s: %s since; a trend needs %d: plan again on %s",
			count(c.FromTokens), count(c.ToTokens), serversChange(c), unit, day0(c.PeriodEnd), plural(p.Fitted, "usable "+unit), MinPeriods, again)
	}
	parts := []string{plural(p.Fitted, "usable "+unit)}
	if first > 0 {
		parts = append(parts, fmt.Sprintf("the series start in the %s ending %s", unit, day0(p.Periods[first].End)))
	}
	if left := p.leftOut(unit); left != "" {
		parts = append(parts, "left out: "+left)
	}
	return fmt.Sprintf("%s; a trend needs %d: plan again on %s", strings.Join(parts, "; "), MinPeriods, again)
}

// plan fits the trend and plans dates and servers; servers are the
// capacities of the last period's servers.
func (p *PoolPlan) plan(servers []float64, o Options) {
	var x, y, run []float64
	demand := false
	saturated := false
	restarts := 0
	var lastRunning *float64
	for _, pe := range p.Periods {
		if pe.Use != UseFitted {
			continue
		}
		// A peak is placed in the middle of its period: where in the
		// period it was is not read, so a date is off by at most half a
		// period (less where the daily peak comes at about one hour).
		x = append(x, pe.End.Add(-o.Period/2).Sub(o.At).Hours()/24)
		y = append(y, *pe.PeakLoad)
		if pe.PeakDemand != nil {
			demand = true
		}
		if pe.PeakUsed != nil && *pe.PeakUsed >= saturatedRatio**pe.CapacityTokens {
			saturated = true
		}
		if pe.ServerGaps {
			restarts++
		}
		if pe.PeakRunning != nil {
			run = append(run, *pe.PeakRunning)
			lastRunning = pe.PeakRunning
		}
	}
	p.DemandCounted = demand
	t, _ := TheilSen(x, y) // MinPeriods ≥ 2 distinct points
	sorted := slices.Sorted(slices.Values(servers))
	p.Servers = len(sorted)
	p.ServerTokens = median(sorted)
	p.LargestServerTokens = sorted[len(sorted)-1]
	c := p.CapacityTokens
	p.Growth = &Growth{TokensPerDay: t.Slope, LowTokensPerDay: t.SlopeLow, HighTokensPerDay: t.SlopeHigh, RatioPerDay: t.Slope / c}
	if len(run) == len(x) {
		if rt, ok := TheilSen(x, run); ok {
			p.RunningGrowthPerDay = ptr(rt.Slope)
		}
		p.PeakRunning = lastRunning
	}

	// The planned line: the trend while it grows; a flat pool stays at its
	// median peak, a shrinking one at its peak now (a plan does not count
	// on load going away).
	h := o.Horizon.Hours() / 24
	var now, slope float64
	switch {
	case t.SlopeLow > 0:
		p.Trend = Growing
		now, slope = t.At(0), t.Slope
	case t.SlopeHigh < 0:
		p.Trend = Shrinking
		now = t.At(0)
	default:
		p.Trend = Flat
		now = median(slices.Sorted(slices.Values(y)))
	}
	p.PeakNowTokens, p.PeakNowRatio = ptr(now), ptr(now/c)
	w := o.Warning
	cross := func(threshold float64) *Crossing {
		return crossing(threshold, now, slope, t, p.Trend == Growing, o.At, h)
	}
	p.Warning = cross(w * c)
	p.Full = cross(c)
	p.NMinusOne = cross(w * (c - p.LargestServerTokens))

	atHorizon := now + slope*h
	high := max(atHorizon, t.HighAt(h))
	p.PeakAtHorizonTokens, p.PeakAtHorizonHighTokens = ptr(atHorizon), ptr(high)
	p.Line = plannedLine(t, now, slope, x[0], h, o)
	// The sizes are positive (Read keeps positive capacities only) and
	// the loads finite: both have an answer.
	n, _ := ServersToAdd(atHorizon, w, c, p.ServerTokens, p.LargestServerTokens)
	nHigh, _ := ServersToAdd(high, w, c, p.ServerTokens, p.LargestServerTokens)
	p.ServersToAdd, p.ServersToAddHigh = &n, &nHigh

	if c := p.Change; c != nil {
		p.note("capacity changed from %s to %s tokens%s in the %s ending %s: fitted the %s since",
			count(c.FromTokens), count(c.ToTokens), serversChange(c), periodName(o.Period), day0(c.PeriodEnd), plural(p.Fitted, periodName(o.Period)))
	}
	if left := p.leftOut(periodName(o.Period)); left != "" {
		p.note("left out: %s", left)
	}
	if restarts > 0 {
		p.note("servers were missing for part of %s (restarts or failed scrapes): their peaks count, the trend is robust to a low one", plural(restarts, "fitted "+periodName(o.Period)))
	}
	if p.Servers == 1 {
		p.note("a single server: draining it leaves nothing, so N−1 needs one more")
	}
	if saturated && !demand {
		p.note("the peak reached the capacity and the engines report no queued demand: load beyond full is not seen, so the dates are late and the servers to add a lower bound")
	}
	if sum := floatSum(sorted); differs(sum, c) {
		p.note("the last %s's servers hold %s tokens, its peak capacity was %s: servers came or went within it", periodName(o.Period), count(sum), count(c))
	}
}

// plannedLine is the planned line (now + slope·x, x in days from o.At) and
// its band from x0 to the horizon h. All three are straight but for the
// band's widening where a bound's line crosses the planned one, so the
// points are the ends, now, and those crossings: a chart that joins them
// draws them exactly.
func plannedLine(t Trend, now, slope, x0, h float64, o Options) []LinePoint {
	xs := []float64{x0, 0, h}
	for _, b := range [][2]float64{{t.InterceptLow, t.SlopeLow}, {t.InterceptHigh, t.SlopeHigh}} {
		if b[1] != slope {
			if x := (now - b[0]) / (b[1] - slope); x > x0 && x < h {
				xs = append(xs, x)
			}
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	out := make([]LinePoint, len(xs))
	for i, x := range xs {
		v := now + slope*x
		out[i] = LinePoint{At: o.At.Add(time.Duration(x * float64(day))), Tokens: v,
			LowTokens: min(v, t.LowAt(x)), HighTokens: max(v, t.HighAt(x))}
	}
	return out
}

// crossing is when the planned line (now + slope·x, x in days) reaches
// threshold; the band from the trend's bounds where growing.
func crossing(threshold, now, slope float64, t Trend, growing bool, at time.Time, horizonDays float64) *Crossing {
	c := &Crossing{ThresholdTokens: threshold}
	if now >= threshold {
		c.State = CrossNow
		c.Date, c.Earliest, c.Latest = ptr(at), ptr(at), ptr(at)
		return c
	}
	if !growing {
		c.State = CrossNoGrowth
		return c
	}
	within := func(start, b float64) *time.Time {
		if start >= threshold {
			return ptr(at)
		}
		d := (threshold - start) / b
		if b <= 0 || d > horizonDays {
			return nil
		}
		return ptr(at.Add(time.Duration(d * float64(day))))
	}
	c.Date = within(now, slope)
	c.Earliest = within(t.HighAt(0), t.SlopeHigh)
	c.Latest = within(t.LowAt(0), t.SlopeLow)
	c.State = CrossDate
	if c.Date == nil {
		c.State = CrossBeyond
	}
	return c
}

// ServersToAdd is how many servers of size tokens a pool of capacity
// tokens, whose largest server holds largest, needs so that load stays at
// or under the warning ratio w of its capacity with its largest server
// (or a new one, if larger) drained: N−1. Without a size, a threshold
// or a finite load there is no answer (ok false).
func ServersToAdd(load, w, capacity, size, largest float64) (n int, ok bool) {
	if size <= 0 || w <= 0 || math.IsNaN(load) || math.IsInf(load, 0) {
		return 0, false
	}
	fits := func(k int) bool {
		drained := largest
		if k > 0 {
			drained = max(largest, size)
		}
		return w*(capacity+float64(k)*size-drained) >= load
	}
	if fits(0) {
		return 0, true
	}
	// The closed form is exact; starting a step below it and counting up
	// absorbs the rounding of float64.
	k := max(1, int(math.Ceil((load/w-capacity+max(largest, size))/size))-1)
	for !fits(k) {
		k++
	}
	return k, true
}

// leftOut lists the periods left out of the fit other than around a
// capacity change (the change's note says so): without data (after the
// first with data) and partial; "2026-03-07 (no data), 2026-03-10 (data
// for less than half of the day)".
func (p *PoolPlan) leftOut(unit string) string {
	var parts []string
	first := slices.IndexFunc(p.Periods, func(pe Period) bool { return pe.Use != UseNoData })
	for i, pe := range p.Periods {
		switch {
		case pe.Use == UseNoData && i > first:
			parts = append(parts, day0(pe.End)+" (no data)")
		case pe.Use == UsePartial:
			parts = append(parts, fmt.Sprintf("%s (data for less than half of the %s)", day0(pe.End), unit))
		}
	}
	return strings.Join(parts, ", ")
}

func (p *PoolPlan) note(format string, args ...any) {
	p.Notes = append(p.Notes, fmt.Sprintf(format, args...))
}

// serversChange is " (3 → 4 servers)" when both counts are known.
func serversChange(c *Change) string {
	if c.FromServers == nil || c.ToServers == nil || *c.FromServers == *c.ToServers {
		return ""
	}
	return fmt.Sprintf(" (%g → %g servers)", *c.FromServers, *c.ToServers)
}

// plural is "1 day" or "3 days".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// periodName is "day" for a 1d period, else the duration ("period of 12h").
func periodName(d time.Duration) string {
	switch d {
	case day:
		return "day"
	case 7 * day:
		return "week"
	}
	return "period"
}

// day0 writes the day of t in UTC: "2026-03-15".
func day0(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// count writes tokens as status does: "2.10M".
func count(x float64) string { return textfmt.Count(kv.Of(x)) }

func floatSum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

func ptr[T any](v T) *T { return &v }
