package history

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"google.golang.org/protobuf/proto"

	"github.com/kvwatch/kvwatch/internal/signal"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// server is one simulated server's normalized values at one instant.
type server struct {
	name, pool, role string
	used, capacity   float64
	hit, query       float64 // counters
}

// families builds what serve's Gatherer would return for servers.
func families(servers []server) []*dto.MetricFamily {
	fam := func(m signal.Metric, typ dto.MetricType, val func(server) float64) *dto.MetricFamily {
		mf := &dto.MetricFamily{Name: proto.String(m.Name), Type: typ.Enum()}
		for _, s := range servers {
			met := &dto.Metric{Label: []*dto.LabelPair{
				{Name: proto.String(signal.LabelServer), Value: proto.String(s.name)},
				{Name: proto.String(signal.LabelRole), Value: proto.String(s.role)},
				{Name: proto.String(signal.LabelCluster), Value: proto.String("")},
				{Name: proto.String(signal.LabelPool), Value: proto.String(s.pool)},
			}}
			if typ == dto.MetricType_COUNTER {
				met.Counter = &dto.Counter{Value: proto.Float64(val(s))}
			} else {
				met.Gauge = &dto.Gauge{Value: proto.Float64(val(s))}
			}
			mf.Metric = append(mf.Metric, met)
		}
		return mf
	}
	return []*dto.MetricFamily{
		fam(signal.KVUsedTokens, dto.MetricType_GAUGE, func(s server) float64 { return s.used }),
		fam(signal.KVCapacityTokens, dto.MetricType_GAUGE, func(s server) float64 { return s.capacity }),
		fam(signal.PrefixCacheHitTokens, dto.MetricType_COUNTER, func(s server) float64 { return s.hit }),
		fam(signal.PrefixCacheQueryTokens, dto.MetricType_COUNTER, func(s server) float64 { return s.query }),
	}
}

// fill appends 10 minutes at 5s resolution: server a's used grows by one
// token per second from 100, b and c are flat; every server's hit counter
// grows 30 tokens and query counter 100 tokens per scrape.
func fill(t *testing.T, st *Store, minutes int) time.Time {
	t.Helper()
	var now time.Time
	for i := 0; i <= minutes*12; i++ {
		now = t0.Add(time.Duration(i) * 5 * time.Second)
		sec := float64(i * 5)
		st.AppendFamilies(now, families([]server{
			{"a", "p1", "decode", 100 + sec, 1000, 30 * float64(i), 100 * float64(i)},
			{"b", "p1", "decode", 300, 1000, 30 * float64(i), 100 * float64(i)},
			{"c", "p2", "prefill", 50, 500, 30 * float64(i), 100 * float64(i)},
		}))
	}
	return now
}

func engine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

// instant runs q at ts and returns the result keyed by the given label.
func instant(t *testing.T, st *Store, q string, ts time.Time, by string) map[string]float64 {
	t.Helper()
	qry, err := engine().NewInstantQuery(context.Background(), st, nil, q, ts)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", q, res.Err)
	}
	vec, err := res.Vector()
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	out := map[string]float64{}
	for _, s := range vec {
		out[s.Metric.Get(by)] = s.F
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestPromQLOverHistory(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	end := fill(t, st, 20) // a's used at end: 100 + 1200 = 1300
	tests := []struct {
		query string
		by    string
		want  map[string]float64
	}{
		{`sum by (pool) (kvwatch_kv_used_tokens) / sum by (pool) (kvwatch_kv_capacity_tokens)`, "pool",
			map[string]float64{"p1": (1300 + 300) / 2000.0, "p2": 50 / 500.0}},
		{`rate(kvwatch_prefix_cache_hit_tokens_total[5m])`, "server",
			map[string]float64{"a": 6, "b": 6, "c": 6}},
		{`rate(kvwatch_prefix_cache_hit_tokens_total[5m]) / rate(kvwatch_prefix_cache_query_tokens_total[5m])`, "server",
			map[string]float64{"a": 0.3, "b": 0.3, "c": 0.3}},
		// Linear growth of 1 token/s: in an hour, 3600 more.
		{`predict_linear(kvwatch_kv_used_tokens{server="a"}[15m], 3600)`, "server",
			map[string]float64{"a": 1300 + 3600}},
		{`kvwatch_kv_used_tokens{role="prefill"}`, "server", map[string]float64{"c": 50}},
		{`kvwatch_kv_used_tokens{server=~"a|b"} offset 10m`, "server", map[string]float64{"a": 700, "b": 300}},
	}
	for _, tt := range tests {
		got := instant(t, st, tt.query, end, tt.by)
		if len(got) != len(tt.want) {
			t.Errorf("%s = %v, want %v", tt.query, got, tt.want)
			continue
		}
		for k, w := range tt.want {
			if g, ok := got[k]; !ok || !near(g, w) {
				t.Errorf("%s [%s] = %v, want %v", tt.query, k, g, w)
			}
		}
	}
}

func TestRangeQuery(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	end := fill(t, st, 10)
	q, err := engine().NewRangeQuery(context.Background(), st, nil,
		`kvwatch_kv_used_tokens{server="a"}`, end.Add(-5*time.Minute), end, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	m, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 {
		t.Fatalf("got %d series, want 1", len(m))
	}
	var got []float64
	for _, p := range m[0].Floats {
		got = append(got, p.F)
	}
	want := []float64{400, 460, 520, 580, 640, 700} // 100 + seconds since t0
	if len(got) != len(want) {
		t.Fatalf("points = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("points = %v, want %v", got, want)
			break
		}
	}
}

func TestStaleWhenSeriesDisappears(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	end := fill(t, st, 1)
	next := end.Add(5 * time.Second)
	// b's scrape failed: it is missing from this gather.
	st.AppendFamilies(next, families([]server{
		{"a", "p1", "decode", 10, 1000, 0, 0},
		{"c", "p2", "prefill", 50, 500, 0, 0},
	}))
	got := instant(t, st, `kvwatch_kv_used_tokens`, next, "server")
	if _, ok := got["b"]; ok || len(got) != 2 {
		t.Errorf("after b vanished, used = %v; want a and c only (b marked stale, not its last value)", got)
	}
	before := instant(t, st, `kvwatch_kv_used_tokens`, end, "server")
	if before["b"] != 300 {
		t.Errorf("before b vanished, used[b] = %v, want 300", before["b"])
	}
}

func TestRetentionDropsOldChunks(t *testing.T) {
	st := New(Options{Retention: 20 * time.Minute})
	end := fill(t, st, 60) // one hour at 5s = 721 samples per series
	s := st.Stats()
	// 12 series. Retention keeps the chunks whose newest sample is inside
	// the last 20 minutes (241 samples at 5s): the window, plus at most one
	// chunk that straddles its start.
	if s.Series != 12 {
		t.Errorf("series = %d, want 12", s.Series)
	}
	if lo, hi := 12*241, 12*(241+samplesPerChunk); s.Samples > hi || s.Samples < lo {
		t.Errorf("samples = %d, want between %d and %d", s.Samples, lo, hi)
	}
	got := instant(t, st, `count_over_time(kvwatch_kv_used_tokens{server="a"}[2h])`, end, "server")
	if got["a"] > 241+samplesPerChunk || got["a"] < 241 {
		t.Errorf("samples of a in the last 2h = %v, want 241..%d (20m window kept in whole chunks)", got["a"], 241+samplesPerChunk)
	}
}

func TestLabelsAndSeries(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	end := fill(t, st, 1)
	q, _ := st.Querier(t0.UnixMilli(), end.UnixMilli())
	defer q.Close()
	names, _, err := q.LabelNames(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The empty cluster label is dropped, like Prometheus does.
	if want := "__name__ pool role server"; strings.Join(names, " ") != want {
		t.Errorf("LabelNames = %v, want %s", names, want)
	}
	m := labels.MustNewMatcher(labels.MatchEqual, "pool", "p1")
	vals, _, _ := q.LabelValues(context.Background(), "server", nil, m)
	if want := "a b"; strings.Join(vals, " ") != want {
		t.Errorf("LabelValues(server, pool=p1) = %v, want %s", vals, want)
	}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, signal.KVUsedTokens.Name))
	var got []string
	for ss.Next() {
		got = append(got, ss.At().Labels().Get("server"))
	}
	if !sort.StringsAreSorted(got) || len(got) != 3 {
		t.Errorf("Select sorted = %v, want a b c", got)
	}
}

// TestMemoryBound checks the documented bound per series (docs/web.md):
// a sample takes at most 145 bits in the XOR encoding (68 for the
// timestamp's delta of delta, 77 for the value's XOR), so a chunk of n
// samples is at most 2 header bytes + ceil(145 n / 8) + the allocation
// slack before Compact.
func TestMemoryBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// The full-resolution tier alone (TestTierMemoryBound checks both).
	st := New(Options{Retention: 24 * time.Hour, FullResolution: 24 * time.Hour})
	lset := labels.FromStrings(model.MetricNameLabel, "x")
	ts := t0.UnixMilli()
	const n = 1000
	for range n {
		ts += 1 + r.Int64N(1<<40) // worst case: wildly irregular timestamps
		st.Append(lset, ts, math.Float64frombits(r.Uint64()))
	}
	s := st.Stats()
	chunks := (n + samplesPerChunk - 1) / samplesPerChunk
	bound := chunks*2 + (n*145+7)/8 + 128 // + head chunk slack
	if s.ChunkBytes > bound {
		t.Errorf("worst case: %d bytes for %d samples, want <= %d", s.ChunkBytes, n, bound)
	}

	// Typical: a token gauge moving by integer steps, scraped every 5s with
	// millisecond jitter. Documented as at most 6 bytes per sample.
	st = New(Options{Retention: 24 * time.Hour, FullResolution: 24 * time.Hour})
	ts, v := t0.UnixMilli(), 100000.0
	for range 720 { // one hour
		ts += 5000 + r.Int64N(20) - 10
		v += float64(r.IntN(2001) - 1000)
		st.Append(lset, ts, v)
	}
	if s := st.Stats(); s.ChunkBytes > 720*6 {
		t.Errorf("typical: %d bytes for 720 samples, want <= %d (6 B/sample)", s.ChunkBytes, 720*6)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	st := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st.Restore(t0); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("Restore without a file = %v, want ErrNoSnapshot", err)
	}
	end := fill(t, st, 20)
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	// A restart: a new store restores the window and keeps appending.
	st2 := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st2.Restore(end.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if a, b := st.Stats(), st2.Stats(); a.Series != b.Series || a.Samples != b.Samples {
		t.Errorf("restored stats = %+v, want %+v", b, a)
	}
	q := `sum by (pool) (kvwatch_kv_used_tokens) / sum by (pool) (kvwatch_kv_capacity_tokens)`
	if got := instant(t, st2, q, end, "pool"); !near(got["p1"], 0.8) || !near(got["p2"], 0.1) {
		t.Errorf("after restore %s = %v, want p1 0.8, p2 0.1", q, got)
	}
	st2.AppendFamilies(end.Add(5*time.Second), families([]server{{"a", "p1", "decode", 1305, 1000, 0, 0}}))
	if got := instant(t, st2, `kvwatch_kv_used_tokens{server="a"}`, end.Add(5*time.Second), "server"); got["a"] != 1305 {
		t.Errorf("append after restore: used[a] = %v, want 1305", got["a"])
	}
	// Restoring after the window has passed keeps nothing.
	st3 := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st3.Restore(end.Add(2 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s := st3.Stats(); s.Series != 0 {
		t.Errorf("restore 2h later with 1h retention: %d series, want 0", s.Series)
	}
}

// gatherFunc adapts a function to Gatherer.
type gatherFunc func() ([]*dto.MetricFamily, error)

func (f gatherFunc) Gather() ([]*dto.MetricFamily, error) { return f() }

func TestRunWritesSnapshotOnShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	st := New(Options{Retention: time.Hour, Interval: time.Hour, SnapshotFile: path,
		Now: func() time.Time { return t0 }})
	ctx, cancel := context.WithCancel(context.Background())
	gathered := make(chan struct{}, 1)
	g := gatherFunc(func() ([]*dto.MetricFamily, error) {
		defer func() { gathered <- struct{}{} }()
		return families([]server{{"a", "p1", "decode", 7, 10, 0, 0}}), nil
	})
	done := make(chan error)
	go func() { done <- st.Run(ctx, g) }()
	<-gathered // Run gathers once at start
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st2 := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st2.Restore(t0); err != nil {
		t.Fatal(err)
	}
	if got := instant(t, st2, `kvwatch_kv_used_tokens`, t0, "server"); got["a"] != 7 {
		t.Errorf("after Run stopped and restore: used = %v, want a=7", got)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAppendFamiliesAlignsTimestamps(t *testing.T) {
	st := New(Options{Retention: time.Hour, Interval: 5 * time.Second})
	// Gathers 5s apart with ticker jitter of a few ms, then one late by 2s.
	offsets := []time.Duration{0, 5003 * time.Millisecond, 9998 * time.Millisecond, 15049 * time.Millisecond, 22 * time.Second}
	for _, o := range offsets {
		st.AppendFamilies(t0.Add(o), families([]server{{"a", "p1", "decode", float64(o.Milliseconds()), 1, 0, 0}}))
	}
	q, _ := st.Querier(0, t0.Add(time.Minute).UnixMilli())
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, signal.KVUsedTokens.Name))
	if !ss.Next() {
		t.Fatal("no series")
	}
	var got []int64
	it := ss.At().Iterator(nil)
	for it.Next() != 0 {
		got = append(got, it.AtT()-t0.UnixMilli())
	}
	// Within 50ms of the 5s grid: moved onto it; 2s late: kept as is.
	if want := []int64{0, 5000, 10000, 15000, 22000}; !slices.Equal(got, want) {
		t.Errorf("sample times = %v, want %v", got, want)
	}
}

// feedFunc is a Gatherer that is also a Feeder: Run must use Feed.
type feedFunc func(*Batch)

func (f feedFunc) Gather() ([]*dto.MetricFamily, error) {
	return nil, errors.New("Gather called on a Feeder")
}
func (f feedFunc) Feed(b *Batch) { f(b) }

func TestRunFeedsBatches(t *testing.T) {
	st := New(Options{Retention: time.Hour, Interval: time.Hour, Now: func() time.Time { return t0 }})
	ctx, cancel := context.WithCancel(context.Background())
	fed := make(chan struct{}, 1)
	g := feedFunc(func(b *Batch) {
		defer func() { fed <- struct{}{} }()
		b.Add("kvwatch_kv_used_tokens", false, 7, "server", "a", "cluster", "", "role", "decode")
		b.Add("kvwatch_prompt_tokens_total", true, 70, "role", "decode", "server", "a")
	})
	done := make(chan error)
	go func() { done <- st.Run(ctx, g) }()
	<-fed // Run feeds once at start
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := instant(t, st, `kvwatch_kv_used_tokens{role="decode",cluster=""}`, t0, "server"); got["a"] != 7 {
		t.Errorf("used = %v, want a=7", got)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, list := range st.series {
		for _, ms := range list {
			if name := ms.lset.Get(model.MetricNameLabel); ms.counter != (name == "kvwatch_prompt_tokens_total") {
				t.Errorf("%s: counter = %v", ms.lset, ms.counter)
			}
			if ms.lset.Has("cluster") {
				t.Errorf("%s keeps an empty label", ms.lset)
			}
		}
	}
}
