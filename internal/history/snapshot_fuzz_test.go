package history

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// seedStore is a small real store: two tiers, a counter with a reset, a
// staleness marker, a pending downsampled sample, and a few more series.
func seedStore() *Store {
	st := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour, DownsampleStep: time.Minute, Interval: 15 * time.Second})
	a := labels.FromStrings("__name__", "kvwatch_prompt_tokens_total", "server", "a")
	b := labels.FromStrings("__name__", "kvwatch_kv_usage_ratio", "server", "b")
	for i := range int64(600) {
		ts := i * 15000
		st.Append(a, ts, float64(i%400)*3)
		v := 0.5 + 0.4*math.Sin(float64(i)/20)
		if i == 590 {
			v = math.Float64frombits(value.StaleNaN)
		}
		st.Append(b, ts, v)
		for _, s := range []string{"c", "d", "e"} {
			st.Append(labels.FromStrings("__name__", "kvwatch_kv_used_tokens", "server", s), ts, float64(i))
		}
	}
	return st
}

// seedSnapshot is seedStore's snapshot file.
func seedSnapshot(f *testing.F) []byte {
	var buf bytes.Buffer
	if _, err := seedStore().writeSnapshot(&buf); err != nil {
		f.Fatal(err)
	}
	check := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
	if _, err := check.restore(bytes.NewReader(buf.Bytes()), int64(buf.Len()), math.MinInt64); err != nil || check.Stats().Series != 5 {
		f.Fatalf("the seed snapshot does not restore to 5 series: %v, %+v", err, check.Stats())
	}
	return buf.Bytes()
}

// contents returns every series' samples, by labels.
func contents(st *Store) map[string][]float64 {
	out := map[string][]float64{}
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, list := range st.series {
		for _, ms := range list {
			var vs []float64
			for _, c := range ms.view(math.MinInt64, math.MaxInt64) {
				it := c.Iterator(nil)
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					vs = append(vs, float64(ts), v)
				}
			}
			out[ms.lset.String()] = vs
		}
	}
	return out
}

func sameValues(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// Restoring any bytes gives a store whose every series can be read,
// written out and read back to the same samples.
func FuzzRestore(f *testing.F) {
	seed := seedSnapshot(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("KVWHIST\x01"))
	f.Add([]byte("KVWHIST\x02\x01"))
	f.Add([]byte("KVWHIST\x03\x01"))
	f.Fuzz(func(t *testing.T, file []byte) {
		st := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
		st.restore(bytes.NewReader(file), int64(len(file)), math.MinInt64)
		got := contents(st)
		var again bytes.Buffer
		if _, err := st.writeSnapshot(&again); err != nil {
			t.Fatalf("writing a restored store: %v", err)
		}
		st2 := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
		if _, err := st2.restore(bytes.NewReader(again.Bytes()), int64(again.Len()), math.MinInt64); err != nil {
			t.Fatalf("restoring what a restored store wrote: %v", err)
		}
		got2 := contents(st2)
		if len(got) != len(got2) {
			t.Fatalf("round trip: %d series, then %d", len(got), len(got2))
		}
		for k, vs := range got {
			if !sameValues(vs, got2[k]) {
				t.Fatalf("round trip of %s: %d values, then %d (or different)", k, len(vs), len(got2[k]))
			}
		}
	})
}

// A start always succeeds on a damaged snapshot: the file truncated at any
// length or with any bit flipped. Every series restored is exactly the
// written one; a damaged file is moved aside.
func FuzzSnapshotDamage(f *testing.F) {
	seed := seedSnapshot(f)
	want := contents(seedStore())
	for _, n := range []uint{0, 3, 8, 9, 10, 20, uint(len(seed)) / 2, uint(len(seed)) - 5, uint(len(seed)) - 1} {
		f.Add(true, n, byte(0))
		f.Add(false, n, byte(1))
		f.Add(false, n, byte(7))
	}
	f.Fuzz(func(t *testing.T, truncate bool, at uint, bit byte) {
		file := append([]byte(nil), seed...)
		pos := int(at % uint(len(file)))
		if truncate {
			file = file[:pos]
		} else {
			file[pos] ^= 1 << (bit % 8)
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "history.snap")
		mustWrite(t, path, file)
		st := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour, SnapshotFile: path})
		if err := st.Restore(time.UnixMilli(600 * 15000)); err != nil {
			t.Fatalf("Restore of a damaged file = %v, want nil", err)
		}
		got := contents(st)
		for k, vs := range got {
			if !sameValues(vs, want[k]) {
				t.Fatalf("restored series %s differs from the one written", k)
			}
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("a damaged file (%d of %d series recovered) stayed in place", len(got), len(want))
		}
		if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
			t.Fatalf("moved aside: %v, want one file", aside)
		}
		if !truncate && len(got) < len(want)-1 {
			// One flipped bit costs at most one series, unless it hit
			// the count or a length.
			if pos >= 9 && !isFraming(seed, pos) {
				t.Fatalf("one flipped bit at %d lost %d of %d series", pos, len(want)-len(got), len(want))
			}
		}
	})
}

// isFraming reports whether pos is inside the series count or a record's
// length prefix of a version 3 file.
func isFraming(file []byte, pos int) bool {
	off := len(snapshotMagic)
	_, n := uvarint(file[off:])
	if pos < off+n {
		return true
	}
	off += n
	for off < len(file) {
		l, n := uvarint(file[off:])
		if pos < off+n {
			return true
		}
		off += n + int(l) + 4
		if pos < off {
			return false
		}
	}
	return false
}

func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if c < 0x80 {
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return x, len(b)
}
