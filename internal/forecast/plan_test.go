package forecast

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// planAt is the plan's now in these tests.
var planAt = time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)

// periodEnd is the end of period i of 14 daily periods ending at planAt.
func periodEnd(i int) time.Time { return planAt.Add(-time.Duration(13-i) * day) }

// history builds 14 daily periods: period i has peak load load(x) at x =
// i − 13.5 days, its middle (nil: no data), the capacity and servers
// capOf(i) returns, coverage 1; servers are the last period's capacities.
func history(load func(x float64) *float64, capOf func(i int) (capacity, n float64), servers ...float64) History {
	h := History{Key: kv.PoolKey{Role: kv.RoleDecode, Cluster: "a"}, Servers: servers}
	for i := range 14 {
		pe := Period{End: periodEnd(i)}
		if v := load(float64(i) - 13.5); v != nil {
			c, n := capOf(i)
			pe.PeakLoad, pe.PeakUsed = v, v
			pe.CapacityTokens, pe.Servers = &c, &n
			pe.Coverage = 1
		}
		h.Periods = append(h.Periods, pe)
	}
	return h
}

func line(a, b float64) func(float64) *float64 {
	return func(x float64) *float64 { return ptr(a + b*x) }
}

// fourServers is a pool of 4 servers of 250 tokens throughout.
func fourServers(int) (float64, float64) { return 1000, 4 }

var quarter = []float64{250, 250, 250, 250}

var planOpts = Options{At: planAt, Period: day, Horizon: 90 * day, Warning: 0.9}

func days(d float64) *time.Time { return ptr(planAt.Add(time.Duration(d * float64(day)))) }

func TestPlan(t *testing.T) {
	now := ptr(planAt)
	cases := []struct {
		name string
		h    History
		// The parts of the plan compared; Periods are compared by use only.
		want PoolPlan
		uses string // one letter per period: f fitted, n no data, p partial, b before change, c change, u unused
	}{
		{
			// y = 700 + 10x tokens: 70 % now, 1 %/day. Warning 900 in 20
			// days, full 1000 in 30; N−1 (0.9 × 750 = 675) is gone now. At
			// 90 days 1,600: 0.9 × (750 + 250k) ≥ 1600 needs k = 5.
			name: "growing",
			h:    history(line(700, 10), fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 14,
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Growth:              &Growth{TokensPerDay: 10, LowTokensPerDay: 10, HighTokensPerDay: 10, RatioPerDay: 0.01},
				Warning:             &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20), Earliest: days(20), Latest: days(20)},
				Full:                &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30), Earliest: days(30), Latest: days(30)},
				NMinusOne:           &Crossing{ThresholdTokens: 675, State: CrossNow, Date: now, Earliest: now, Latest: now},
				PeakAtHorizonTokens: ptr(1600.0), PeakAtHorizonHighTokens: ptr(1600.0),
				ServersToAdd: ptr(5), ServersToAddHigh: ptr(5)},
			uses: "ffffffffffffff",
		},
		{
			// 0.5 %/day from 30 %: the warning (900) is 120 days out, full
			// 140: beyond 90 days. At 90 days 750: 0.9 × 750 = 675 < 750,
			// so N−1 (675, reached in 75 days) needs one more.
			name: "slow growth",
			h:    history(line(300, 5), fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 14,
				PeakNowTokens: ptr(300.0), PeakNowRatio: ptr(0.3),
				Growth:              &Growth{TokensPerDay: 5, LowTokensPerDay: 5, HighTokensPerDay: 5, RatioPerDay: 0.005},
				Warning:             &Crossing{ThresholdTokens: 900, State: CrossBeyond},
				Full:                &Crossing{ThresholdTokens: 1000, State: CrossBeyond},
				NMinusOne:           &Crossing{ThresholdTokens: 675, State: CrossDate, Date: days(75), Earliest: days(75), Latest: days(75)},
				PeakAtHorizonTokens: ptr(750.0), PeakAtHorizonHighTokens: ptr(750.0),
				ServersToAdd: ptr(1), ServersToAddHigh: ptr(1)},
			uses: "ffffffffffffff",
		},
		{
			name: "flat",
			h:    history(line(500, 0), fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Flat, Fitted: 14,
				PeakNowTokens: ptr(500.0), PeakNowRatio: ptr(0.5),
				Growth:              &Growth{},
				Warning:             &Crossing{ThresholdTokens: 900, State: CrossNoGrowth},
				Full:                &Crossing{ThresholdTokens: 1000, State: CrossNoGrowth},
				NMinusOne:           &Crossing{ThresholdTokens: 675, State: CrossNoGrowth},
				PeakAtHorizonTokens: ptr(500.0), PeakAtHorizonHighTokens: ptr(500.0),
				ServersToAdd: ptr(0), ServersToAddHigh: ptr(0)},
			uses: "ffffffffffffff",
		},
		{
			// Flat at 95 %: over the warning now, no date for full. 0.9 ×
			// (750 + 250k) ≥ 950 needs k ≥ 1.22: 2.
			name: "flat over the warning",
			h:    history(line(950, 0), fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Flat, Fitted: 14,
				PeakNowTokens: ptr(950.0), PeakNowRatio: ptr(0.95),
				Growth:              &Growth{},
				Warning:             &Crossing{ThresholdTokens: 900, State: CrossNow, Date: now, Earliest: now, Latest: now},
				Full:                &Crossing{ThresholdTokens: 1000, State: CrossNoGrowth},
				NMinusOne:           &Crossing{ThresholdTokens: 675, State: CrossNow, Date: now, Earliest: now, Latest: now},
				PeakAtHorizonTokens: ptr(950.0), PeakAtHorizonHighTokens: ptr(950.0),
				ServersToAdd: ptr(2), ServersToAddHigh: ptr(2)},
			uses: "ffffffffffffff",
		},
		{
			// Falling 10/day from 600: planned at today's 600, never less.
			name: "shrinking",
			h:    history(line(600, -10), fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Shrinking, Fitted: 14,
				PeakNowTokens: ptr(600.0), PeakNowRatio: ptr(0.6),
				Growth:              &Growth{TokensPerDay: -10, LowTokensPerDay: -10, HighTokensPerDay: -10, RatioPerDay: -0.01},
				Warning:             &Crossing{ThresholdTokens: 900, State: CrossNoGrowth},
				Full:                &Crossing{ThresholdTokens: 1000, State: CrossNoGrowth},
				NMinusOne:           &Crossing{ThresholdTokens: 675, State: CrossNoGrowth},
				PeakAtHorizonTokens: ptr(600.0), PeakAtHorizonHighTokens: ptr(600.0),
				ServersToAdd: ptr(0), ServersToAddHigh: ptr(0)},
			uses: "ffffffffffffff",
		},
		{
			// One day 30 % above its peak (a burst the hold did not
			// absorb): 78 of the 91 slopes are 10, so the median is too.
			name: "outlier",
			h: history(func(x float64) *float64 {
				if x == -6.5 {
					return ptr(1.3 * (700 + 10*x))
				}
				return ptr(700 + 10*x)
			}, fourServers, quarter...),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 14,
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Warning: &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20)},
				Full:    &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30)},
			},
			uses: "ffffffffffffff",
		},
		{
			// 3 servers of 250 until period 7, in which a fourth came: the
			// fit starts at period 8 (6 periods), the line is the same.
			name: "capacity added",
			h: history(line(700, 10), func(i int) (float64, float64) {
				if i < 7 {
					return 750, 3
				}
				return 1000, 4
			}, quarter...),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 6,
				Change:        &Change{PeriodEnd: periodEnd(7), FromTokens: 750, ToTokens: 1000, FromServers: ptr(3.0), ToServers: ptr(4.0)},
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Warning: &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20)},
				Full:    &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30)},
				Notes:   []string{"capacity changed from 750 to 1,000 tokens (3 → 4 servers) in the day ending 2026-03-09: fitted the 6 days since"},
			},
			uses: "bbbbbbbcffffff",
		},
		{
			// A server went away in period 6 or 7 (seen in 6, not in 7):
			// the fit starts at period 8, 6 periods. 0.9 × 750 = 675 is
			// the warning, 675 − 700 < 0: now.
			name: "capacity removed",
			h: history(line(700, 10), func(i int) (float64, float64) {
				if i < 7 {
					return 1000, 4
				}
				return 750, 3
			}, 250, 250, 250),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 6,
				Change:        &Change{PeriodEnd: periodEnd(7), FromTokens: 1000, ToTokens: 750, FromServers: ptr(4.0), ToServers: ptr(3.0)},
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(700.0 / 750),
				Warning: &Crossing{ThresholdTokens: 675, State: CrossNow, Date: now, Earliest: now, Latest: now},
				Full:    &Crossing{ThresholdTokens: 750, State: CrossDate, Date: days(5), Earliest: days(5), Latest: days(5)},
				Notes:   []string{"capacity changed from 1,000 to 750 tokens (4 → 3 servers) in the day ending 2026-03-09: fitted the 6 days since"},
			},
			uses: "bbbbbbbcffffff",
		},
		{
			// Added in period 11: periods 12 and 13 only. 3 more days.
			name: "capacity added lately",
			h: history(line(700, 10), func(i int) (float64, float64) {
				if i < 11 {
					return 750, 3
				}
				return 1000, 4
			}, quarter...),
			want: PoolPlan{State: TooShort, Fitted: 2,
				Change: &Change{PeriodEnd: periodEnd(11), FromTokens: 750, ToTokens: 1000, FromServers: ptr(3.0), ToServers: ptr(4.0)},
				Reason: "capacity changed from 750 to 1,000 tokens (3 → 4 servers) in the day ending 2026-03-13: 2 usable days since; a trend needs 5: plan again on 2026-03-18"},
			uses: "bbbbbbbbbbbcff",
		},
		{
			name: "one day of history",
			h: history(func(x float64) *float64 {
				if x < -1 {
					return nil
				}
				return ptr(700.0)
			}, fourServers, quarter...),
			want: PoolPlan{State: TooShort, Fitted: 1,
				Reason: "1 usable day; the series start in the day ending 2026-03-15; a trend needs 5: plan again on 2026-03-19"},
			uses: "nnnnnnnnnnnnnf",
		},
		{
			name: "gone",
			h: history(func(x float64) *float64 {
				if x > -3 {
					return nil
				}
				return ptr(700.0)
			}, fourServers),
			want: PoolPlan{State: NoData, Reason: "no samples since 2026-03-12: the pool is gone, or nothing writes its series to the store any more"},
			uses: "uuuuuuuuuuunnn",
		},
		{
			name: "empty",
			h:    history(func(float64) *float64 { return nil }, fourServers),
			want: PoolPlan{State: NoData, Reason: "no samples in the window"},
			uses: "nnnnnnnnnnnnnn",
		},
		{
			// A day without data and one with data for 30 % of it are left
			// out; the line through the other 12 is the same.
			name: "gaps",
			h: func() History {
				h := history(line(700, 10), fourServers, quarter...)
				h.Periods[5] = Period{End: h.Periods[5].End}
				h.Periods[8].Coverage = 0.3
				return h
			}(),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 12,
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Warning: &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20)},
				Full:    &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30)},
				Notes:   []string{"left out: 2026-03-07 (no data), 2026-03-10 (data for less than half of the day)"},
			},
			uses: "fffffnffpfffff",
		},
		{
			// A server missing for part of period 10: not a change.
			name: "restart",
			h: func() History {
				h := history(line(700, 10), fourServers, quarter...)
				h.Periods[10].ServerGaps = true
				return h
			}(),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 14,
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Warning: &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20)},
				Full:    &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30)},
				Notes:   []string{"servers were missing for part of 1 fitted day (restarts or failed scrapes): their peaks count, the trend is robust to a low one"},
			},
			uses: "ffffffffffffff",
		},
		{
			// One server of 1000: N−1 is gone now; at 90 days 1,600 needs
			// 0.9 × 1000k ≥ 1600, k = 2.
			name: "single server",
			h:    history(line(700, 10), func(int) (float64, float64) { return 1000, 1 }, 1000),
			want: PoolPlan{State: Planned, Trend: Growing, Fitted: 14,
				PeakNowTokens: ptr(700.0), PeakNowRatio: ptr(0.7),
				Warning:      &Crossing{ThresholdTokens: 900, State: CrossDate, Date: days(20)},
				Full:         &Crossing{ThresholdTokens: 1000, State: CrossDate, Date: days(30)},
				NMinusOne:    &Crossing{ThresholdTokens: 0, State: CrossNow, Date: now, Earliest: now, Latest: now},
				ServersToAdd: ptr(2),
				Notes:        []string{"a single server: draining it leaves nothing, so N−1 needs one more"},
			},
			uses: "ffffffffffffff",
		},
		{
			name: "no servers",
			h:    history(line(700, 10), fourServers),
			want: PoolPlan{State: NoServers, Fitted: 14, Reason: "no server reported its capacity in the last period"},
			uses: "ffffffffffffff",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Plan(c.h, planOpts)
			uses := ""
			for _, pe := range got.Periods {
				uses += map[Use]string{UseFitted: "f", UseNoData: "n", UsePartial: "p", UseBeforeChange: "b", UseCapacityChange: "c", UseUnused: "u"}[pe.Use]
			}
			if uses != c.uses {
				t.Errorf("period uses = %s, want %s", uses, c.uses)
			}
			if got.Name != c.h.Key.String() {
				t.Errorf("Name = %q, want %q", got.Name, c.h.Key.String())
			}
			// Compare what the case sets: the fields it leaves zero are
			// not compared (a nil pointer, an empty string or slice).
			want := c.want
			got.PoolKey, got.Name, got.Periods = kv.PoolKey{}, "", nil
			got.Servers, got.ServerTokens, got.LargestServerTokens, got.CapacityTokens = 0, 0, 0, 0
			got.DemandCounted = false
			if want.Growth == nil {
				got.Growth = nil
			}
			if want.NMinusOne == nil {
				got.NMinusOne = nil
			}
			if want.PeakAtHorizonTokens == nil {
				got.PeakAtHorizonTokens, got.PeakAtHorizonHighTokens = nil, nil
			}
			if want.ServersToAdd == nil {
				got.ServersToAdd = nil
			}
			if want.ServersToAddHigh == nil {
				got.ServersToAddHigh = nil
			}
			if want.Change == nil && got.Change != nil {
				t.Errorf("Change = %+v, want none", got.Change)
			}
			for _, cr := range []struct{ w, g *Crossing }{{want.Warning, got.Warning}, {want.Full, got.Full}} {
				if cr.w != nil && cr.g != nil && cr.w.Earliest == nil {
					cr.g.Earliest, cr.g.Latest = nil, nil // the band of an exact line is its date; compared where set
				}
			}
			got.PeakRunning, got.RunningGrowthPerDay = nil, nil
			got.Line = nil // TestPlannedLine
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanPool checks the pool's servers, sizes and demand, and the
// running requests' trend.
func TestPlanPool(t *testing.T) {
	h := history(line(700, 10), func(int) (float64, float64) { return 1000, 3 }, 300, 200, 500)
	for i := range h.Periods {
		h.Periods[i].PeakRunning = ptr(40 + 2*float64(i))
	}
	h.Periods[9].PeakDemand = ptr(25.0)
	got := Plan(h, planOpts)
	// Median 300, largest 500: N−1 leaves 500, 0.9 × 500 = 450.
	if got.Servers != 3 || got.ServerTokens != 300 || got.LargestServerTokens != 500 || got.CapacityTokens != 1000 ||
		!got.DemandCounted || got.NMinusOne.ThresholdTokens != 450 {
		t.Errorf("Plan: servers %d of %g (largest %g), capacity %g, demand counted %v, N−1 threshold %g; want 3 of 300 (largest 500), 1000, true, 450",
			got.Servers, got.ServerTokens, got.LargestServerTokens, got.CapacityTokens, got.DemandCounted, got.NMinusOne.ThresholdTokens)
	}
	if got.PeakRunning == nil || *got.PeakRunning != 66 || got.RunningGrowthPerDay == nil || *got.RunningGrowthPerDay != 2 {
		t.Errorf("running: peak %v, growth %v; want 66, 2 per day", got.PeakRunning, got.RunningGrowthPerDay)
	}
}

// TestPlannedLine: the line's points are its ends, now and where a bound's
// line crosses the planned one, worked out by hand: planned 100 + 10x, low
// 110 + 5x (crosses it at x = 2), high 95 + 15x (at x = 1).
func TestPlannedLine(t *testing.T) {
	tr := Trend{Slope: 10, Intercept: 100, SlopeLow: 5, InterceptLow: 110, SlopeHigh: 15, InterceptHigh: 95}
	at := func(d float64) time.Time { return planAt.Add(time.Duration(d * float64(day))) }
	cases := []struct {
		name       string
		now, slope float64
		want       []LinePoint
	}{
		{"growing", 100, 10, []LinePoint{
			{At: at(-10), Tokens: 0, LowTokens: 0, HighTokens: 0},
			{At: at(0), Tokens: 100, LowTokens: 100, HighTokens: 100},
			{At: at(1), Tokens: 110, LowTokens: 110, HighTokens: 110},
			{At: at(2), Tokens: 120, LowTokens: 120, HighTokens: 125},
			{At: at(20), Tokens: 300, LowTokens: 210, HighTokens: 395},
		}},
		// A flat pool's line stays at its median peak, 120: the low line
		// crosses it at x = 2, the high one at x = 5/3.
		{"flat", 120, 0, []LinePoint{
			{At: at(-10), Tokens: 120, LowTokens: 60, HighTokens: 120},
			{At: at(0), Tokens: 120, LowTokens: 110, HighTokens: 120},
			{At: at(5.0 / 3), Tokens: 120, LowTokens: 118.33333333333333, HighTokens: 120},
			{At: at(2), Tokens: 120, LowTokens: 120, HighTokens: 125},
			{At: at(20), Tokens: 120, LowTokens: 120, HighTokens: 395},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := plannedLine(tr, c.now, c.slope, -10, 20, planOpts)
			if diff := cmp.Diff(c.want, got, cmpopts.EquateApprox(0, 1e-9), cmpopts.EquateApproxTime(time.Second)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
