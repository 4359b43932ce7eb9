package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"google.golang.org/protobuf/proto"
)

// benchEndpoints is the number of simulated endpoints; override with
// KVWATCH_BENCH_ENDPOINTS to measure a smaller fleet quickly.
func benchEndpoints() int {
	if n, err := strconv.Atoi(os.Getenv("KVWATCH_BENCH_ENDPOINTS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// gen produces one series' next value.
type gen func(r *rand.Rand, i int) float64

// endpointSeries are the 41 series serve exports for one SGLang decode
// server with one DP rank, with value shapes like the simulator's: 20
// constant (capacity, context length, info series, zero queues), 7
// integer random walks (token gauges, headroom, running, waiting), 2
// full-precision ratios, 6 counters, 3 scrape-health values and 3 per-rank
// series.
func endpointSeries() (names []string, gens []gen) {
	add := func(name string, g gen) { names = append(names, name); gens = append(gens, g) }
	constant := func(v float64) gen { return func(*rand.Rand, int) float64 { return v } }
	walk := func(start, step float64) gen {
		v := start
		return func(r *rand.Rand, _ int) float64 {
			v += float64(r.IntN(int(2*step+1))) - step
			if v < 0 {
				v = 0
			}
			return v
		}
	}
	counter := func(step int) gen {
		v := 0.0
		return func(r *rand.Rand, _ int) float64 { v += float64(r.IntN(step)); return v }
	}
	add("kvwatch_kv_capacity_tokens", constant(2581504))
	add("kvwatch_context_length_tokens", constant(524288))
	add("kvwatch_server_info", constant(1))
	for i := range 11 {
		add("kvwatch_signal_info_"+strconv.Itoa(i), constant(1))
	}
	add("kvwatch_target_up", constant(1))
	add("kvwatch_kv_reserved_ratio", constant(0))
	for _, q := range []string{"prealloc", "bootstrap", "transfer", "inflight"} {
		add("kvwatch_requests_queued_"+q, constant(0))
	}
	for _, n := range []string{"used", "available", "evictable"} {
		add("kvwatch_kv_"+n+"_tokens", walk(1e6, 20000))
	}
	add("kvwatch_kv_headroom_8192", walk(150, 3))
	add("kvwatch_kv_headroom_ctx", walk(3, 1))
	add("kvwatch_requests_running", walk(90, 10))
	add("kvwatch_requests_queued_waiting", walk(5, 3))
	used := walk(1e6, 20000)
	add("kvwatch_kv_usage_ratio", func(r *rand.Rand, i int) float64 { return used(r, i) / 2581504 })
	add("kvwatch_kv_rank_spread_ratio", constant(0))
	for _, n := range []string{"hit", "query", "preempt", "prompt", "gen", "scrapes"} {
		add("kvwatch_"+n+"_total", counter(5000))
	}
	add("kvwatch_target_scrape_duration_seconds", func(r *rand.Rand, _ int) float64 { return 0.002 + r.Float64()/1000 })
	add("kvwatch_target_scrape_body_bytes", walk(40000, 200))
	add("kvwatch_target_last_success_timestamp_seconds", func(_ *rand.Rand, i int) float64 { return 1.8e9 + 5*float64(i) })
	rankUsed := walk(1e6, 20000)
	add("kvwatch_rank_kv_used_tokens", rankUsed)
	add("kvwatch_rank_kv_capacity_tokens", constant(2581504))
	add("kvwatch_rank_kv_usage_ratio", func(r *rand.Rand, i int) float64 { return rankUsed(r, i) / 2581504 })
	return names, gens
}

func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// BenchmarkHistory24h fills a 24h window, gathered every 5s, for
// benchEndpoints() endpoints, appending straight into the series in time
// order (a compressed 24h) with the default tiers: the last hour at 5s,
// the rest downsampled to 1m. It appends 24h plus 30 steps, so that the
// coarse tier holds the most it keeps in steady state (trimSteps beyond the
// window). It reports the memory it takes.
// Run it once: -benchtime=1x. KVWATCH_BENCH_FULL_RESOLUTION (e.g. 24h)
// changes the full-resolution window, KVWATCH_BENCH_DOWNSAMPLE_STEP the
// step; KVWATCH_BENCH_HEAPPROFILE=file writes the live heap at the end
// (run with -test.memprofilerate=4096 for detail).
func BenchmarkHistory24h(b *testing.B) {
	const step = 5 * time.Second
	opts := Options{Retention: 24 * time.Hour, Interval: step}
	if d, err := time.ParseDuration(os.Getenv("KVWATCH_BENCH_FULL_RESOLUTION")); err == nil {
		opts.FullResolution = d
	}
	if d, err := time.ParseDuration(os.Getenv("KVWATCH_BENCH_DOWNSAMPLE_STEP")); err == nil {
		opts.DownsampleStep = d
	}
	opts = opts.withDefaults()
	span := opts.Retention
	if opts.FullResolution < opts.Retention {
		span += trimSteps * opts.DownsampleStep
	}
	samples := int(span / step)
	for range b.N {
		st := New(opts)
		n := benchEndpoints()
		names, _ := endpointSeries()
		type ep struct {
			series []*memSeries
			gens   []gen
		}
		eps := make([]ep, n)
		for e := range eps {
			_, gens := endpointSeries()
			eps[e].gens = gens
			for _, name := range names {
				lset := labels.FromStrings(model.MetricNameLabel, name, "server", fmt.Sprintf("10.0.%d.%d:30000", e/250, e%250),
					"role", "decode", "cluster", "c1", "pool", "p"+strconv.Itoa(e%8))
				st.mu.Lock()
				ms := st.getOrCreate(lset)
				ms.counter = strings.HasSuffix(name, "_total")
				eps[e].series = append(eps[e].series, ms)
				st.mu.Unlock()
			}
		}
		r := rand.New(rand.NewPCG(1, 2))
		t0 := time.Now().Add(-span).UnixMilli()
		start := time.Now()
		for i := range samples {
			st.mu.Lock()
			// Gathers every 5s with up to 20ms of ticker jitter, aligned
			// as AppendFamilies does.
			ts := st.align(t0 + int64(i)*step.Milliseconds() + int64(r.IntN(20)))
			for e := range eps {
				for j, ms := range eps[e].series {
					st.appendLocked(ms, ts, eps[e].gens[j](r, i))
				}
			}
			// As AppendFamilies does after every gather.
			st.sweepLocked(ts, 0)
			st.mu.Unlock()
		}
		fill := time.Since(start)
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s := st.Stats()
		b.ReportMetric(float64(s.Series), "series")
		b.ReportMetric(float64(s.Samples), "samples")
		b.ReportMetric(float64(s.ChunkBytes)/float64(s.Samples), "chunkB/sample")
		if s.RawSamples > 0 {
			b.ReportMetric(float64(s.RawChunkBytes)/float64(s.RawSamples), "rawB/sample")
		}
		if s.CoarseSamples > 0 {
			b.ReportMetric(float64(s.CoarseSamples), "coarse-samples")
			b.ReportMetric(float64(s.CoarseChunkBytes)/float64(s.CoarseSamples), "coarseB/sample")
		}
		b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heapMB")
		b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "allocMB")
		b.ReportMetric(rssMB(), "rssMB")
		b.ReportMetric(fill.Seconds(), "fill-s")
		if path := os.Getenv("KVWATCH_BENCH_HEAPPROFILE"); path != "" {
			writeHeapProfile(b, path)
		}
		runtime.KeepAlive(st)
	}
}

// writeHeapProfile writes the live heap to path (go tool pprof
// -sample_index=inuse_space), with the store still referenced.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendFamilies measures one gather round of benchEndpoints()
// endpoints (41 series each) into a warm store: the CPU serve spends every
// scrape interval on history.
func BenchmarkAppendFamilies(b *testing.B) {
	n := benchEndpoints()
	names, _ := endpointSeries()
	mfs := make([]*dto.MetricFamily, len(names))
	for j, name := range names {
		mf := &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_GAUGE.Enum()}
		for e := range n {
			mf.Metric = append(mf.Metric, &dto.Metric{
				Label: []*dto.LabelPair{{Name: proto.String("server"), Value: proto.String(fmt.Sprintf("10.0.%d.%d:30000", e/250, e%250))},
					{Name: proto.String("role"), Value: proto.String("decode")}},
				Gauge: &dto.Gauge{Value: proto.Float64(float64(e))}})
		}
		mfs[j] = mf
	}
	st := New(Options{Retention: time.Hour})
	t0 := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st.AppendFamilies(t0.Add(time.Duration(i)*5*time.Second), mfs)
	}
}
