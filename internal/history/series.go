package history

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/prometheus/common/model"
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

// chunk is one closed Gorilla (XOR) encoded chunk, never empty, and its
// time range, in milliseconds. Its bytes, n of them at off in slab, are
// immutable; a store's slabs are outside the Go heap, so they are read
// only under the Store's lock or copied (view). A chunk is 32 bytes, a
// slice and a slab pointer would make it 48: a day of 40,000 series holds
// about 400,000 of them. (Reading mint from the encoding instead would
// save 8 bytes more but costs a cache miss per series and gather: 50% more
// CPU in BenchmarkHistory24h.)
type chunk struct {
	slab       *slab
	off, n     uint32
	mint, maxt int64
}

// heapChunk is a chunk of bytes on the Go heap.
func heapChunk(b []byte, mint, maxt int64) chunk {
	return chunk{slab: &slab{mem: b}, n: uint32(len(b)), mint: mint, maxt: maxt}
}

func (c chunk) bytes() []byte { return c.slab.mem[c.off : c.off+c.n : c.off+c.n] }

// Iterator implements chunkenc.Iterable.
func (c chunk) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	var x chunkenc.XORChunk
	x.Reset(c.bytes())
	return x.Iterator(it)
}

func (c chunk) numSamples() int { return int(binary.BigEndian.Uint16(c.slab.mem[c.off:])) }

// tier is a run of closed chunks, oldest first, and the open head chunk.
type tier struct {
	closed []chunk
	// head is the open chunk (nil when there is none); its time range is
	// hmint..hmaxt.
	head         *chunkenc.XORChunk
	app          chunkenc.Appender
	hmint, hmaxt int64
	arena        *arena
}

func (tr *tier) open() bool { return tr.head != nil }

// append adds a sample after the tier's newest one.
func (tr *tier) append(t int64, v float64) {
	if tr.open() && tr.head.NumSamples() >= samplesPerChunk {
		tr.closeHead()
	}
	if !tr.open() {
		tr.head = chunkenc.NewXORChunk()
		app, err := tr.head.Appender()
		if err != nil { // cannot happen for an empty chunk
			panic(err)
		}
		tr.app, tr.hmint = app, t
	}
	tr.app.Append(0, t, v)
	tr.hmaxt = t
}

// closeHead closes the head chunk: its bytes are copied at their exact
// size into the tier's arena.
func (tr *tier) closeHead() {
	if !tr.open() {
		return
	}
	sl, off := tr.arena.copy(tr.head.Bytes())
	if len(tr.closed) == cap(tr.closed) {
		// Lists are short and change every chunk (20m at 5s, 4h at 1m):
		// grow by two, not twice the size, to keep 51,000 of them small.
		tr.closed = growExact(tr.closed, 2)
	}
	tr.closed = append(tr.closed, chunk{slab: sl, off: off, n: uint32(len(tr.head.Bytes())), mint: tr.hmint, maxt: tr.hmaxt})
	tr.head, tr.app = nil, nil
}

// growExact returns list with room for exactly n more chunks (append and
// slices.Grow would double a short list's capacity).
func growExact(list []chunk, n int) []chunk {
	out := make([]chunk, len(list), len(list)+n)
	copy(out, list)
	return out
}

// truncate drops closed chunks that end before mint, and the head chunk as
// well when it does.
func (tr *tier) truncate(mint int64) {
	n := 0
	for n < len(tr.closed) && tr.closed[n].maxt < mint {
		n++
	}
	tr.dropOldest(n)
	if len(tr.closed) == 0 && tr.open() && tr.hmaxt < mint {
		tr.head, tr.app = nil, nil
	}
}

// trim re-encodes the oldest closed chunk without its samples before mint
// once at least slack milliseconds of it are older than mint, so that a
// tier of long chunks (240 steps of a coarse tier are 4h at 1m) keeps at
// most slack more than the window instead of a whole chunk. The samples
// cut off are passed to drop, oldest first, when it is not nil. Call it
// after whole chunks before mint are gone.
func (tr *tier) trim(mint, slack int64, drop func(t int64, v float64)) {
	if len(tr.closed) == 0 && tr.open() && tr.hmint <= mint-slack && tr.hmaxt >= mint {
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
	it := old.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		t, v := it.At()
		if t >= mint {
			first = min(first, t)
			app.Append(0, t, v)
		} else if drop != nil {
			drop(t, v)
		}
	}
	// The new chunk lives until the next trim: it goes to the arena's
	// slabs for those.
	sl, off := tr.arena.copyTrimmed(c.Bytes())
	tr.closed[0] = chunk{slab: sl, off: off, n: uint32(len(c.Bytes())), mint: first, maxt: old.maxt}
}

// dropOldest drops the n oldest closed chunks, in place: readers hold
// copies of the chunk list (view), never the list itself, so the slice
// keeps its capacity instead of being reallocated at every drop.
func (tr *tier) dropOldest(n int) {
	if n == 0 {
		return
	}
	k := copy(tr.closed, tr.closed[n:])
	clear(tr.closed[k:])
	tr.closed = tr.closed[:k]
}

func (tr *tier) empty() bool { return len(tr.closed) == 0 && !tr.open() }

// oldest returns the time range of the tier's oldest chunk (the head when
// none is closed); ok is false when the tier is empty.
func (tr *tier) oldest() (mint, maxt int64, ok bool) {
	switch {
	case len(tr.closed) > 0:
		return tr.closed[0].mint, tr.closed[0].maxt, true
	case tr.open():
		return tr.hmint, tr.hmaxt, true
	}
	return 0, 0, false
}

// bytes is the memory the tier's samples take: closed chunks at their
// size, the head at its buffer's capacity.
func (tr *tier) bytes() int {
	n := 0
	for _, c := range tr.closed {
		n += int(c.n)
	}
	if tr.open() {
		n += cap(tr.head.Bytes())
	}
	return n
}

func (tr *tier) samples() int {
	n := 0
	for _, c := range tr.closed {
		n += c.numSamples()
	}
	if tr.open() {
		n += tr.head.NumSamples()
	}
	return n
}

// view appends copies of the chunks overlapping [mint, maxt] to out, on
// the Go heap, for reading outside the lock: a slab's memory is returned
// once its chunks are dropped, whoever still reads them.
func (tr *tier) view(out []chunk, mint, maxt int64) []chunk {
	size := 0
	for _, c := range tr.closed {
		if c.maxt >= mint && c.mint <= maxt {
			size += int(c.n)
		}
	}
	head := tr.open() && tr.hmaxt >= mint && tr.hmint <= maxt
	if head {
		size += len(tr.head.Bytes())
	}
	if size == 0 {
		return out
	}
	// One buffer for all of them.
	cp := &slab{mem: make([]byte, 0, size)}
	add := func(b []byte, mint, maxt int64) {
		off := len(cp.mem)
		cp.mem = append(cp.mem, b...)
		out = append(out, chunk{slab: cp, off: uint32(off), n: uint32(len(b)), mint: mint, maxt: maxt})
	}
	for _, c := range tr.closed {
		if c.maxt >= mint && c.mint <= maxt {
			add(c.bytes(), c.mint, c.maxt)
		}
	}
	if head {
		add(tr.head.Bytes(), tr.hmint, tr.hmaxt)
	}
	return out
}

func (tr *tier) overlaps(mint, maxt int64) bool {
	for _, c := range tr.closed {
		if c.maxt >= mint && c.mint <= maxt {
			return true
		}
	}
	return tr.open() && tr.hmaxt >= mint && tr.hmint <= maxt
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
	// rounded says the series stores its values rounded to
	// keptSignificandBits (see reducedPrecision).
	rounded bool
	// removed says the series was dropped from the store (it ended and
	// its samples left the window): a gather's Batch must not append to
	// it (it may still be in Store.recent).
	removed bool
	// gen is the Store's gather that last had the series (0:
	// none).
	gen    uint32
	coarse tier
	ds     downsampler
	raw    tier
	// lastT is the timestamp of the newest sample (math.MinInt64 when empty).
	lastT int64
	// lastV is the newest sample's value as stored, when lastOK (set by
	// append; a restore from whole chunks leaves it unknown until the next
	// append): an instant selector at or after lastT reads only it.
	lastV  float64
	lastOK bool
	// recent is the series' place in Store.recent or, during a gather,
	// in the Batch's next (a hint only: Batch.Add checks it); slot is its
	// place in Store.sweep. The fields above end in 7 bytes of padding:
	// with these, the series is 240 bytes, its allocation size class.
	recent, slot uint32
}

// newSeries returns an empty series whose tiers take closed chunks from
// raw and coarse.
func newSeries(lset labels.Labels, raw, coarse *arena) *memSeries {
	ms := &memSeries{lset: lset, lastT: math.MinInt64, rounded: reducedPrecision(lset.Get(model.MetricNameLabel))}
	ms.raw.arena, ms.coarse.arena = raw, coarse
	return ms
}

// keptSignificandBits is how many of a float64's 52 explicit significand
// bits the series of reducedPrecision keep: a value is stored rounded to
// the nearest number with 21 significant bits, a relative error of at most
// 2^-21 (4.8e-7). The dropped bits are noise for these series but cost
// about 4 bytes a sample in the XOR encoding, which cannot compress random
// low bits; rounded values XOR to long runs of trailing zeros. The same
// trade as VictoriaMetrics' -precisionBits, for a few series only.
const keptSignificandBits = 20

// reducedPrecision reports whether the series named name stores its values
// rounded to keptSignificandBits: ratios (names ending in _ratio, 0–1
// fractions of token counts), measured durations (_duration_seconds), and
// recording-rule results (level:metric:operations) whose operations are a
// rate, a ratio or a derivative (rate5m, irate1m, ratio, ratio_rate5m,
// deriv15m): quotients whose low bits are noise of the division. Token
// counts, request counts, counters, timestamps, sums of token counts
// (pool:...:sum) and every other series are stored exactly.
func reducedPrecision(name string) bool {
	if strings.HasSuffix(name, "_ratio") || strings.HasSuffix(name, "_duration_seconds") {
		return true
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 || strings.IndexByte(name, ':') == i {
		return false // not level:metric:operations
	}
	op := name[i+1:]
	for _, p := range []string{"rate", "irate", "ratio", "deriv"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// roundSignificand rounds v to keptSignificandBits significand bits, to
// nearest with ties away from zero. Zero, subnormal numbers (below
// 2^-1022, whose significand has fewer bits), infinities and NaNs
// (staleness markers) are returned unchanged.
func roundSignificand(v float64) float64 {
	if math.Abs(v) < 0x1p-1022 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	const drop = 52 - keptSignificandBits
	b := math.Float64bits(v)
	if r := math.Float64frombits((b + 1<<(drop-1)) &^ (1<<drop - 1)); !math.IsInf(r, 0) {
		return r
	}
	return math.Float64frombits(b &^ (1<<drop - 1)) // the largest float64s
}

// append adds a sample at full resolution; it reports false when t is not
// after the newest sample (out of order or duplicate), which is dropped.
func (s *memSeries) append(t int64, v float64) bool {
	if t <= s.lastT {
		return false
	}
	if s.rounded && !s.counter {
		v = roundSignificand(v)
	}
	s.raw.append(t, v)
	s.lastT, s.lastV, s.lastOK = t, v, true
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
		it := s.raw.closed[n].Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			feed(it.At())
		}
		n++
	}
	s.raw.dropOldest(n)
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
		out = append(out, heapChunk(c.Bytes(), p.t, p.t))
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
