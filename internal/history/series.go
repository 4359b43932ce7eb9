package history

import (
	"math"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// samplesPerChunk is how many samples a chunk holds before it is closed
// (20 minutes at 5s). Fewer, larger chunks cost less bookkeeping per sample
// (measured in BenchmarkHistory24h); the retention cut is one chunk coarse.
// Closed chunks are immutable and shared with queries without copying; the
// retention cut drops whole closed chunks.
const samplesPerChunk = 240

// chunk is one Gorilla (XOR) encoded chunk and its time range, in
// milliseconds.
type chunk struct {
	c          *chunkenc.XORChunk
	mint, maxt int64
}

// memSeries is one series: closed chunks, oldest first, and the open head
// chunk. It is guarded by the Store's lock.
type memSeries struct {
	lset   labels.Labels
	closed []chunk
	head   chunk
	app    chunkenc.Appender
	// lastT is the timestamp of the newest sample (math.MinInt64 when empty).
	lastT int64
}

func newSeries(lset labels.Labels) *memSeries {
	return &memSeries{lset: lset, lastT: math.MinInt64}
}

// append adds a sample; it reports false when t is not after the newest
// sample (out of order or duplicate), which is dropped.
func (s *memSeries) append(t int64, v float64) bool {
	if t <= s.lastT {
		return false
	}
	if s.head.c != nil && s.head.c.NumSamples() >= samplesPerChunk {
		s.head.c.Compact()
		s.closed = append(s.closed, s.head)
		s.head = chunk{}
		s.app = nil
	}
	if s.head.c == nil {
		s.head = chunk{c: chunkenc.NewXORChunk(), mint: t}
		app, err := s.head.c.Appender()
		if err != nil { // cannot happen for an empty chunk
			panic(err)
		}
		s.app = app
	}
	s.app.Append(0, t, v)
	s.head.maxt = t
	s.lastT = t
	return true
}

// truncate drops closed chunks that end before mint, and the head chunk as
// well when it does. It reports whether the series is now empty.
func (s *memSeries) truncate(mint int64) bool {
	n := 0
	for n < len(s.closed) && s.closed[n].maxt < mint {
		n++
	}
	if n > 0 {
		s.closed = append(s.closed[:0:0], s.closed[n:]...)
	}
	if len(s.closed) == 0 && s.head.c != nil && s.head.maxt < mint {
		s.head = chunk{}
		s.app = nil
	}
	return len(s.closed) == 0 && s.head.c == nil
}

// bytes is the encoded size of the series' samples.
func (s *memSeries) bytes() int {
	n := 0
	for _, c := range s.closed {
		n += cap(c.c.Bytes())
	}
	if s.head.c != nil {
		n += cap(s.head.c.Bytes())
	}
	return n
}

// samples is the number of samples held.
func (s *memSeries) samples() int {
	n := 0
	for _, c := range s.closed {
		n += c.c.NumSamples()
	}
	if s.head.c != nil {
		n += s.head.c.NumSamples()
	}
	return n
}

// view returns the chunks overlapping [mint, maxt] for reading outside the
// lock: closed chunks are shared, the head chunk is copied.
func (s *memSeries) view(mint, maxt int64) []chunk {
	var out []chunk
	for _, c := range s.closed {
		if c.maxt >= mint && c.mint <= maxt {
			out = append(out, c)
		}
	}
	if h := s.head; h.c != nil && h.maxt >= mint && h.mint <= maxt {
		b := append([]byte(nil), h.c.Bytes()...)
		c := chunkenc.NewXORChunk()
		c.Reset(b)
		out = append(out, chunk{c: c, mint: h.mint, maxt: h.maxt})
	}
	return out
}
