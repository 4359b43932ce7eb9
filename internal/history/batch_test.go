package history

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// call is one Batch.Add.
type call struct {
	name    string
	counter bool
	v       float64
	pairs   []string
}

// record makes the calls as one gather at t.
func record(st *Store, t time.Time, calls []call) {
	b := st.Begin(t)
	for _, c := range calls {
		// Fresh strings, as a new scrape's would be: equal, not the same
		// memory.
		pairs := make([]string, len(c.pairs))
		for i, p := range c.pairs {
			pairs[i] = strings.Clone(p)
		}
		b.Add(strings.Clone(c.name), c.counter, c.v, pairs...)
	}
	b.Commit()
}

// storedSeries is what a store holds of one series.
type storedSeries struct {
	Labels  string
	Counter bool
	Gen     uint32
	Samples [][2]uint64 // time, value bits
}

// stored returns everything the store holds, in label order.
func stored(st *Store) ([]storedSeries, int64) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []storedSeries
	for _, ms := range st.sortedSeriesLocked() {
		ss := storedSeries{Labels: ms.lset.String(), Counter: ms.counter, Gen: ms.gen}
		for _, c := range ms.view(math.MinInt64, math.MaxInt64) {
			it := c.Iterator(nil)
			for it.Next() == chunkenc.ValFloat {
				t, v := it.At()
				ss.Samples = append(ss.Samples, [2]uint64{uint64(t), math.Float64bits(v)})
			}
		}
		out = append(out, ss)
	}
	return out, st.dropped
}

// twoStores returns a store and one that looks every call's series up
// and sweeps every series (as a store did before Store.recent and
// Store.sweep).
func twoStores() (fast, slow *Store) {
	return twoStoresOf(Options{Retention: 10 * time.Minute, FullResolution: 2 * time.Minute, DownsampleStep: 30 * time.Second, Interval: 5 * time.Second})
}

func twoStoresOf(opts Options) (fast, slow *Store) {
	fast, slow = New(opts), New(opts)
	slow.noRecent, slow.sweepAll = true, true
	return fast, slow
}

// sameStores fails the test when fast and slow hold different series or
// samples, or different snapshots (which hold the downsampler's state and
// the chunks as they are cut too).
func sameStores(t *testing.T, step string, fast, slow *Store) {
	t.Helper()
	got, gotDropped := stored(fast)
	want, wantDropped := stored(slow)
	if !reflect.DeepEqual(got, want) {
		d := cmp.Diff(want, got)
		t.Fatalf("%s: the store differs from the one that looks every series up (-lookup +store):\n%s", step, d)
	}
	if gotDropped != wantDropped {
		t.Fatalf("%s: %d samples dropped, the lookup store %d", step, gotDropped, wantDropped)
	}
	if g, w := snapshotOf(t, fast), snapshotOf(t, slow); !bytes.Equal(g, w) {
		t.Fatalf("%s: the snapshots differ (%d and %d bytes)", step, len(g), len(w))
	}
}

func snapshotOf(t *testing.T, st *Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := st.writeSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// base is a gather of three servers, 4 series each.
func base() []call {
	var calls []call
	for _, srv := range []string{"a", "b", "c"} {
		id := []string{"server", srv, "role", "decode", "cluster", "", "pool", "p1"}
		calls = append(calls,
			call{"kvwatch_target_up", false, 1, id},
			call{"kvwatch_kv_used_tokens", false, 100, id},
			call{"kvwatch_requests_queued", false, 3, append(slices.Clone(id), "queue", "waiting")},
			call{"kvwatch_prompt_tokens_total", true, 10, id},
		)
	}
	return calls
}

// Every kind of change from one gather to the next stores exactly what
// looking every series up does.
func TestBatchReusesSeriesLikeLookup(t *testing.T) {
	with := func(f func(c []call) []call) func() []call { return func() []call { return f(base()) } }
	set := func(i int, pairs ...string) func() []call {
		return with(func(c []call) []call { c[i].pairs = pairs; return c })
	}
	steps := []struct {
		name  string
		calls func() []call
	}{
		{"first", base},
		{"same again", base},
		{"same again", base},
		{"order changes", with(func(c []call) []call { c[1], c[6] = c[6], c[1]; slices.Reverse(c[8:]); return c })},
		{"back", base},
		{"series inserted in the middle", with(func(c []call) []call {
			return slices.Insert(c, 5, call{"kvwatch_kv_capacity_tokens", false, 1000, []string{"server", "b", "role", "decode"}})
		})},
		{"series removed in the middle", with(func(c []call) []call { return slices.Delete(c, 4, 8) })},
		{"back", base},
		{"a label value changes", set(2, "server", "a", "role", "decode", "cluster", "", "pool", "p1", "queue", "prealloc")},
		{"an empty value becomes set", set(1, "server", "a", "role", "decode", "cluster", "c1", "pool", "p1")},
		{"and empty again", base},
		{"a label becomes empty", set(1, "server", "a", "role", "", "cluster", "", "pool", "p1")},
		{"a label is missing instead of empty", set(1, "server", "a", "cluster", "", "pool", "p1")},
		{"a label more", set(1, "server", "a", "role", "decode", "cluster", "", "pool", "p1", "x", "1")},
		{"a label less", set(1, "server", "a", "role", "decode", "pool", "p1")},
		{"the name changes", with(func(c []call) []call { c[1].name = "kvwatch_kv_evictable_tokens"; return c })},
		{"the counter flag changes", with(func(c []call) []call { c[0].counter = true; return c })},
		{"label names swap their values", set(1, "server", "decode", "role", "a", "cluster", "", "pool", "p1")},
		{"back", base},
		{"a label name twice", set(1, "server", "a", "server", "a", "role", "decode", "cluster", "", "pool", "p1")},
		{"twice again", set(1, "server", "a", "server", "a", "role", "decode", "pool", "p1")},
		{"a label name twice, values differ", set(1, "server", "a", "server", "b", "role", "decode", "pool", "p1")},
		{"the two values swap", set(1, "server", "b", "server", "a", "role", "decode", "pool", "p1")},
		{"a label name twice in place of another", set(1, "server", "a", "role", "decode", "role", "decode", "pool", "p1")},
		{"a __name__ pair", set(1, "server", "a", "__name__", "other", "role", "decode", "pool", "p1")},
		{"back", base},
		{"the name in a pair, another as the name", with(func(c []call) []call {
			c[1].pairs = append([]string{"__name__", c[1].name}, c[1].pairs...)
			c[1].name = "other"
			return c
		})},
		{"an odd pair out", set(1, "server", "a", "role", "decode", "cluster", "", "pool", "p1", "dangling")},
		{"an empty label name", set(1, "server", "a", "", "x", "role", "decode", "pool", "p1")},
		{"one series twice", with(func(c []call) []call { return slices.Insert(c, 2, c[1]) })},
		{"empty gather", func() []call { return nil }},
		{"back", base},
		{"many labels", set(1, manyPairs(70)...)},
		{"many labels again", set(1, manyPairs(70)...)},
		{"the last of many labels changes", set(1, append(manyPairs(70)[:len(manyPairs(70))-1], "w")...)},
		{"many labels again", set(1, manyPairs(70)...)},
		{"the last of many labels is missing", set(1, manyPairs(69)...)},
		{"back", base},
	}
	fast, slow := twoStores()
	t1 := t0
	for _, s := range steps {
		t1 = t1.Add(5 * time.Second)
		calls := s.calls()
		record(fast, t1, calls)
		record(slow, t1, calls)
		sameStores(t, s.name, fast, slow)
	}
	if fast.reused == 0 {
		t.Error("no call reused a series")
	}
}

func manyPairs(n int) []string {
	pairs := []string{"server", "a", "role", "decode"}
	for i := range n {
		pairs = append(pairs, "l"+strconv.Itoa(i), "v")
	}
	return pairs
}

// gatheredThenExpired records three gathers of base() into both stores and
// truncates them an hour later, when every sample is older than the
// window; it returns the stores and that time.
func gatheredThenExpired() (fast, slow *Store, t1 time.Time) {
	fast, slow = twoStores()
	t1 = t0
	for range 3 {
		t1 = t1.Add(5 * time.Second)
		record(fast, t1, base())
		record(slow, t1, base())
	}
	t1 = t1.Add(time.Hour)
	fast.Truncate(t1)
	slow.Truncate(t1)
	return fast, slow, t1
}

// A series that left the store (its samples left the window) while the
// previous gather's calls still name it is created again and gets the
// sample.
func TestBatchRecreatesRemovedSeries(t *testing.T) {
	fast, slow, t1 := gatheredThenExpired()
	if n := fast.Stats().Series; n != 0 {
		t.Fatalf("%d series left after the window passed", n)
	}
	for i := range 3 {
		t1 = t1.Add(5 * time.Second)
		record(fast, t1, base())
		record(slow, t1, base())
		sameStores(t, fmt.Sprintf("gather %d after the series left", i+1), fast, slow)
	}
	if n := fast.Stats().Series; n != len(base()) {
		t.Errorf("%d series, want %d", n, len(base()))
	}
}

// A series that left the store while the previous gather had it, and is
// missing from the next gather, gets no staleness marker: it is not in the
// store.
func TestBatchRemovedSeriesGetNoMarker(t *testing.T) {
	fast, slow, t1 := gatheredThenExpired()
	gone := slices.Clone(fast.recent)
	for i := range 3 {
		t1 = t1.Add(5 * time.Second)
		record(fast, t1, base()[:2])
		record(slow, t1, base()[:2])
		sameStores(t, fmt.Sprintf("gather %d after the series left", i+1), fast, slow)
	}
	for _, ms := range gone {
		if !ms.removed || ms.lastT >= t1.Add(-time.Minute).UnixMilli() {
			t.Errorf("%s: removed %v, last sample at %d: a series no longer in the store got samples", ms.lset, ms.removed, ms.lastT)
		}
	}
}

// Gathers that lose servers, gain them, reorder them and change their
// labels at random, some with pauses longer than the window (the stale
// series leave the store), store what looking every series up does.
func TestBatchRandomGathers(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	fast, slow := twoStores()
	servers := []string{"a", "b", "c", "d", "e", "f"}
	t1 := t0
	for g := range 1000 {
		var calls []call
		for _, srv := range servers {
			if r.IntN(10) == 0 {
				continue // down this time
			}
			cluster := ""
			if r.IntN(20) == 0 {
				cluster = "c" + strconv.Itoa(r.IntN(2))
			}
			id := []string{"server", srv, "role", "decode", "cluster", cluster, "pool", "p1"}
			for _, q := range []string{"waiting", "prealloc"} {
				if r.IntN(30) != 0 {
					calls = append(calls, call{"kvwatch_requests_queued", false, float64(r.IntN(5)), append(slices.Clone(id), "queue", q)})
				}
			}
			calls = append(calls, call{"kvwatch_kv_used_tokens", false, float64(r.IntN(1000)), id},
				call{"kvwatch_prompt_tokens_total", true, float64(g), id})
		}
		if r.IntN(20) == 0 {
			r.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		}
		step := 5 * time.Second
		if r.IntN(100) == 0 {
			step = 20 * time.Minute // beyond the window: everything not gathered now leaves
		}
		t1 = t1.Add(step)
		record(fast, t1, calls)
		record(slow, t1, calls)
		sameStores(t, fmt.Sprintf("gather %d", g), fast, slow)
		if r.IntN(50) == 0 {
			t1 = t1.Add(time.Hour)
			fast.Truncate(t1)
			slow.Truncate(t1)
		}
	}
	if fast.reused == 0 {
		t.Error("no call reused a series")
	}
}

// A gather the same as the one before it looks no series up.
func TestBatchSteadyGatherReusesAll(t *testing.T) {
	st := New(Options{Retention: time.Hour})
	record(st, t0, base())
	record(st, t0.Add(5*time.Second), base())
	if st.reused != uint64(len(base())) {
		t.Errorf("%d of %d calls reused their series", st.reused, len(base()))
	}
}

// Sweeps that skip the series they would not change (Store.sweep) leave
// exactly what sweeps of every series leave, with and without
// downsampling: servers go idle for longer than the full-resolution
// window or the whole window and come back, recording rules append to
// series of their own, chunks fill, the store is truncated, snapshotted
// and restored, gathers pause.
func TestSweepSkipsOnlySeriesItWouldNotChange(t *testing.T) {
	for i, opts := range []Options{
		{Retention: 10 * time.Minute, FullResolution: 2 * time.Minute, DownsampleStep: 30 * time.Second},
		{Retention: 30 * time.Minute, FullResolution: 3 * time.Minute, DownsampleStep: 5 * time.Second},
		{Retention: 30 * time.Minute, FullResolution: 40 * time.Minute},
		{Retention: 20 * time.Minute, FullResolution: 10 * time.Minute, DownsampleStep: time.Minute},
		{Retention: 10 * time.Minute, FullResolution: 9 * time.Minute, DownsampleStep: time.Minute},
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			opts.Interval = 5 * time.Second
			sweepScenario(t, opts, uint64(i))
		})
	}
}

func sweepScenario(t *testing.T, opts Options, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	fast, slow := twoStoresOf(opts)
	servers := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	// idleUntil[i] is the gather server i comes back at.
	idleUntil := make([]int, len(servers))
	downsampled := false
	t1 := t0
	for g := range 1500 {
		var calls []call
		for i, srv := range servers {
			if g < idleUntil[i] {
				continue
			}
			if r.IntN(200) == 0 {
				// Idle for up to twice the window.
				idleUntil[i] = g + 1 + r.IntN(int(2*opts.Retention/opts.Interval))
				continue
			}
			id := []string{"server", srv, "role", "decode"}
			calls = append(calls,
				call{"kvwatch_kv_used_tokens", false, float64(r.IntN(1000)), id},
				call{"kvwatch_kv_usage_ratio", false, r.Float64(), id},
				call{"kvwatch_prompt_tokens_total", true, float64(g - r.IntN(2)*g/2), id})
			if r.IntN(300) == 0 {
				calls = append(calls, calls[len(calls)-1]) // one series twice
			}
		}
		step := opts.Interval + time.Duration(r.IntN(40))*time.Millisecond
		if r.IntN(300) == 0 {
			step = time.Duration(r.IntN(int(opts.Retention/time.Second))) * time.Second // a pause
		}
		t1 = t1.Add(step)
		record(fast, t1, calls)
		record(slow, t1, calls)
		// A recording rule's series, some of the time, at times of its
		// own (now and then ahead of the next gathers).
		if r.IntN(3) == 0 {
			at := t1.UnixMilli() - 1
			if r.IntN(20) == 0 {
				at += int64(r.IntN(4)) * opts.Interval.Milliseconds()
			}
			for _, st := range []*Store{fast, slow} {
				st.Append(labels.FromStrings("__name__", "pool:kvwatch_kv_used_tokens:sum", "pool", strconv.Itoa(g/400)), at, float64(g))
			}
		}
		switch r.IntN(100) {
		case 0:
			later := t1.Add(time.Duration(r.IntN(int(opts.Retention/time.Second))) * time.Second)
			fast.Truncate(later)
			slow.Truncate(later)
		case 1:
			// Restart: each store from its own snapshot.
			mint := t1.Add(-opts.Retention).UnixMilli()
			fast, slow = restored(t, fast, opts, mint), restored(t, slow, opts, mint)
			slow.noRecent, slow.sweepAll = true, true
		}
		sameStores(t, fmt.Sprintf("gather %d", g), fast, slow)
		downsampled = downsampled || fast.Stats().CoarseSamples > 0
	}
	st := fast.Stats()
	if !downsampled && fast.downsamples() {
		t.Error("nothing was downsampled")
	}
	t.Logf("%d series, %d raw and %d coarse samples at the end", st.Series, st.RawSamples, st.CoarseSamples)
}

func restored(t *testing.T, st *Store, opts Options, mint int64) *Store {
	t.Helper()
	b := snapshotOf(t, st)
	out := New(opts)
	if _, err := out.restore(bytes.NewReader(b), int64(len(b)), mint); err != nil {
		t.Fatal(err)
	}
	return out
}
