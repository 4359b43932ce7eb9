package history

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// withCRC returns body followed by its checksum, as a snapshot file ends,
// so that the fuzzer's bytes reach the parser instead of the checksum.
func withCRC(body []byte) []byte {
	out := append([]byte(nil), body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
}

// seedSnapshot is a small real snapshot without its checksum: two tiers,
// a counter with a reset, a staleness marker, a pending downsampled sample.
func seedSnapshot(f *testing.F) []byte {
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
	}
	var buf bytes.Buffer
	if err := st.writeSnapshot(&buf); err != nil {
		f.Fatal(err)
	}
	body := buf.Bytes()[:buf.Len()-4]
	check := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
	file := withCRC(body)
	if err := check.restore(bytes.NewReader(file), int64(len(file)), math.MinInt64); err != nil || check.Stats().Series != 2 {
		f.Fatalf("the seed snapshot does not restore to 2 series: %v, %+v", err, check.Stats())
	}
	return body
}

// Restoring any file either fails cleanly, leaving an empty store, or
// gives a store whose every series can be read and written out and read
// back to the same samples.
func FuzzRestore(f *testing.F) {
	seed := seedSnapshot(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte("KVWHIST\x01"))
	f.Add([]byte("KVWHIST\x02\x01"))
	f.Fuzz(func(t *testing.T, body []byte) {
		file := withCRC(body)
		st := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
		if err := st.restore(bytes.NewReader(file), int64(len(file)), math.MinInt64); err != nil {
			if n := st.Stats().Series; n != 0 {
				t.Fatalf("failed restore (%v) left %d series", err, n)
			}
			return
		}
		read := func(st *Store) map[string][]float64 {
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
		got := read(st)
		var again bytes.Buffer
		if err := st.writeSnapshot(&again); err != nil {
			t.Fatalf("writing a restored store: %v", err)
		}
		st2 := New(Options{Retention: 3 * time.Hour, FullResolution: time.Hour})
		if err := st2.restore(bytes.NewReader(again.Bytes()), int64(again.Len()), math.MinInt64); err != nil {
			t.Fatalf("restoring what a restored store wrote: %v", err)
		}
		got2 := read(st2)
		if len(got) != len(got2) {
			t.Fatalf("round trip: %d series, then %d", len(got), len(got2))
		}
		for k, vs := range got {
			vs2 := got2[k]
			if len(vs) != len(vs2) {
				t.Fatalf("round trip of %s: %d values, then %d", k, len(vs), len(vs2))
			}
			for i := range vs {
				if math.Float64bits(vs[i]) != math.Float64bits(vs2[i]) {
					t.Fatalf("round trip of %s: value %d is %v, then %v", k, i, vs[i], vs2[i])
				}
			}
		}
	})
}
