package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// waitOffHeap runs the garbage collector until st's OffHeapBytes is at
// most max (cleanups run after a collection, in their own goroutine).
func waitOffHeap(t *testing.T, st *Store, max int64) int64 {
	t.Helper()
	var got int64
	for range 500 {
		runtime.GC()
		if got = st.Stats().OffHeapBytes; got <= max {
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
	const series, step = 600, int64(5000)
	st := New(Options{Retention: time.Hour, FullResolution: time.Hour, Interval: 5 * time.Second})
	var base int64 // a store counts its own slabs only
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
		peak = max(peak, st.Stats().OffHeapBytes)
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
	if got := waitOffHeap(t, st, current); got > current {
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

// A restored store lays its chunks out in slabs by when they end, as a
// running store does, so that retention frees slabs as it drops chunks
// instead of each slab holding a day of a few series, pinned by their
// newest chunk.
func TestRestoredSlabsFreedByRetention(t *testing.T) {
	if _, offHeap := allocSlab(1); !offHeap {
		t.Skip("no anonymous mappings on this system: slabs are on the Go heap")
	}
	const series, step = 500, int64(60 * 1000)
	path := filepath.Join(t.TempDir(), "history.snap")
	opts := Options{Retention: 12 * time.Hour, FullResolution: 12 * time.Hour, Interval: time.Minute, SnapshotFile: path}
	end := int64(12 * 3600 * 1000) // 720 samples, 3 chunks a series
	func() {
		st := New(opts)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range series {
			l := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", fmt.Sprintf("s%03d", i))
			v := 0.0
			for ts := step; ts <= end; ts += step {
				v += float64(r.IntN(2000))
				st.Append(l, ts, v)
			}
		}
		if err := st.WriteSnapshot(path); err != nil {
			t.Fatal(err)
		}
	}()
	st := New(opts)
	if err := st.Restore(time.UnixMilli(end)); err != nil {
		t.Fatal(err)
	}
	var base int64 // the store written above is not counted here
	restored := st.Stats().OffHeapBytes - base
	if restored < 4*slabSize {
		t.Fatalf("restore mapped %d bytes, want several slabs", restored)
	}
	// Four hours later the oldest of the three chunks of every series is
	// out of the window.
	st.Truncate(time.UnixMilli(end + 4*3600*1000 + step))
	if got, want := st.Stats().Samples, series*(720-240); got != want {
		t.Fatalf("after retention the store holds %d samples, want %d", got, want)
	}
	kept := waitOffHeap(t, st, base+restored*3/4) - base
	if kept > restored*3/4 {
		t.Errorf("retention dropped a third of the chunks but %d of %d restored bytes stay mapped", kept, restored)
	}
	runtime.KeepAlive(st)
}

// Each Store counts its own slabs (before, one process-wide count was
// exported by every Store's collector).
func TestOffHeapBytesPerStore(t *testing.T) {
	if _, offHeap := allocSlab(1); !offHeap {
		t.Skip("no anonymous mappings on this system: slabs are on the Go heap")
	}
	a := New(Options{Retention: time.Hour, FullResolution: time.Hour, Interval: 5 * time.Second})
	b := New(Options{Retention: time.Hour, FullResolution: time.Hour, Interval: 5 * time.Second})
	l := labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", "s")
	for ts := int64(0); ts <= 3600*1000; ts += 5000 {
		a.Append(l, ts, float64(ts))
	}
	if got := a.Stats().OffHeapBytes; got != slabSize {
		t.Errorf("store a: %d bytes off the heap, want one slab (%d)", got, slabSize)
	}
	if got := b.Stats().OffHeapBytes; got != 0 {
		t.Errorf("store b, empty: %d bytes off the heap, want 0", got)
	}
	runtime.KeepAlive(a)
}

// A slab the operating system refuses to unmap is logged and counted, in
// the cleanup's goroutine; before, the cleanup panicked, ending serve.
func TestUnmapFailureIsLoggedAndCounted(t *testing.T) {
	defer func(old func([]byte) error) { unmap = old }(unmap)
	unmap = func([]byte) error { return errors.New("invalid argument") }
	var logs bytes.Buffer
	st := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mem := make([]byte, slabSize)
	st.slabs.offHeap.Add(slabSize)
	st.slabs.free(mem)
	s := st.Stats()
	if s.UnmapFailures != 1 || s.OffHeapBytes != slabSize {
		t.Errorf("after a failed unmap: %d failures, %d bytes mapped; want 1 and %d (still mapped)", s.UnmapFailures, s.OffHeapBytes, slabSize)
	}
	if !strings.Contains(logs.String(), "cannot unmap a chunk slab") || !strings.Contains(logs.String(), "invalid argument") {
		t.Errorf("log = %q, want the failure", logs.String())
	}
}
