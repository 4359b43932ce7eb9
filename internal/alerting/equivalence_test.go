package alerting

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"google.golang.org/protobuf/proto"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// exactStore keeps float samples as appended, unrounded (the history
// rounds recording-rule ratios and rates to 21 bits, which would hide a
// real difference below 5e-7 between the two paths compared here).
type exactStore struct {
	mu     sync.Mutex
	series map[uint64]*exactSeries
}

type exactSeries struct {
	lset    labels.Labels
	samples []chunks.Sample
}

type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }

func (e *exactStore) Append(lset labels.Labels, t int64, v float64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.series == nil {
		e.series = map[uint64]*exactSeries{}
	}
	s := e.series[lset.Hash()]
	if s == nil {
		s = &exactSeries{lset: lset}
		e.series[lset.Hash()] = s
	}
	if n := len(s.samples); n > 0 && s.samples[n-1].T() >= t {
		return false
	}
	s.samples = append(s.samples, fsample{t, v})
	return true
}

func (e *exactStore) Querier(mint, maxt int64) (storage.Querier, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Samples are only appended: the slice headers taken here stay valid.
	all := make([]exactSeries, 0, len(e.series))
	for _, s := range e.series {
		all = append(all, exactSeries{lset: s.lset, samples: s.samples})
	}
	return &storage.MockQuerier{SelectMockFunction: func(_ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
		var sel []storage.Series
		for _, s := range all {
			if !matchAll(ms, s.lset) {
				continue
			}
			lo, _ := slices.BinarySearchFunc(s.samples, mint, func(x chunks.Sample, t int64) int { return cmp.Compare(x.T(), t) })
			hi, _ := slices.BinarySearchFunc(s.samples, maxt+1, func(x chunks.Sample, t int64) int { return cmp.Compare(x.T(), t) })
			sel = append(sel, storage.NewListSeries(s.lset, s.samples[lo:hi]))
		}
		slices.SortFunc(sel, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
		return &sliceSet{series: sel, i: -1}
	}}, nil
}

func matchAll(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

type sliceSet struct {
	series []storage.Series
	i      int
}

func (s *sliceSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSet) Err() error                        { return nil }
func (s *sliceSet) Warnings() annotations.Annotations { return nil }

// mergedStore reads inputs from in and rule outputs from out, where it
// writes them.
type mergedStore struct {
	in  storage.Queryable
	out Storage
}

func (s mergedStore) Append(lset labels.Labels, t int64, v float64) bool {
	return s.out.Append(lset, t, v)
}

func (s mergedStore) Querier(mint, maxt int64) (storage.Querier, error) {
	a, err := s.in.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	b, err := s.out.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return storage.NewMergeQuerier([]storage.Querier{a, b}, nil, storage.ChainedSeriesMerge), nil
}

// equivServer is one simulated server of the equivalence test.
type equivServer struct {
	name, pool, role string
	// counters are the current values of the five counters of the rates.
	counters [5]float64
	// resetAt resets every counter to 0 once (0: never).
	resetAt time.Duration
	// stopAt is when the server disappears (0: never).
	stopAt time.Duration
	usage  func(sec float64, rnd *rand.Rand) float64
}

var equivCounters = []signal.Metric{signal.PrefixCacheHitTokens, signal.PrefixCacheQueryTokens,
	signal.Preemptions, signal.PromptTokens, signal.GenerationTokens}

// families is one gather of every live server at elapsed.
func families(servers []*equivServer, elapsed time.Duration, rnd *rand.Rand) []*dto.MetricFamily {
	fams := map[string]*dto.MetricFamily{}
	add := func(name string, typ dto.MetricType, s *equivServer, v float64) {
		mf := fams[name]
		if mf == nil {
			mf = &dto.MetricFamily{Name: proto.String(name), Type: typ.Enum()}
			fams[name] = mf
		}
		m := &dto.Metric{Label: []*dto.LabelPair{
			{Name: proto.String(signal.LabelServer), Value: proto.String(s.name)},
			{Name: proto.String(signal.LabelPool), Value: proto.String(s.pool)},
			{Name: proto.String(signal.LabelRole), Value: proto.String(s.role)},
			{Name: proto.String(signal.LabelCluster), Value: proto.String("c1")},
		}}
		if typ == dto.MetricType_COUNTER {
			m.Counter = &dto.Counter{Value: proto.Float64(v)}
		} else {
			m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
		}
		mf.Metric = append(mf.Metric, m)
	}
	for _, s := range servers {
		if s.stopAt > 0 && elapsed >= s.stopAt {
			continue
		}
		for i, m := range equivCounters {
			if s.resetAt > 0 && elapsed == s.resetAt {
				s.counters[i] = 0
			}
			// Random whole-token increments, 0 to 5,000 per 5s.
			s.counters[i] += float64(rnd.IntN(5001))
			add(m.Name, dto.MetricType_COUNTER, s, s.counters[i])
		}
		add(signal.KVUsageRatio.Name, dto.MetricType_GAUGE, s, s.usage(elapsed.Seconds(), rnd))
	}
	var out []*dto.MetricFamily
	for _, mf := range fams {
		out = append(out, mf)
	}
	return out
}

// TestOnDemandEqualsStored runs the stack's recording rules twice over the
// same hour of 5s gathers of four servers (one with a counter reset, one
// that stops): the old way (StoreAllRules: every rule evaluated every 15s
// and recorded) and the new one (server rules on demand). Once a minute
// after the first 15 minutes, each server rule queried through
// the expansion must equal what the old path recorded, series by series,
// and so must the pool, cluster and fleet aggregates both paths store.
func TestOnDemandEqualsStored(t *testing.T) {
	const capacity = 2581504
	rnd := rand.New(rand.NewPCG(1, 2))
	used := 0.0
	servers := []*equivServer{
		{name: "d1", pool: "p1", role: "decode", usage: func(sec float64, _ *rand.Rand) float64 { return 0.1 + sec/7200 }},
		{name: "d2", pool: "p1", role: "decode", resetAt: 30 * time.Minute,
			usage: func(sec float64, _ *rand.Rand) float64 { return 0.5 + 0.3*math.Sin(sec/600) }},
		{name: "d3", pool: "p2", role: "decode", stopAt: 40 * time.Minute, usage: func(_ float64, r *rand.Rand) float64 {
			used = min(max(used+float64(r.IntN(20001)-9000), 0), capacity)
			return used / capacity
		}},
		{name: "p1", pool: "p2", role: "prefill", usage: func(float64, *rand.Rand) float64 { return 0.25 }},
	}
	in := history.New(history.Options{Retention: 2 * time.Hour, Interval: 5 * time.Second})
	oldOut, newOut := &exactStore{}, &exactStore{}
	groups := stack.RecordingRules(stack.Options{}).Groups
	old, err := New(Options{Groups: groups, Storage: mergedStore{in, oldOut}, StoreAllRules: true})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := New(Options{Groups: groups, Storage: mergedStore{in, newOut}})
	if err != nil {
		t.Fatal(err)
	}
	var onDemand, stored []string
	for _, g := range cur.Groups() {
		for _, r := range g.Rules {
			q, err := cur.Expand(r.Query)
			switch {
			case err != nil:
				t.Fatal(err)
			case r.OnDemand:
				onDemand = append(onDemand, r.Name)
			case q != r.Query: // a stored rule over on-demand ones
				stored = append(stored, r.Name)
			}
		}
	}
	want := []string{"server:kvwatch_prefix_cache_hit_tokens:rate5m", "server:kvwatch_prefix_cache_query_tokens:rate5m",
		"server:kvwatch_preemptions:rate5m", "server:kvwatch_prompt_tokens:rate5m", "server:kvwatch_generation_tokens:rate5m",
		stack.RecHitRatio("server"), stack.RecTimeToFull}
	if !slices.Equal(onDemand, want) {
		t.Fatalf("on-demand rules = %v, want the kvwatch-server group %v", onDemand, want)
	}

	engine := testEngine()
	instant := instantQuerier(t, engine)
	ctx := context.Background()
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	compared := map[string]int{}
	for elapsed := time.Duration(0); elapsed <= time.Hour; elapsed += 5 * time.Second {
		ts := start.Add(elapsed)
		in.AppendFamilies(ts, families(servers, elapsed, rnd))
		if elapsed%(15*time.Second) != 0 {
			continue
		}
		old.EvalAt(ctx, ts)
		cur.EvalAt(ctx, ts)
		if elapsed < 15*time.Minute || elapsed%time.Minute != 0 {
			// deriv15m needs 15 minutes of usage; instant queries once a
			// minute (the range queries below check every evaluation).
			continue
		}
		for _, name := range append(slices.Clone(onDemand), stored...) {
			q, err := cur.Expand(name)
			if err != nil {
				t.Fatal(err)
			}
			got := instant(mergedStore{in, newOut}, q, ts)
			exp := instant(mergedStore{in, oldOut}, name, ts)
			if !sameVector(got, exp) {
				t.Fatalf("%s at %v:\n on demand %v\n stored    %v", name, elapsed, got, exp)
			}
			compared[name] += len(got)
		}
	}
	for _, name := range append(onDemand, stored...) {
		if compared[name] == 0 && name != "server:kvwatch_kv_seconds_to_full:deriv15m" {
			t.Errorf("%s: no sample compared; the fixture does not exercise it", name)
		}
	}
	t.Logf("samples compared per rule: %v", compared)
	// d1 fills at 0.5/h: 1800s from 0.1+3600/7200 = 0.6 → (1-0.6)/(1/7200) = 2880s
	// at the end, give or take the 21-bit rounding of the stored ratio.
	if compared[stack.RecTimeToFull] == 0 {
		t.Errorf("%s: no sample compared", stack.RecTimeToFull)
	}
	v := instant(mergedStore{in, newOut}, mustExpand(t, cur, stack.RecTimeToFull+`{server="d1"}`), start.Add(time.Hour))
	if len(v) != 1 || math.Abs(v[0].F-2880) > 0.01 {
		t.Errorf("%s{server=\"d1\"} at 1h = %v, want 2880 (s)", stack.RecTimeToFull, v)
	}
	// A range query over the hour (at the evaluation times) and a range
	// selector (a subquery on demand) agree too.
	for _, name := range onDemand {
		for _, pair := range [][2]string{{name, name}, {"max_over_time(" + name + "[5m])", "max_over_time(" + name + "[5m])"}} {
			q := mustExpand(t, cur, pair[0])
			got := rangeQuery(t, engine, mergedStore{in, newOut}, q, start.Add(15*time.Minute), start.Add(time.Hour))
			exp := rangeQuery(t, engine, mergedStore{in, oldOut}, pair[1], start.Add(15*time.Minute), start.Add(time.Hour))
			if !sameMatrix(got, exp) {
				t.Errorf("range %s: on demand and stored differ:\n%v\n%v", pair[0], got, exp)
			}
		}
	}
	// Nothing of the on-demand rules is stored.
	for _, s := range newOut.series {
		if n := s.lset.Get(model.MetricNameLabel); slices.Contains(onDemand, n) {
			t.Fatalf("on-demand rule %s was stored: %v", n, s.lset)
		}
	}
}

func mustExpand(t *testing.T, m *Manager, q string) string {
	t.Helper()
	s, err := m.Expand(q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rangeQuery(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, start, end time.Time) promql.Matrix {
	t.Helper()
	qry, err := engine.NewRangeQuery(context.Background(), q, nil, expr, start, end, 15*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	m, _ := res.Matrix()
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
	}
	return out
}

// close reports whether a and b agree within 1e-9 relative.
func closeTo(a, b float64) bool {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

func sameVector(a, b promql.Vector) bool {
	if len(a) != len(b) {
		return false
	}
	slices.SortFunc(a, func(x, y promql.Sample) int { return labels.Compare(x.Metric, y.Metric) })
	slices.SortFunc(b, func(x, y promql.Sample) int { return labels.Compare(x.Metric, y.Metric) })
	for i := range a {
		if !labels.Equal(a[i].Metric, b[i].Metric) || a[i].T != b[i].T || !closeTo(a[i].F, b[i].F) || value.IsStaleNaN(a[i].F) {
			return false
		}
	}
	return true
}

func sameMatrix(a, b promql.Matrix) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !labels.Equal(a[i].Metric, b[i].Metric) || len(a[i].Floats) != len(b[i].Floats) {
			return false
		}
		for j := range a[i].Floats {
			if a[i].Floats[j].T != b[i].Floats[j].T || !closeTo(a[i].Floats[j].F, b[i].Floats[j].F) {
				return false
			}
		}
	}
	return true
}

// testEngine is the PromQL engine the equivalence tests query with.
func testEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

// instantQuerier returns a function that runs an instant query over a
// store, failing t on any error, and returns the vector sorted by labels
// (a copy: the engine reuses its own once the query is closed).
func instantQuerier(t *testing.T, engine *promql.Engine) func(q storage.Queryable, expr string, ts time.Time) promql.Vector {
	ctx := context.Background()
	return func(q storage.Queryable, expr string, ts time.Time) promql.Vector {
		t.Helper()
		qry, err := engine.NewInstantQuery(ctx, q, nil, expr, ts)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			t.Fatalf("%s: %v", expr, res.Err)
		}
		v, _ := res.Vector()
		v = slices.Clone(v)
		slices.SortFunc(v, func(x, y promql.Sample) int { return labels.Compare(x.Metric, y.Metric) })
		return v
	}
}
