package history

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// TestInstantSelectorReadsLatest: an instant selector reads each series'
// newest sample alone (no chunk copied); it must answer what the chunk
// path answers. A one-step range query goes the chunk path (its selectors
// have a step), so the two are compared at every instant: after each
// append, between appends, before the newest sample (the past), after a
// staleness marker, past the lookback, and after a restore from a
// snapshot (whole chunks: the newest value is unknown until the next
// append).
func TestInstantSelectorReadsLatest(t *testing.T) {
	for _, full := range []time.Duration{0, 2 * time.Minute} {
		t.Run("full resolution "+full.String(), func(t *testing.T) { testInstantSelectorReadsLatest(t, full) })
	}
}

// With a full resolution of 2 minutes, most of the 30 minutes are in the
// downsampled tier, and a restore sets a pending downsampled sample before
// the full-resolution chunks.
func testInstantSelectorReadsLatest(t *testing.T, full time.Duration) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "history.snap")
	opts := Options{Retention: time.Hour, SnapshotFile: snap, FullResolution: full, DownsampleStep: time.Minute}
	st := New(opts)
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "a")
	b := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "b")
	ratio := labels.FromStrings("__name__", "kvwatch_kv_usage_ratio", "server", "a") // stored rounded
	const n = 360                                                                    // 30 minutes: closed chunks, downsampled with a full resolution of 2m
	for i := 0; i <= n; i++ {
		ts := start.Add(time.Duration(i) * 5 * time.Second).UnixMilli()
		st.Append(a, ts, float64(100+i))
		st.Append(ratio, ts, 0.1+float64(i)/1000+1e-12*float64(i))
		if i < 60 {
			st.Append(b, ts, float64(1000-i))
		} else if i == 60 {
			st.Append(b, ts, math.Float64frombits(value.StaleNaN))
		}
	}
	end := start.Add(n * 5 * time.Second)
	queries := []string{
		`kvwatch_kv_used_tokens`,
		`sum(kvwatch_kv_used_tokens)`,
		`kvwatch_kv_usage_ratio`,
		`kvwatch_kv_used_tokens offset 1m`,
		`timestamp(kvwatch_kv_used_tokens)`,
	}
	instants := []time.Time{end, end.Add(2 * time.Second), end.Add(-2 * time.Second), end.Add(-301 * time.Second),
		start.Add(299 * time.Second), start.Add(302 * time.Second), end.Add(6 * time.Minute), start.Add(-time.Second)}
	compare := func(st *Store, label string) {
		t.Helper()
		for _, q := range queries {
			for _, ts := range instants {
				got := evalInstant(t, st, q, ts)
				want := evalOneStep(t, st, q, ts)
				if got != want {
					t.Errorf("%s: %s at %s: instant %s, one-step range %s", label, q, ts.Format(time.TimeOnly), got, want)
				}
			}
		}
	}
	compare(st, "appended")
	if err := st.WriteSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	re := New(opts)
	if err := re.Restore(end); err != nil {
		t.Fatal(err)
	}
	compare(re, "restored")
	re.Append(a, end.Add(5*time.Second).UnixMilli(), 7)
	instants = append(instants, end.Add(5*time.Second), end.Add(9*time.Second))
	compare(re, "restored, then appended")
	if got := instant(t, re, `kvwatch_kv_used_tokens`, end.Add(9*time.Second), "server"); len(got) != 1 || got["a"] != 7 {
		t.Errorf("the newest samples after a restore and an append: %v, want a=7 (b is stale)", got)
	}
}

func evalInstant(t *testing.T, st *Store, q string, ts time.Time) string {
	t.Helper()
	qry, err := engine().NewInstantQuery(context.Background(), st, nil, q, ts)
	return execQuery(t, q, qry, err).Value.String()
}

// evalOneStep runs q as a range query of one step at ts and returns it
// written as an instant vector.
func evalOneStep(t *testing.T, st *Store, q string, ts time.Time) string {
	t.Helper()
	qry, err := engine().NewRangeQuery(context.Background(), st, nil, q, ts, ts, time.Second)
	m, err := execQuery(t, q, qry, err).Matrix()
	if err != nil {
		t.Fatal(err)
	}
	var vec promql.Vector
	for _, s := range m {
		for _, p := range s.Floats {
			vec = append(vec, promql.Sample{Metric: s.Metric, T: p.T, F: p.F})
		}
	}
	return vec.String()
}

// execQuery runs a query made with error err, failing t on either error.
func execQuery(t *testing.T, q string, qry promql.Query, err error) *promql.Result {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	t.Cleanup(qry.Close)
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", q, res.Err)
	}
	return res
}

// TestSelectArraysHeldUntilClose: the series of a querier's Selects stay
// as they were while other queriers select and close (their arrays go back
// to a pool on Close and are reused by the next Select), and queries
// running side by side read what each would alone.
func TestSelectArraysHeldUntilClose(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	ts := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 50 {
		st.Append(labels.FromStrings("__name__", "a", "i", strconv.Itoa(i)), ts, float64(i))
		st.Append(labels.FromStrings("__name__", "b", "i", strconv.Itoa(i)), ts, float64(1000+i))
	}
	sel := func(q storage.Querier, name string) storage.SeriesSet {
		return q.Select(context.Background(), true, &storage.SelectHints{Start: ts, End: ts}, labels.MustNewMatcher(labels.MatchEqual, "__name__", name))
	}
	dump := func(ss storage.SeriesSet) []string {
		var out []string
		for ss.Next() {
			it := ss.At().Iterator(nil)
			for it.Next() != chunkenc.ValNone {
				_, v := it.At()
				out = append(out, fmt.Sprintf("%s=%g", ss.At().Labels(), v))
			}
		}
		return out
	}
	read := func(q storage.Querier, name string) []string { return dump(sel(q, name)) }
	held, _ := st.Querier(ts, ts)
	ss := sel(held, "a")
	want := read(must(st.Querier(ts, ts)), "a")
	for range 20 { // other queriers select b and close, reusing arrays
		q := must(st.Querier(ts, ts))
		if got := read(q, "b"); len(got) != 50 || got[0] != `{__name__="b", i="0"}=1000` {
			t.Fatalf("b read %d series, first %q", len(got), got[0])
		}
		q.Close()
	}
	if got := dump(ss); !slices.Equal(got, want) || len(got) != 50 {
		t.Errorf("a Select's series changed while other queriers closed:\n got %q\nwant %q", got, want)
	}
	held.Close()
	for i := 0; i < 20; i++ { // what closed queriers hand back serves later ones whole
		if got := read(must(st.Querier(ts, ts)), "a"); !slices.Equal(got, want) {
			t.Fatalf("after a close, a reads %q, want %q", got, want)
		}
	}
}

func must(q storage.Querier, err error) storage.Querier {
	if err != nil {
		panic(err)
	}
	return q
}

// TestInstantIteratorReuse: an instant selector's series are iterated by
// one reused list iterator without an allocation per series, and each
// yields its own newest sample, once.
func TestInstantIteratorReuse(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	ts := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	for i := range 100 {
		st.Append(labels.FromStrings("__name__", "a", "i", strconv.Itoa(i)), ts-5000, -1)
		st.Append(labels.FromStrings("__name__", "a", "i", strconv.Itoa(i)), ts, float64(i)+0.5)
	}
	q := must(st.Querier(ts, ts))
	defer q.Close()
	var list []storage.Series
	ss := q.Select(context.Background(), false, &storage.SelectHints{Start: ts, End: ts}, labels.MustNewMatcher(labels.MatchEqual, "__name__", "a"))
	for ss.Next() {
		list = append(list, ss.At())
	}
	if len(list) != 100 {
		t.Fatalf("selected %d series, want 100", len(list))
	}
	var it chunkenc.Iterator
	for _, s := range list {
		it = s.Iterator(it)
		want, _ := strconv.Atoi(s.Labels().Get("i"))
		if it.Next() != chunkenc.ValFloat {
			t.Fatalf("%s: no sample", s.Labels())
		}
		if gt, gv := it.At(); gt != ts || gv != float64(want)+0.5 {
			t.Errorf("%s: sample %d=%g, want %d=%g", s.Labels(), gt, gv, ts, float64(want)+0.5)
		}
		if it.Next() != chunkenc.ValNone {
			t.Errorf("%s: more than the newest sample", s.Labels())
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		it = list[i%len(list)].Iterator(it)
		it.Next()
		i++
	})
	if allocs != 0 {
		t.Errorf("an instant series' iterator allocates %.1f times when reused, want 0", allocs)
	}
}
