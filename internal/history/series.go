package history

import (
	"math"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// samplesPerChunk is how many samples a chunk holds before it is closed
// (20 minutes at 5s, 4 hours at a 1m downsampling step). Fewer, larger
// chunks cost less bookkeeping per sample (measured in
// BenchmarkHistory24h); the retention cut and the move into the coarse
// tier are one chunk coarse. Closed chunks are immutable and shared with
// queries without copying.
const samplesPerChunk = 240

// chunk is one Gorilla (XOR) encoded chunk and its time range, in
// milliseconds.
type chunk struct {
	c          *chunkenc.XORChunk
	mint, maxt int64
}

// tier is a run of chunks, oldest first, and the open head chunk.
type tier struct {
	closed []chunk
	head   chunk
	app    chunkenc.Appender
}

// append adds a sample after the tier's newest one.
func (tr *tier) append(t int64, v float64) {
	if tr.head.c != nil && tr.head.c.NumSamples() >= samplesPerChunk {
		tr.head.c.Compact()
		tr.closed = append(tr.closed, tr.head)
		tr.head = chunk{}
		tr.app = nil
	}
	if tr.head.c == nil {
		tr.head = chunk{c: chunkenc.NewXORChunk(), mint: t}
		app, err := tr.head.c.Appender()
		if err != nil { // cannot happen for an empty chunk
			panic(err)
		}
		tr.app = app
	}
	tr.app.Append(0, t, v)
	tr.head.maxt = t
}

// truncate drops closed chunks that end before mint, and the head chunk as
// well when it does.
func (tr *tier) truncate(mint int64) {
	n := 0
	for n < len(tr.closed) && tr.closed[n].maxt < mint {
		n++
	}
	if n > 0 {
		tr.closed = append(tr.closed[:0:0], tr.closed[n:]...)
	}
	if len(tr.closed) == 0 && tr.head.c != nil && tr.head.maxt < mint {
		tr.head = chunk{}
		tr.app = nil
	}
}

// trim re-encodes the oldest closed chunk without its samples before mint
// once at least slack milliseconds of it are older than mint, so that a
// tier of long chunks (240 steps of a coarse tier are 4h at 1m) keeps at
// most slack more than the window instead of a whole chunk. The samples
// cut off are passed to drop, oldest first, when it is not nil. Call it
// after whole chunks before mint are gone.
func (tr *tier) trim(mint, slack int64, drop func(t int64, v float64)) {
	if h := tr.head; len(tr.closed) == 0 && h.c != nil && h.mint <= mint-slack && h.maxt >= mint {
		tr.closeHead() // the next sample starts a new head chunk
	}
	if len(tr.closed) == 0 {
		return
	}
	old := tr.closed[0]
	if old.mint > mint-slack || old.maxt < mint {
		return
	}
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil { // cannot happen for an empty chunk
		panic(err)
	}
	first := int64(math.MaxInt64)
	it := old.c.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		t, v := it.At()
		if t >= mint {
			first = min(first, t)
			app.Append(0, t, v)
		} else if drop != nil {
			drop(t, v)
		}
	}
	c.Compact()
	// Readers share the old chunk; it is replaced, never changed.
	tr.closed[0] = chunk{c: c, mint: first, maxt: old.maxt}
}

// closeHead closes the head chunk (of a series no longer appended to).
func (tr *tier) closeHead() {
	if tr.head.c == nil {
		return
	}
	tr.head.c.Compact()
	tr.closed = append(tr.closed, tr.head)
	tr.head = chunk{}
	tr.app = nil
}

func (tr *tier) empty() bool { return len(tr.closed) == 0 && tr.head.c == nil }

func (tr *tier) bytes() int {
	n := 0
	for _, c := range tr.closed {
		n += cap(c.c.Bytes())
	}
	if tr.head.c != nil {
		n += cap(tr.head.c.Bytes())
	}
	return n
}

func (tr *tier) samples() int {
	n := 0
	for _, c := range tr.closed {
		n += c.c.NumSamples()
	}
	if tr.head.c != nil {
		n += tr.head.c.NumSamples()
	}
	return n
}

// view appends the chunks overlapping [mint, maxt] to out, for reading
// outside the lock: closed chunks are shared, the head chunk is copied.
func (tr *tier) view(out []chunk, mint, maxt int64) []chunk {
	for _, c := range tr.closed {
		if c.maxt >= mint && c.mint <= maxt {
			out = append(out, c)
		}
	}
	if h := tr.head; h.c != nil && h.maxt >= mint && h.mint <= maxt {
		b := append([]byte(nil), h.c.Bytes()...)
		c := chunkenc.NewXORChunk()
		c.Reset(b)
		out = append(out, chunk{c: c, mint: h.mint, maxt: h.maxt})
	}
	return out
}

func (tr *tier) overlaps(mint, maxt int64) bool {
	for _, c := range tr.closed {
		if c.maxt >= mint && c.mint <= maxt {
			return true
		}
	}
	return tr.head.c != nil && tr.head.maxt >= mint && tr.head.mint <= maxt
}

// memSeries is one series in two tiers: coarse holds downsampled samples
// older than the full-resolution window, raw every sample since. Between
// them sits the downsampler's pending sample (the newest sample of a step
// that is not finished yet). It is guarded by the Store's lock.
type memSeries struct {
	lset labels.Labels
	// counter says the series is a counter: the downsampler then keeps the
	// samples on both sides of every reset.
	counter bool
	coarse  tier
	ds      downsampler
	raw     tier
	// lastT is the timestamp of the newest sample (math.MinInt64 when empty).
	lastT int64
}

func newSeries(lset labels.Labels) *memSeries {
	return &memSeries{lset: lset, lastT: math.MinInt64}
}

// append adds a sample at full resolution; it reports false when t is not
// after the newest sample (out of order or duplicate), which is dropped.
func (s *memSeries) append(t int64, v float64) bool {
	if t <= s.lastT {
		return false
	}
	s.raw.append(t, v)
	s.lastT = t
	return true
}

// downsample moves the full-resolution samples before boundary into the
// coarse tier, one sample per step of stepMs milliseconds (see
// downsampler): whole closed chunks that end before it, and the older part
// of the oldest closed chunk once slack milliseconds of it are before it.
func (s *memSeries) downsample(boundary, stepMs, slack int64) {
	feed := func(t int64, v float64) { s.ds.feed(&s.coarse, stepMs, s.counter, t, v) }
	n := 0
	for n < len(s.raw.closed) && s.raw.closed[n].maxt < boundary {
		it := s.raw.closed[n].c.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			feed(it.At())
		}
		n++
	}
	if n > 0 {
		s.raw.closed = append(s.raw.closed[:0:0], s.raw.closed[n:]...)
	}
	s.raw.trim(boundary, slack, feed)
}

// truncate drops the data that ends before mint; the coarse tier keeps at
// most trimSlack milliseconds before it. It reports whether the series is
// now empty.
func (s *memSeries) truncate(mint, trimSlack int64) bool {
	s.coarse.truncate(mint)
	s.coarse.trim(mint, trimSlack, nil)
	if s.ds.pending && s.ds.t < mint {
		s.ds.pending = false
	}
	s.raw.truncate(mint)
	return s.coarse.empty() && !s.ds.pending && s.raw.empty()
}

// bytes is the encoded size of the series' samples, per tier.
func (s *memSeries) bytes() (raw, coarse int) {
	coarse = s.coarse.bytes()
	if s.ds.pending {
		coarse += 16
	}
	return s.raw.bytes(), coarse
}

// samples is the number of samples held, per tier.
func (s *memSeries) samples() (raw, coarse int) {
	coarse = s.coarse.samples()
	if s.ds.pending {
		coarse++
	}
	return s.raw.samples(), coarse
}

// view returns the chunks overlapping [mint, maxt], oldest first, for
// reading outside the lock.
func (s *memSeries) view(mint, maxt int64) []chunk {
	out := s.coarse.view(nil, mint, maxt)
	if p := s.ds; p.pending && p.t >= mint && p.t <= maxt {
		c := chunkenc.NewXORChunk()
		app, _ := c.Appender()
		app.Append(0, p.t, p.v)
		out = append(out, chunk{c: c, mint: p.t, maxt: p.t})
	}
	return s.raw.view(out, mint, maxt)
}

func (s *memSeries) overlaps(mint, maxt int64) bool {
	p := s.ds
	return s.coarse.overlaps(mint, maxt) || (p.pending && p.t >= mint && p.t <= maxt) || s.raw.overlaps(mint, maxt)
}

// downsampler turns full-resolution samples, in time order, into the
// coarse tier. Per step of the grid (k*step <= t < (k+1)*step, epoch
// aligned) it keeps the newest sample, which is what a gauge shows and
// what rate() and increase() need of a counter. It also keeps, whatever
// their step:
//   - every staleness marker and the sample before it, so a series that
//     ended still ends and its last value is not lost;
//   - for counters, the samples before and after every reset (a decrease),
//     so the increase up to the reset and the one after it both count.
type downsampler struct {
	// pending is set when (t, v) is the newest sample of an unfinished step;
	// it is written to the coarse tier when a sample of a later step comes.
	pending bool
	t       int64
	v       float64
	// prev is the newest counter value seen since the last staleness
	// marker (valid when hasPrev), for reset detection.
	prev    float64
	hasPrev bool
}

func (d *downsampler) feed(out *tier, stepMs int64, counter bool, t int64, v float64) {
	if d.pending && floorDiv(t, stepMs) != floorDiv(d.t, stepMs) {
		d.flush(out)
	}
	switch {
	case value.IsStaleNaN(v):
		d.flush(out)
		out.append(t, v)
		d.hasPrev = false
		return
	case counter && d.hasPrev && v < d.prev:
		d.flush(out)
		out.append(t, v)
		d.prev = v
		return
	}
	d.pending, d.t, d.v = true, t, v
	d.prev, d.hasPrev = v, true
}

func (d *downsampler) flush(out *tier) {
	if d.pending {
		out.append(d.t, d.v)
		d.pending = false
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
