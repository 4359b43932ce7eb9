package history

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// waitOffHeap runs the garbage collector until OffHeapBytes is at most max
// (cleanups run after a collection, in their own goroutine).
func waitOffHeap(t *testing.T, max int64) int64 {
	t.Helper()
	var got int64
	for range 500 {
		runtime.GC()
		if got = OffHeapBytes(); got <= max {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	return got
}

// Closed chunks live outside the Go heap, and their slabs are returned
// once retention drops every chunk in them, while a query that read them
// before keeps correct values (it holds copies).
func TestSlabsFreedAfterRetention(t *testing.T) {
	if _, offHeap := allocSlab(1); !offHeap {
		t.Skip("no anonymous mappings on this system: slabs are on the Go heap")
	}
	base := waitOffHeap(t, 0) // slabs of earlier tests' stores
	const series, step = 600, int64(5000)
	st := New(Options{Retention: time.Hour, FullResolution: time.Hour, Interval: 5 * time.Second})
	lsets := make([]labels.Labels, series)
	for i := range lsets {
		lsets[i] = labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "s"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)))
	}
	// Two hours of samples: the first hour's chunks (3 per series) close
	// and are dropped by retention; the second hour's stay.
	end := int64(2 * 3600 * 1000)
	var peak int64
	for ts := int64(0); ts <= end; ts += step {
		for i, l := range lsets {
			st.Append(l, ts, float64(ts/step+int64(i)))
		}
		peak = max(peak, OffHeapBytes())
	}
	if peak-base < 2*slabSize {
		t.Fatalf("closed chunks took %d bytes outside the Go heap, want several slabs", peak-base)
	}

	// A query over the first hour, read after that hour is dropped.
	q, err := st.Querier(0, 3600*1000)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "server", "saaa"))
	if !ss.Next() {
		t.Fatal("no series saaa")
	}
	held := ss.At()

	// Retention drops everything: the last sample is older than the
	// window at end + 2h.
	st.Truncate(time.UnixMilli(end + 2*3600*1000 + 1))
	if n := st.Stats().Series; n != 0 {
		t.Fatalf("after retention the store holds %d series, want 0", n)
	}
	// What stays: the slab each arena is filling.
	current := base
	for _, b := range []*bump{&st.rawArena.closed, &st.rawArena.trimmed, &st.coarseArena.closed, &st.coarseArena.trimmed} {
		if b.cur != nil {
			current += int64(len(b.cur.mem))
		}
	}
	if got := waitOffHeap(t, current); got > current {
		t.Errorf("after retention %d bytes of slabs are still mapped, want %d (every chunk is gone but the arenas' current slabs)", got, current)
	}

	it := held.Iterator(nil)
	n := 0
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		if want := float64(ts / step); v != want {
			t.Fatalf("sample at %d = %v after its slab was freed, want %v", ts, v, want)
		}
		n++
	}
	if n < 720 {
		t.Errorf("read %d samples of the first hour, want at least 720", n)
	}
	runtime.KeepAlive(st)
}
