package history

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"google.golang.org/protobuf/proto"
)

// sample is a (seconds since 0, value) pair; stale stands for StaleNaN.
type sample struct {
	T int64
	V float64
}

var stale = math.Float64frombits(value.StaleNaN)

func samplesOf(t *testing.T, chunks []chunk) []sample {
	t.Helper()
	var out []sample
	for _, c := range chunks {
		it := c.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out = append(out, sample{ts / 1000, v})
		}
	}
	return out
}

// cmpSamples compares samples, with StaleNaN equal to itself.
var cmpSamples = cmp.Comparer(func(a, b float64) bool {
	return a == b || (value.IsStaleNaN(a) && value.IsStaleNaN(b))
})

func TestDownsampler(t *testing.T) {
	tests := []struct {
		name    string
		counter bool
		in      []sample
		// out is what reaches the coarse tier; pending is still open.
		out     []sample
		pending sample
	}{
		{"gauge keeps the newest sample of each minute", false,
			[]sample{{0, 1}, {5, 9}, {55, 2}, {60, 3}, {115, 4}, {120, 5}},
			[]sample{{55, 2}, {115, 4}}, sample{120, 5}},
		{"a gauge going down is not a reset", false,
			[]sample{{0, 10}, {20, 5}, {40, 7}, {65, 1}},
			[]sample{{40, 7}}, sample{65, 1}},
		{"counter reset mid-step keeps the samples before and after it", true,
			[]sample{{0, 100}, {20, 120}, {30, 5}, {50, 200}, {70, 210}},
			[]sample{{20, 120}, {30, 5}, {50, 200}}, sample{70, 210}},
		{"counter reset on the step's last sample", true,
			[]sample{{50, 100}, {55, 3}, {65, 8}},
			[]sample{{50, 100}, {55, 3}}, sample{65, 8}},
		{"two resets in one step", true,
			[]sample{{0, 50}, {10, 60}, {15, 2}, {25, 4}, {30, 1}, {45, 9}, {60, 12}},
			[]sample{{10, 60}, {15, 2}, {25, 4}, {30, 1}, {45, 9}}, sample{60, 12}},
		{"staleness marker and the value before it survive", false,
			[]sample{{0, 1}, {10, 2}, {20, stale}, {30, 3}, {65, 4}},
			[]sample{{10, 2}, {20, stale}, {30, 3}}, sample{65, 4}},
		{"a counter restarting after a staleness marker is not a reset", true,
			[]sample{{0, 100}, {10, stale}, {20, 5}, {59, 6}, {60, 7}},
			[]sample{{0, 100}, {10, stale}, {59, 6}}, sample{60, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d downsampler
			var out tier
			for _, s := range tt.in {
				d.feed(&out, 60_000, tt.counter, s.T*1000, s.V)
			}
			if diff := cmp.Diff(tt.out, samplesOf(t, out.view(nil, minInt64, maxInt64)), cmpSamples); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if got := (sample{d.t / 1000, d.v}); !d.pending || got != tt.pending {
				t.Errorf("pending = %v (%v), want %v", got, d.pending, tt.pending)
			}
		})
	}
}

// tierFamilies is one gather of server a (and b while it is up): a gauge
// kvwatch_kv_used_tokens and two counters.
func tierFamilies(used, hit, query float64, withB bool) []*dto.MetricFamily {
	fam := func(name string, typ dto.MetricType, v float64) *dto.MetricFamily {
		mf := &dto.MetricFamily{Name: proto.String(name), Type: typ.Enum()}
		for _, srv := range []string{"a", "b"} {
			if srv == "b" && !withB {
				continue
			}
			m := &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("server"), Value: proto.String(srv)}}}
			if typ == dto.MetricType_COUNTER {
				m.Counter = &dto.Counter{Value: proto.Float64(v)}
			} else {
				m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
			}
			mf.Metric = append(mf.Metric, m)
		}
		return mf
	}
	return []*dto.MetricFamily{
		fam("kvwatch_kv_used_tokens", dto.MetricType_GAUGE, used),
		fam("kvwatch_prefix_cache_hit_tokens_total", dto.MetricType_COUNTER, hit),
		fam("kvwatch_prefix_cache_query_tokens_total", dto.MetricType_COUNTER, query),
	}
}

// fillTiers gathers 3h at 5s from t0 (on a minute) into a store keeping
// the last hour at full resolution and the rest at 1m:
//   - used is 100, with spikes: 300 at 50m20s (mid-step), 200 at 55m55s and
//     400 at 1h30m55s (each the last sample of its minute), 350 at 2h50m;
//   - hit grows 10 per scrape (2/s) and resets at 30m15s (i = 363) to 5;
//   - query grows 100 per scrape (20/s);
//   - server b disappears at 20m50s (i = 250).
func fillTiers(t *testing.T, st *Store) time.Time {
	t.Helper()
	const reset = 363
	spikes := map[int]float64{604: 300, 671: 200, 1091: 400, 2040: 350}
	var now time.Time
	for i := 0; i <= 3*720; i++ {
		now = t0.Add(time.Duration(i) * 5 * time.Second)
		used := 100.0
		if v, ok := spikes[i]; ok {
			used = v
		}
		hit := 10 * float64(i)
		if i >= reset {
			hit = 10*float64(i-reset) + 5
		}
		st.AppendFamilies(now, tierFamilies(used, hit, 100*float64(i), i < 250))
	}
	return now
}

func tierOptions(path string) Options {
	return Options{Retention: 3 * time.Hour, FullResolution: time.Hour, DownsampleStep: time.Minute,
		Interval: 5 * time.Second, SnapshotFile: path}
}

func TestPromQLAcrossTiers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	st := New(tierOptions(path))
	end := fillTiers(t, st)
	s := st.Stats()
	// a's and b's three series. The raw tier holds the last hour, and at
	// most 5 minutes more: 721..781 samples a series for a's; b's ended
	// long ago and are all coarse.
	if s.Series != 6 {
		t.Fatalf("series = %d, want 6", s.Series)
	}
	if s.CoarseSamples == 0 || s.RawSamples > 3*781 || s.RawSamples < 3*721 {
		t.Fatalf("stats %+v: want 3×721..3×781 raw samples and a coarse tier", s)
	}
	check := func(t *testing.T, st *Store) {
		t.Helper()
		tests := []struct {
			query string
			at    time.Time
			want  map[string]float64
		}{
			// Wholly in the coarse tier: newest samples of each minute from
			// 50m55s to 59m55s, 60s apart, extrapolated to the 10m window.
			{`rate(kvwatch_prefix_cache_query_tokens_total{server="a"}[10m])`, t0.Add(time.Hour), map[string]float64{"a": 20}},
			// Across the tier boundary: from the coarse sample at 1h00m55s
			// (5s after the window's start) to the raw one at 3h.
			{`rate(kvwatch_prefix_cache_query_tokens_total{server="a"}[7150s])`, end, map[string]float64{"a": 20}},
			// The reset at 30m15s in the coarse tier: samples at 20m55s
			// (2510), ... 30m10s (3620, kept before the reset), 30m15s (5,
			// kept after it), ... 39m55s (1165). Increase 1165-2510+3620 =
			// 2275 over 1140s, extrapolated to 1200s. Without the samples
			// around the reset it would be 1165-2510+3590 = 2245 over 1140s
			// (29m55s's 3590 taken as the value before the reset).
			{`increase(kvwatch_prefix_cache_hit_tokens_total{server="a"}[20m])`, t0.Add(40 * time.Minute), map[string]float64{"a": 2275 * 1200.0 / 1140}},
			{`resets(kvwatch_prefix_cache_hit_tokens_total{server="a"}[1h])`, t0.Add(time.Hour), map[string]float64{"a": 1}},
			// max_over_time sees the raw spike, and the coarse spike kept as
			// the last sample of its minute...
			{`max_over_time(kvwatch_kv_used_tokens{server="a"}[45m])`, end, map[string]float64{"a": 350}},
			{`max_over_time(kvwatch_kv_used_tokens{server="a"}[2h])`, end, map[string]float64{"a": 400}},
			// ...but not the 300 at 50m20s, mid-minute in the coarse tier
			// (documented: one sample per step, the newest).
			{`max_over_time(kvwatch_kv_used_tokens{server="a"}[30m])`, t0.Add(time.Hour), map[string]float64{"a": 200}},
			// b ended at 20m50s: its last value is kept, and so is the
			// staleness marker, so it is gone at once rather than after 5m.
			{`kvwatch_kv_used_tokens`, t0.Add(20*time.Minute + 47*time.Second), map[string]float64{"a": 100, "b": 100}},
			{`kvwatch_kv_used_tokens`, t0.Add(21*time.Minute + 30*time.Second), map[string]float64{"a": 100}},
			// Instant values in the coarse tier: the newest of the minute.
			{`kvwatch_kv_used_tokens{server="a"}`, t0.Add(56 * time.Minute), map[string]float64{"a": 200}},
			{`kvwatch_prefix_cache_query_tokens_total{server="a"}`, t0.Add(90 * time.Minute), map[string]float64{"a": 100 * 1079}},
		}
		for _, tt := range tests {
			got := instant(t, st, tt.query, tt.at, "server")
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(near)); diff != "" {
				t.Errorf("%s at %s (-want +got):\n%s", tt.query, tt.at.Sub(t0), diff)
			}
		}
	}
	check(t, st)

	t.Run("snapshot keeps both tiers", func(t *testing.T) {
		if err := st.WriteSnapshot(path); err != nil {
			t.Fatal(err)
		}
		st2 := New(tierOptions(path))
		if err := st2.Restore(end); err != nil {
			t.Fatal(err)
		}
		if got := st2.Stats(); got.Series != s.Series || got.RawSamples != s.RawSamples || got.CoarseSamples != s.CoarseSamples {
			t.Errorf("restored stats = %+v, want %+v", got, s)
		}
		check(t, st2)
		// Appending goes on: the next raw chunk moves down with the
		// restored downsampler state, and a's query counter is still read
		// right across it.
		for i := 1; i <= 720; i++ {
			st.AppendFamilies(end.Add(time.Duration(i)*5*time.Second), tierFamilies(100, 0, 100*float64(2160+i), false))
			st2.AppendFamilies(end.Add(time.Duration(i)*5*time.Second), tierFamilies(100, 0, 100*float64(2160+i), false))
		}
		if a, b := st.Stats(), st2.Stats(); a.RawSamples != b.RawSamples || a.CoarseSamples != b.CoarseSamples {
			t.Errorf("after an hour more: restored store %+v, original %+v", b, a)
		}
		for _, x := range []*Store{st, st2} {
			// From 5s before the coarse sample at end-89m05s (coarse when
			// the snapshot was written) over the restored pending sample
			// and the part downsampled since, to the raw samples at end+30m.
			q := `rate(kvwatch_prefix_cache_query_tokens_total{server="a"}[7150s])`
			if got := instant(t, x, q, end.Add(30*time.Minute), "server"); !near(got["a"], 20) {
				t.Errorf("%s = %v, want a=20", q, got)
			}
			// The hour to 10m before end is coarse now (the snapshot was
			// written at its middle): one sample a minute, at :55, none
			// lost at the snapshot.
			q = `count_over_time(kvwatch_prefix_cache_query_tokens_total{server="a"}[1h])`
			if got := instant(t, x, q, end.Add(-10*time.Minute), "server"); got["a"] != 60 {
				t.Errorf("%s = %v, want a=60", q, got)
			}
		}
	})
}

// TestTierMemoryBound checks the bound per series documented in
// docs/web.md for the default tiers: 24h kept, the last hour at 5s, the
// rest at 1m.
func TestTierMemoryBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	st := New(Options{Retention: 24 * time.Hour, Interval: 5 * time.Second})
	lset := labels.FromStrings(model.MetricNameLabel, "kvwatch_kv_used_tokens")
	ts, v := t0.UnixMilli(), 1e6
	const n = 26 * 720 // 26h at 5s
	for i := range n {
		ts = t0.UnixMilli() + int64(i)*5000
		v = min(max(v+float64(r.IntN(40001)-20000), 0), 2581504)
		st.Append(lset, ts, v)
	}
	st.Truncate(time.UnixMilli(ts))
	s := st.Stats()
	// Raw: the last hour and up to 5m more (rawTrimSteps steps), 5s apart.
	// Coarse: the rest of the 24h at 1m, up to 30m more (trimSteps), and
	// the pending sample.
	const (
		rawMin, rawMax       = 720, (3600+300)/5 + 1
		coarseMin, coarseMax = 23*60 - 5, 23*60 + 30 + 2
	)
	if s.RawSamples < rawMin || s.RawSamples > rawMax {
		t.Errorf("raw samples = %d, want %d..%d", s.RawSamples, rawMin, rawMax)
	}
	if s.CoarseSamples < coarseMin || s.CoarseSamples > coarseMax {
		t.Errorf("coarse samples = %d, want %d..%d", s.CoarseSamples, coarseMin, coarseMax)
	}
	// A token gauge moving by integer steps: at most 6 bytes a sample in
	// either tier, documented.
	if s.RawChunkBytes > 6*s.RawSamples || s.CoarseChunkBytes > 6*s.CoarseSamples {
		t.Errorf("bytes: raw %d for %d samples, coarse %d for %d: want <= 6 B/sample",
			s.RawChunkBytes, s.RawSamples, s.CoarseChunkBytes, s.CoarseSamples)
	}
	// At 5s without downsampling the same day would take 17,280 samples.
	if total := s.RawSamples + s.CoarseSamples; total > 2300 {
		t.Errorf("samples = %d, want <= 2,300 (vs 17,280 at full resolution)", total)
	}
}
