package history

import (
	"context"
	"slices"
	"sort"
	"sync"
	"unsafe"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/kvwatch/kvwatch/internal/freelist"
)

// Querier implements storage.Queryable: mint and maxt are inclusive bounds
// in milliseconds.
func (s *Store) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{s: s, mint: mint, maxt: maxt}, nil
}

type querier struct {
	s          *Store
	mint, maxt int64

	// held are the arrays of the series Select returned, handed back to
	// selectFree by Close: the rules select thousands of series at each
	// evaluation, and these arrays were a tenth of what serve allocated.
	// What callers keep after Close (label sets, values) does not point
	// into them.
	mu   sync.Mutex
	held []*selectArrays
}

// selectArrays back one Select's series.
type selectArrays struct {
	backing []series
	out     []*series
}

// selectFree keeps the arrays of closed queriers for the next Selects. A
// sync.Pool would not do: the rules evaluate every 15 s and the garbage
// collector runs every few seconds at 2,000 targets, so a pool was empty
// at every evaluation (57 MB of the 1.28 GB serve allocated in 110 s).
// 8 MiB hold the arrays of the queries in flight at once at a few
// thousand targets (2,000 series are 176 KB).
var selectFree = freelist.List[*selectArrays]{Budget: 8 << 20, Size: (*selectArrays).size}

// size is the bytes of arr's two arrays.
func (arr *selectArrays) size() int {
	return cap(arr.backing)*int(unsafe.Sizeof(series{})) + cap(arr.out)*int(unsafe.Sizeof((*series)(nil)))
}

// maxPooledSeries is the most series a pooled array keeps room for.
const maxPooledSeries = 1 << 17

// match returns the series matching every matcher that hold data in
// [mint, maxt], with their chunks, in no particular order.
func (q *querier) match(mint, maxt int64, ms []*labels.Matcher, withChunks bool) []*series {
	return q.matchLatest(mint, maxt, ms, withChunks, false)
}

// matchLatest is match; with latest (an instant selector: see Select) a
// series whose newest sample is at or before maxt yields that sample alone,
// with no chunk copied: the newest sample at or before the evaluation time
// is all an instant selector reads.
func (q *querier) matchLatest(mint, maxt int64, ms []*labels.Matcher, withChunks, latest bool) []*series {
	s := q.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	var cands []*memSeries
	named := false
	for _, m := range ms {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			cands = s.byName[m.Value]
			named = true
			break
		}
	}
	if !named {
		for _, list := range s.series {
			cands = append(cands, list...)
		}
	}
	// One array for the series and one for the pointers, not one
	// allocation per series: an instant selector over a fleet matches
	// thousands. A Select's arrays come from selectFree and go back when
	// its querier is closed.
	arr := q.arrays(len(cands))
	backing, out := arr.backing, arr.out
	defer func() { arr.backing, arr.out = backing, out }()
	add := func(x series) {
		backing = append(backing, x) // within its capacity: pointers stay valid
		out = append(out, &backing[len(backing)-1])
	}
	for _, x := range cands {
		if !matches(x.lset, ms) || x.lastT < mint {
			continue
		}
		if latest && x.lastOK && x.lastT <= maxt {
			add(series{lset: x.lset, one: true, t: x.lastT, v: x.lastV})
			continue
		}
		var chunks []chunk
		if withChunks {
			chunks = x.view(mint, maxt)
			if len(chunks) == 0 {
				continue
			}
		} else if !x.overlaps(mint, maxt) {
			continue
		}
		add(series{lset: x.lset, chunks: chunks})
	}
	return out
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// Select implements storage.Querier.
func (q *querier) Select(_ context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	withChunks := hints == nil || hints.Func != "series"
	// An instant selector (no range, no step: PromQL's instant query, not a
	// range query or subquery) reads the newest sample at or before its
	// time and nothing else.
	latest := withChunks && hints != nil && hints.Step == 0 && hints.Range == 0
	out := q.matchLatest(mint, maxt, ms, withChunks, latest)
	if sortSeries {
		sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	}
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return &seriesSet{list: out, i: -1}
}

// LabelValues implements storage.LabelQuerier.
func (q *querier) LabelValues(_ context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, x := range q.match(q.mint, q.maxt, ms, false) {
		if v := x.lset.Get(name); v != "" {
			seen[v] = true
		}
	}
	return limit(seen, hints), nil, nil
}

// LabelNames implements storage.LabelQuerier.
func (q *querier) LabelNames(_ context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	seen := map[string]bool{}
	for _, x := range q.match(q.mint, q.maxt, ms, false) {
		x.lset.Range(func(l labels.Label) { seen[l.Name] = true })
	}
	return limit(seen, hints), nil, nil
}

func limit(set map[string]bool, hints *storage.LabelHints) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out
}

// arrays returns empty arrays with room for n series, held until Close.
func (q *querier) arrays(n int) *selectArrays {
	arr, ok := selectFree.Get()
	if !ok || cap(arr.backing) < n {
		arr = &selectArrays{backing: make([]series, 0, n), out: make([]*series, 0, n)}
	}
	q.mu.Lock()
	q.held = append(q.held, arr)
	q.mu.Unlock()
	return arr
}

// Close implements storage.LabelQuerier: the series its Selects returned
// must not be used after it.
func (q *querier) Close() error {
	q.mu.Lock()
	held := q.held
	q.held = nil
	q.mu.Unlock()
	for _, arr := range held {
		if cap(arr.backing) > maxPooledSeries {
			continue
		}
		// What lies beyond their lengths was cleared when they last came
		// back, or never used.
		clear(arr.backing)
		clear(arr.out)
		arr.backing, arr.out = arr.backing[:0], arr.out[:0]
		selectFree.Put(arr)
	}
	return nil
}

// series is a storage.Series over a private view of chunks, or (one) a
// single sample.
type series struct {
	lset   labels.Labels
	chunks []chunk
	one    bool
	t      int64
	v      float64
}

// Labels implements storage.Series.
func (s *series) Labels() labels.Labels { return s.lset }

// Iterator implements storage.Series. It walks the chunks overlapping the
// queried range, so it may yield a few samples just outside it; the promql
// engine filters by time itself.
func (s *series) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if s.one {
		l := (*oneSample)(s)
		if r, ok := it.(interface{ Reset(storage.Samples) }); ok {
			r.Reset(l)
			return it
		}
		return storage.NewListSeriesIterator(l)
	}
	if len(s.chunks) == 1 {
		return s.chunks[0].Iterator(it)
	}
	its := make([]chunkenc.Iterable, len(s.chunks))
	for i, c := range s.chunks {
		its[i] = c
	}
	return storage.ChainSampleIteratorFromIterables(it, its)
}

type seriesSet struct {
	list []*series
	i    int
}

func (ss *seriesSet) Next() bool                        { ss.i++; return ss.i < len(ss.list) }
func (ss *seriesSet) At() storage.Series                { return ss.list[ss.i] }
func (ss *seriesSet) Err() error                        { return nil }
func (ss *seriesSet) Warnings() annotations.Annotations { return nil }

// oneSample is a one-sample series (one) as a list of one sample for a
// list iterator (Prometheus' own: its Seek semantics, not a copy of them),
// and (*sampleOf) as that sample: views of the series itself, so that an
// instant selector's iterator allocates nothing per series (two boxed
// values per series were 2.1 M of serve's 9.7 M allocations in 110 s).
type oneSample series

func (o *oneSample) Get(int) chunks.Sample { return (*sampleOf)(o) }
func (o *oneSample) Len() int              { return 1 }

// sampleOf is the sample of a oneSample.
type sampleOf series

func (f *sampleOf) T() int64                      { return f.t }
func (f *sampleOf) ST() int64                     { return 0 }
func (f *sampleOf) F() float64                    { return f.v }
func (f *sampleOf) H() *histogram.Histogram       { return nil }
func (f *sampleOf) FH() *histogram.FloatHistogram { return nil }
func (f *sampleOf) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (f *sampleOf) Copy() chunks.Sample           { return &sampleOf{t: f.t, v: f.v} }
