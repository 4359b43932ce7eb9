package history

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// bigStore holds about 700 KB of chunks: 250 series of random-walk gauges,
// 1h at 5s, all at full resolution.
func bigStore(t *testing.T, path string) (*Store, time.Time) {
	t.Helper()
	st := New(Options{Retention: 2 * time.Hour, FullResolution: 2 * time.Hour, SnapshotFile: path})
	r := rand.New(rand.NewPCG(1, 2))
	var lsets []labels.Labels
	vals := make([]float64, 250)
	for i := range vals {
		lsets = append(lsets, labels.FromStrings(model.MetricNameLabel, "kvwatch_kv_used_tokens", "server", strings.Repeat("s", 1+i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))))
		vals[i] = 1e6
	}
	var end time.Time
	for k := range 1000 {
		end = t0.Add(time.Duration(k) * 5 * time.Second)
		for i, l := range lsets {
			vals[i] += float64(r.IntN(20001) - 10000)
			st.Append(l, end.UnixMilli(), vals[i])
		}
	}
	return st, end
}

func totalAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestSnapshotStreams checks that writing and restoring a snapshot do not
// hold the whole file in memory: writing allocates a small fraction of the
// file's size, restoring little more than the chunks it keeps (which are
// copied into the store's slabs once).
func TestSnapshotStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	st, end := bigStore(t, path)
	before := totalAlloc()
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	wrote := totalAlloc() - before
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(fi.Size())
	if size < 512<<10 {
		t.Fatalf("snapshot is %d bytes, want >= 512 KiB for this test to mean anything", size)
	}
	t.Logf("WriteSnapshot allocated %d bytes, Restore below, for a %d-byte file", wrote, size)
	if wrote > size/4 {
		t.Errorf("WriteSnapshot allocated %d bytes for a %d-byte file, want < 1/4 of it (streamed)", wrote, size)
	}

	st2 := New(Options{Retention: 2 * time.Hour, FullResolution: 2 * time.Hour, SnapshotFile: path})
	before = totalAlloc()
	if err := st2.Restore(end); err != nil {
		t.Fatal(err)
	}
	read := totalAlloc() - before
	t.Logf("Restore allocated %d bytes", read)
	// The chunks are copied into slabs, with the series, label and chunk
	// lists about 1.5x the file's size; reading the file at once as well
	// made it 2.5x.
	if read > size*2 {
		t.Errorf("Restore allocated %d bytes for a %d-byte file, want < 2x (streamed)", read, size)
	}
	a, b := st.sortedSeriesLocked(), st2.sortedSeriesLocked()
	if len(a) != len(b) {
		t.Fatalf("restored %d series, want %d", len(b), len(a))
	}
	for i := range a {
		if diff := cmp.Diff(samplesOf(t, a[i].view(minInt64, maxInt64)), samplesOf(t, b[i].view(minInt64, maxInt64))); diff != "" {
			t.Fatalf("series %s after restore (-want +got):\n%s", a[i].lset, diff)
		}
	}
}

// TestSnapshotDamaged: a truncated file, a dropped or flipped checksum
// and extra bytes at the end are all restored as far as they are intact,
// every restored series exactly as written, and the file is moved aside.
func TestSnapshotDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.snap")
	st := New(Options{Retention: time.Hour, SnapshotFile: path})
	end := fill(t, st, 5)
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	good := mustRead(t, path)
	want := contents(st)
	n := len(want)
	tests := []struct {
		name string
		data func() []byte
		// min and max series expected back.
		min, max int
	}{
		{"truncated in the middle", func() []byte { return append([]byte(nil), good[:len(good)/2]...) }, 1, n - 1},
		{"last checksum dropped", func() []byte { return append([]byte(nil), good[:len(good)-4]...) }, n - 1, n - 1},
		{"bit flipped near the end", func() []byte {
			d := append([]byte(nil), good...)
			d[len(d)-10] ^= 1
			return d
		}, n - 1, n - 1},
		{"bytes appended", func() []byte { return append(append([]byte(nil), good...), 0, 0, 0) }, n, n},
	}
	for _, tt := range tests {
		mustWrite(t, path, tt.data())
		st2 := New(Options{Retention: time.Hour, SnapshotFile: path})
		if err := st2.Restore(end); err != nil {
			t.Errorf("%s: Restore = %v, want nil", tt.name, err)
		}
		got := contents(st2)
		if len(got) < tt.min || len(got) > tt.max {
			t.Errorf("%s: restored %d series, want %d to %d", tt.name, len(got), tt.min, tt.max)
		}
		for k, vs := range got {
			if !sameValues(vs, want[k]) {
				t.Errorf("%s: series %s differs from the one written", tt.name, k)
			}
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: the damaged file was not moved aside", tt.name)
		}
		aside, _ := filepath.Glob(path + ".corrupt-*")
		for _, a := range aside {
			os.Remove(a)
		}
		if len(aside) != 1 {
			t.Errorf("%s: moved aside %v, want one file", tt.name, aside)
		}
	}
	// The good file restores in place, so the cases above failed for their damage.
	mustWrite(t, path, good)
	st3 := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st3.Restore(end); err != nil || len(contents(st3)) != n {
		t.Errorf("Restore(intact) = %v, %d series, want %d", err, len(contents(st3)), n)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("an intact snapshot was moved: %v", err)
	}
}
