package history

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// churnGather is one gather of two targets: "good" with the same 10 rank
// series every time, and "bad", whose 40 ranks get new names at every
// gather (label churn).
func churnGather(g int) []call {
	var calls []call
	for i := range 10 {
		calls = append(calls, call{name: signal.RankKVUsageRatio.Name, v: 0.5,
			pairs: []string{signal.LabelServer, "good", signal.LabelDPRank, fmt.Sprint(i)}})
	}
	for i := range 40 {
		calls = append(calls, call{name: signal.RankKVUsageRatio.Name, v: 0.5,
			pairs: []string{signal.LabelServer, "bad", signal.LabelDPRank, fmt.Sprintf("g%d-r%d", g, i)}})
	}
	return calls
}

// Label churn stays under the series limits: stale series are dropped
// first, new ones refused only when none is left, a healthy target keeps
// every sample, and the counters and one warning say so. Before the
// limits, "bad" held 40 series more after every gather (240 after six).
//
// The expected numbers, worked out by hand (gathers g0..g5; the series of
// gather k are stale, and may be dropped, from the commit of gather k+1):
//   - per target 60: g1 fills "bad" to 60 and 20 are refused (g0's are
//     in the latest gather); g2 drops g0's 40; g3 drops g1's 20 and
//     refuses 20; g4 drops 40, g5 drops 20 and refuses 20: 120 dropped,
//     60 refused, 60 series left.
//   - store 120: "good" 10 + "bad" 40 per gather reach 120 at g2, whose
//     last 10 new series drop 10 of g0's; g3..g5 drop 40 each: 130
//     dropped, none refused, "bad" keeps 110.
//   - store 60: g1 refuses 30 (nothing stale yet); g2 drops g0's 40; g3
//     drops g1's 10 and refuses 30; g4 drops 40; g5 drops 10 and refuses
//     30: 100 dropped, 90 refused, "bad" keeps 50.
func TestSeriesLimitChurn(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		maxSeries, maxPerTgt  int
		limit                 string // the limit label of the counts
		evicted, refused, bad int
	}{
		{"per target 60", 0, 60, signal.LimitMaxSeriesPerTarget, 120, 60, 60},
		{"store 120", 120, 0, signal.LimitMaxSeries, 130, 0, 110},
		{"store 60", 60, 0, signal.LimitMaxSeries, 100, 90, 50},
		{"both: the per-target limit first", 1000, 60, signal.LimitMaxSeriesPerTarget, 120, 60, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			clock := start
			st := New(Options{Retention: time.Hour, Interval: 5 * time.Second,
				MaxSeries: tc.maxSeries, MaxSeriesPerTarget: tc.maxPerTgt,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return clock }})
			for g := range 6 {
				clock = start.Add(time.Duration(g) * 5 * time.Second)
				record(st, clock, churnGather(g))
			}
			series, _ := stored(st)
			good, bad := 0, 0
			for _, s := range series {
				switch {
				case strings.Contains(s.Labels, `server="good"`):
					good++
					if len(s.Samples) != 6 {
						t.Errorf("%s: %d samples, want all 6 gathers'", s.Labels, len(s.Samples))
					}
				case strings.Contains(s.Labels, `server="bad"`):
					bad++
				}
			}
			if good != 10 || bad != tc.bad {
				t.Errorf("series: good %d, bad %d; want 10 and %d", good, bad, tc.bad)
			}
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(st.Collector())
			other := signal.LimitMaxSeries
			if tc.limit == other {
				other = signal.LimitMaxSeriesPerTarget
			}
			want := fmt.Sprintf(`
# HELP kvwatch_history_series_evicted_total %s
# TYPE kvwatch_history_series_evicted_total counter
kvwatch_history_series_evicted_total{limit=%q} %d
kvwatch_history_series_evicted_total{limit=%q} 0
# HELP kvwatch_history_series_refused_total %s
# TYPE kvwatch_history_series_refused_total counter
kvwatch_history_series_refused_total{limit=%q} %d
kvwatch_history_series_refused_total{limit=%q} 0
`, signal.HistorySeriesEvicted.Help, tc.limit, tc.evicted, other, signal.HistorySeriesRefused.Help, tc.limit, tc.refused, other)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
				"kvwatch_history_series_evicted_total", "kvwatch_history_series_refused_total"); err != nil {
				t.Error(err)
			}
			// One warning in the 25s (one per target every 10 minutes),
			// naming the target and the limit's key.
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "target=bad") ||
				!strings.Contains(lines[0], "limit=history."+tc.limit) {
				t.Errorf("logs:\n%s\nwant one warning naming target=bad and limit=history.%s", logs.String(), tc.limit)
			}
		})
	}
}

// The warning of a target comes again after limitWarnEvery, with what
// happened since.
func TestSeriesLimitWarningEvery(t *testing.T) {
	var logs bytes.Buffer
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := start
	st := New(Options{Retention: time.Hour, Interval: 5 * time.Second, MaxSeriesPerTarget: 60,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return clock }})
	for g := range 3 { // the warning of g1 (20 refused)
		clock = start.Add(time.Duration(g) * 5 * time.Second)
		record(st, clock, churnGather(g))
	}
	clock = start.Add(5*time.Second + limitWarnEvery) // g2's 40 dropped are due now
	record(st, clock, churnGather(3))                 // and g3's: 20 dropped, 20 refused
	got := strings.Count(logs.String(), "level=WARN")
	if got != 2 || !strings.Contains(logs.String(), "stale_series_dropped=0 new_series_refused=20") ||
		!strings.Contains(logs.String(), "stale_series_dropped=60 new_series_refused=20") {
		t.Errorf("logs:\n%s\nwant 2 warnings: 0 dropped and 20 refused, then 60 dropped and 20 refused", logs.String())
	}
}

// Series restored from a snapshot are stale until gathered again: a
// target that renamed its series across a restart gets its new ones by
// dropping the old.
func TestSeriesLimitRestoredSeriesAreStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snapshot")
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	before := New(Options{Retention: time.Hour, Interval: 5 * time.Second})
	record(before, start, churnGather(0))
	if err := before.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	after := New(Options{Retention: time.Hour, Interval: 5 * time.Second, SnapshotFile: path, MaxSeriesPerTarget: 40})
	if err := after.Restore(start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	record(after, start.Add(time.Minute), churnGather(1))
	series, _ := stored(after)
	for _, s := range series {
		if strings.Contains(s.Labels, `dp_rank="g0-`) {
			t.Errorf("%s: restored and not gathered again, still held", s.Labels)
		}
	}
	if st := after.Stats(); st.Series != 50 || st.SeriesEvicted.MaxSeriesPerTarget != 40 || st.SeriesRefused != (LimitCounts{}) {
		t.Errorf("stats: %d series, evicted %+v, refused %+v; want 50 (good 10, bad's 40 new), 40 dropped per target, none refused",
			st.Series, st.SeriesEvicted, st.SeriesRefused)
	}
}

// Recording rules write through Append, under the same limits.
func TestSeriesLimitAppend(t *testing.T) {
	st := New(Options{Retention: time.Hour, MaxSeries: 2})
	a := labels.FromStrings("__name__", "pool:x:sum", "pool", "a")
	b := labels.FromStrings("__name__", "pool:x:sum", "pool", "b")
	c := labels.FromStrings("__name__", "pool:x:sum", "pool", "c")
	if !st.Append(a, 1000, 1) || !st.Append(b, 1000, 1) {
		t.Fatal("the first two series were refused")
	}
	if st.Append(c, 1000, 1) {
		t.Error("a third series was recorded over max_series 2")
	}
	// a ends (a staleness marker): c takes its place.
	if !st.Append(a, 2000, stale) || !st.Append(c, 2000, 1) {
		t.Error("c was refused although a had ended")
	}
	if got := st.Stats(); got.Series != 2 || got.SeriesEvicted.MaxSeries != 1 || got.SeriesRefused.MaxSeries != 1 {
		t.Errorf("stats %+v: want 2 series, 1 dropped and 1 refused under max_series", got)
	}
}

func TestCheckSettingsLimits(t *testing.T) {
	ok := Settings{Retention: time.Hour, Interval: 5 * time.Second}
	for _, tc := range []struct {
		name string
		set  func(*Settings)
		want string
	}{
		{"no limits", func(*Settings) {}, ""},
		{"max_series negative", func(s *Settings) { s.MaxSeries = -1 }, "history.max_series -1 is negative; write 0 for no limit"},
		{"max_series_per_target negative", func(s *Settings) { s.MaxSeriesPerTarget = -5 }, "history.max_series_per_target -5 is negative; write 0 for no limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ok
			tc.set(&n)
			err := CheckSettings(n)
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Errorf("CheckSettings = %v, want %q", err, tc.want)
			}
			st := New(Options{Retention: time.Hour})
			if err := st.Reconfigure(n); (err == nil) != (tc.want == "") {
				t.Errorf("Reconfigure = %v", err)
			} else if err == nil && st.Settings() != n {
				t.Errorf("Settings() = %+v after Reconfigure(%+v)", st.Settings(), n)
			}
		})
	}
}
