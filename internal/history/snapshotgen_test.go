package history

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// seriesModel replays one series' observed behaviour: its value moves by
// steps drawn from the differences between its consecutive observed
// samples.
type seriesModel struct {
	lset    labels.Labels
	counter bool
	// monotonic series (counters, timestamps) only go up: |step| is added.
	monotonic bool
	v         float64
	steps     []float64
	// lo and hi bound a gauge: the observed range widened by its width on
	// both sides (never below 0 when no observed value was, never above 1
	// for a ratio that never was).
	lo, hi float64
}

func (m *seriesModel) next(r *rand.Rand) float64 {
	if len(m.steps) == 0 {
		return m.v
	}
	d := m.steps[r.IntN(len(m.steps))]
	switch {
	case m.monotonic:
		m.v += math.Abs(d)
	default:
		if r.IntN(2) == 0 {
			d = -d
		}
		m.v += d
		if m.v > m.hi {
			m.v = 2*m.hi - m.v
		}
		if m.v < m.lo {
			m.v = 2*m.lo - m.v
		}
		m.v = min(max(m.v, m.lo), m.hi)
	}
	return m.v
}

// modelSeries builds one model per series of the seed store from the
// samples it holds. Series with no sample but staleness markers (ended)
// are left out.
func modelSeries(b *testing.B, seed *Store) []*seriesModel {
	q, err := seed.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	set := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, ".+"))
	var out []*seriesModel
	var it chunkenc.Iterator
	for set.Next() {
		s := set.At()
		var vals []float64
		it = s.Iterator(it)
		for it.Next() == chunkenc.ValFloat {
			if _, v := it.At(); !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		seed.mu.RLock()
		ms, _ := seed.lookupLocked(s.Labels())
		counter := ms != nil && ms.counter
		seed.mu.RUnlock()
		name := s.Labels().Get(model.MetricNameLabel)
		m := &seriesModel{lset: s.Labels(), counter: counter, v: vals[0],
			monotonic: counter || strings.HasSuffix(name, "_timestamp_seconds")}
		lo, hi := vals[0], vals[0]
		for i, v := range vals {
			lo, hi = min(lo, v), max(hi, v)
			if i > 0 && v != vals[i-1] {
				m.steps = append(m.steps, v-vals[i-1])
			}
		}
		if len(m.steps) > 0 {
			// Unchanged samples are as likely as in the observation.
			for i := 1; i < len(vals); i++ {
				if vals[i] == vals[i-1] {
					m.steps = append(m.steps, 0)
				}
			}
		}
		w := hi - lo
		m.lo, m.hi = lo-w, hi+w
		if lo >= 0 {
			m.lo = max(m.lo, 0)
		}
		if strings.HasSuffix(name, "_ratio") && hi <= 1 {
			m.hi = min(m.hi, 1)
		}
		out = append(out, m)
	}
	if err := set.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkSnapshot24h writes the snapshot file that
// scripts/bench-serve-history.sh restores into serve: a compressed 24h.
// It reads a short snapshot written by serve itself
// (KVWATCH_BENCH_SEED_SNAPSHOT, a few minutes of scraping), so it has
// exactly the series serve records (gathered kvwatch_* families and
// recording rules' outputs) with their labels and types, and fills a new
// store with 24h plus the coarse tier's trim slack of samples every 5s
// ending now, in time order as serve appends them, with serve's default
// tiers (1h at full resolution, 1m after). Each series replays the
// steps between its observed consecutive samples in random order (a
// series that never changed stays constant; counters and timestamps only
// go up). The snapshot is written to KVWATCH_BENCH_SNAPSHOT.
// KVWATCH_BENCH_HEAPPROFILE=file writes the live heap at the end.
// Run it once: -test.benchtime=1x.
func BenchmarkSnapshot24h(b *testing.B) {
	seedFile, out := os.Getenv("KVWATCH_BENCH_SEED_SNAPSHOT"), os.Getenv("KVWATCH_BENCH_SNAPSHOT")
	if seedFile == "" || out == "" {
		b.Skip("set KVWATCH_BENCH_SEED_SNAPSHOT and KVWATCH_BENCH_SNAPSHOT (see scripts/bench-serve-history.sh)")
	}
	const step = 5 * time.Second
	for range b.N {
		seed := New(Options{Retention: 24 * time.Hour, SnapshotFile: seedFile})
		if err := seed.Restore(time.Now()); err != nil {
			b.Fatal(err)
		}
		models := modelSeries(b, seed)
		if len(models) == 0 {
			b.Fatalf("%s holds no samples: let serve scrape for a few intervals before stopping it", seedFile)
		}
		seed = nil
		st := New(Options{Retention: 24 * time.Hour, Interval: step})
		opts := st.opts
		span := opts.Retention + trimSteps*opts.DownsampleStep
		series := make([]*memSeries, len(models))
		st.mu.Lock()
		for i, m := range models {
			series[i] = st.getOrCreate(m.lset)
			series[i].counter = m.counter
		}
		st.mu.Unlock()
		r := rand.New(rand.NewPCG(1, 2))
		t0 := time.Now().Add(-span).UnixMilli()
		start := time.Now()
		for i := range int(span / step) {
			st.mu.Lock()
			// Gathers every 5s with up to 20ms of ticker jitter, aligned
			// as AppendFamilies does.
			ts := st.align(t0 + int64(i)*step.Milliseconds() + int64(r.IntN(20)))
			for j, ms := range series {
				st.appendLocked(ms, ts, models[j].next(r))
			}
			st.sweepLocked(ts, 0)
			st.mu.Unlock()
		}
		fill := time.Since(start)
		start = time.Now()
		if err := st.WriteSnapshot(out); err != nil {
			b.Fatal(err)
		}
		write := time.Since(start)
		runtime.GC()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		s := st.Stats()
		fi, err := os.Stat(out)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(s.Series), "series")
		b.ReportMetric(float64(s.Samples), "samples")
		b.ReportMetric(float64(s.ChunkBytes)/float64(s.Samples), "chunkB/sample")
		b.ReportMetric(float64(fi.Size())/(1<<20), "fileMB")
		b.ReportMetric(float64(mem.HeapAlloc)/(1<<20), "allocMB")
		b.ReportMetric(fill.Seconds(), "fill-s")
		b.ReportMetric(write.Seconds(), "write-s")
		logByName(b, st)
		if path := os.Getenv("KVWATCH_BENCH_HEAPPROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		runtime.KeepAlive(st)
	}
}

// logByName logs the encoded bytes of the metric names that take the most,
// with their series and bytes per sample: where the history's memory goes.
func logByName(b *testing.B, st *Store) {
	type use struct {
		name                   string
		series, samples, bytes int
	}
	by := map[string]*use{}
	total := 0
	st.mu.RLock()
	for _, list := range st.series {
		for _, ms := range list {
			name := ms.lset.Get(model.MetricNameLabel)
			u := by[name]
			if u == nil {
				u = &use{name: name}
				by[name] = u
			}
			rs, cs := ms.samples()
			rb, cb := ms.bytes()
			u.series++
			u.samples += rs + cs
			u.bytes += rb + cb
			total += rb + cb
		}
	}
	st.mu.RUnlock()
	list := make([]*use, 0, len(by))
	for _, u := range by {
		list = append(list, u)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].bytes > list[j].bytes })
	b.Logf("%d metric names, %.1f MiB encoded; the largest:", len(list), float64(total)/(1<<20))
	for _, u := range list[:min(15, len(list))] {
		b.Logf("%6.1f MiB %5.1f%% %6d series %5.2f B/sample  %s", float64(u.bytes)/(1<<20),
			100*float64(u.bytes)/float64(total), u.series, float64(u.bytes)/float64(max(u.samples, 1)), u.name)
	}
}
