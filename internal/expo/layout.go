package expo

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// Layout is the structure of the last text-format page read through it: a
// server writes the same lines in the same order scrape after scrape, and
// only the values change. ParseWith reads a page that has its layout's
// structure in one walk over the body, without the filtered copy, the
// per-name decisions or the series cache, and returns exactly what Parse
// returns for it. Any other page is read by Parse's path, and its
// structure becomes the layout's.
//
// The zero Layout is empty and ready to use. A Layout belongs to one
// scrape target and is used by one ParseWith call at a time (it is not
// safe for concurrent use); it keeps copies of what it needs, never the
// body. It serves one Parser and one Want: a Layout given to another
// Parser starts again, and the caller promises that want is the same
// function (answering the same for each name) at every call with a given
// Layout.
type Layout struct {
	// parser is the Parser the layout was built by.
	parser *Parser
	// cur is the structure of the last page read, nil when there is none.
	// It is read-only: targets whose pages have the same structure share
	// one (the Parser's shapes), so that a fleet of servers of one kind
	// keeps one, not one per target.
	cur *layoutShape
	// misses counts the pages in a row that parsed but did not fit the
	// layout (another structure, or one that has no layout); wait is the
	// number of pages still to read without trying it (the last of them
	// rebuilds it).
	misses, wait int
}

// layoutShape is a page's structure as a Layout keeps it.
type layoutShape struct {
	lines []layoutLine
	// text holds the bytes lines refer to.
	text []byte
	// samples are the samples of the exactLines that give one; series
	// are the keepLines' (shared with the series cache).
	samples []Sample
	series  []*internedSeries
	// What the page gave besides its samples (types sorted by family).
	types    []layoutType
	families int
	example  []string
	shape    LabelShape
	// escaped and mixed are the page's Escaped and Mixed (its names are
	// in text and series, which equal compares).
	escaped, mixed bool
}

// layoutLine is one line of a laid-out page and the check a line of a new
// page at its place must pass.
type layoutLine struct {
	// off, n: the line's bytes in Layout.text (see kind).
	off, n uint32
	kind   lineKind
	// arg is an exactLine's sample in Layout.samples (-1: none), a
	// keepLine's series in Layout.series, or the number of lines in a row
	// a skipLine stands for.
	arg int32
}

type lineKind uint8

const (
	// exactLine: a line the new page must have byte for byte (text is the
	// whole line, its '\n' included when it had one); it gives its stored
	// sample, if any, value included. Comments, HELP and TYPE lines, and
	// sample lines not of the keepLine shape.
	exactLine lineKind = iota
	// keepLine: a wanted sample line of a simple series (see
	// simpleSeries), whose label set the series cache shares: the series
	// text (internedSeries.text, not kept in Layout.text) must be
	// followed by one blank and a value fastValue reads (no timestamp).
	keepLine
	// skipLine: a sample line of a family that is not wanted: text is the
	// metric name, which must be followed by '{', or by blanks and
	// something that starts a value (filter's check for such a line).
	skipLine
)

type layoutType struct {
	family string
	typ    model.MetricType
}

// Bounds of a Layout, so that a huge page does not stay resident once per
// target: a page over either is read without a layout. The pages kvwatch
// reads have hundreds to a few thousand lines; a SGLang TP=8 page's layout
// holds about 7 KB of text (its HELP and TYPE lines: the kept series' text
// is the series cache's).
const (
	maxLayoutLines = 1 << 14
	maxLayoutText  = 256 << 10
)

// Misses in a row before ParseWith stops trying a layout for a while (a
// page whose structure changes at every scrape): after the n-th, it waits
// 2^(n-layoutMissesBeforeWait) pages, at most 64 (maxLayoutMisses).
const (
	layoutMissesBeforeWait = 3
	maxLayoutMisses        = layoutMissesBeforeWait + 6
)

// ParseWith reads body like Parse, through lay: when body has the
// structure of the page lay was last built from (the same lines, values
// aside), it is read in one walk over the body; otherwise it is read like
// Parse, and lay is rebuilt from it when it parses. The result is exactly
// what Parse returns, error included. OpenMetrics pages, a nil want, a nil
// Parser or a nil lay do not use a layout. See Layout for who may use lay
// and when.
func (pr *Parser) ParseWith(body []byte, contentType string, want Want, lay *Layout) (*Page, error) {
	if lay == nil || pr == nil || want == nil || isOpenMetrics(contentType) {
		return pr.parse(body, contentType, want, nil)
	}
	if lay.parser != pr {
		lay.cur = nil
		lay.parser, lay.misses, lay.wait = pr, 0, 0
	}
	if lay.wait > 0 {
		// The last page of the wait is the one the next page is tried
		// against.
		if lay.wait--; lay.wait > 0 {
			return pr.parse(body, contentType, want, nil)
		}
		return pr.parse(body, contentType, want, lay)
	}
	if lay.cur != nil {
		if p, ok := pr.readLaidOut(body, lay.cur); ok {
			lay.misses = 0
			return p, nil
		}
	}
	p, err := pr.parse(body, contentType, want, lay)
	// A page that fails leaves the layout as it was (the page after is
	// likely the usual one again) and is no miss: trtllm-serve's JSON
	// page comes before every page read through the layout.
	if err == nil {
		if lay.misses = min(lay.misses+1, maxLayoutMisses); lay.misses >= layoutMissesBeforeWait {
			lay.wait = 1 << (lay.misses - layoutMissesBeforeWait)
		}
	}
	return p, err
}

// readLaidOut reads body through lay, or reports false at the first line
// that does not fit it (no page is returned then).
func (pr *Parser) readLaidOut(body []byte, lay *layoutShape) (*Page, bool) {
	if notMetrics(body) != nil {
		return nil, false
	}
	p := pr.newPage()
	all := slices.Grow(p.all[:0], len(lay.samples)+len(lay.series))
	rest := body
	ok := true
	for _, ln := range lay.lines {
		t := lay.text[ln.off : ln.off+ln.n]
		n := len(t)
		switch ln.kind {
		case exactLine:
			if !bytes.HasPrefix(rest, t) || (t[n-1] != '\n' && len(rest) != n) {
				ok = false
			} else if rest = rest[n:]; ln.arg >= 0 {
				all = append(all, lay.samples[ln.arg])
			}
		case keepLine:
			is := lay.series[ln.arg]
			n = len(is.text)
			if len(rest) <= n+1 || rest[n] != ' ' || string(rest[:n]) != is.text {
				ok = false
				break
			}
			val := rest[n+1:]
			if i := bytes.IndexByte(val, '\n'); i >= 0 {
				val, rest = val[:i], val[i+1:]
			} else {
				rest = nil
			}
			// A value fastValue reads starts with a byte valueStart
			// accepts: filter keeps the line as it kept the laid-out one.
			v, fast := fastValue(val)
			if !fast {
				ok = false
				break
			}
			all = append(all, Sample{Name: is.name, Labels: is.labels, Value: v, key: is.key, memo: &is.memo})
		case skipLine:
			for range ln.arg {
				if len(rest) <= n || !bytes.Equal(rest[:n], t) {
					ok = false
					break
				}
				if c := rest[n]; c != '{' && ((c != ' ' && c != '\t') || !valueStart(rest[n:])) {
					ok = false
					break
				}
				if i := bytes.IndexByte(rest[n:], '\n'); i >= 0 {
					rest = rest[n+i+1:]
				} else {
					rest = nil
				}
			}
		}
		if !ok {
			break
		}
	}
	p.all = all
	if !ok || len(rest) > 0 {
		pr.Release(p)
		return nil, false
	}
	for _, t := range lay.types {
		p.types[t.family] = t.typ
	}
	p.Families, p.Example, p.shape, p.Escaped, p.Mixed = lay.families, lay.example, lay.shape, lay.escaped, lay.mixed
	p.samples = byName(all, p.samples)
	return p, true
}

// build makes the structure of body lay's, which Parse read into p with the
// filter's copy filtered and fastText (a page the text parser read has no
// layout); p.all must be in page order still (before byName). It relies on
// filter's decision for a line depending on the line's bytes alone (and
// want), so that the kept lines are found again by walking body and
// filtered side by side; fastText's each kept sample line gives exactly
// one of p's samples, in order, or the page gets no layout. A structure
// another Layout of the Parser has already is shared (Parser.shapes).
func (lay *Layout) build(pr *Parser, body, filtered []byte, p *Page) {
	// A new shape each time: one built for a structure the cache has
	// already, or for a page that gets no layout, is left to the garbage
	// collector, so that a target keeps nothing of its own but a pointer
	// (kept room was 17 KB a target, 34 MB at 2,000 SGLang TP=8 targets).
	// Builds are rare: a target's first page, and pages whose structure
	// changed.
	lay.cur = nil
	sh := new(layoutShape)
	if sh.build(pr, body, filtered, p) {
		lay.cur = pr.shapes.share(sh) // read-only from now on
	}
}

// build makes sh, a new shape, the structure of body (see Layout.build);
// false when the page gets no layout (then sh is dropped).
func (sh *layoutShape) build(pr *Parser, body, filtered []byte, p *Page) bool {
	var ls simpleSeries
	k := 0
	for rest := body; len(rest) > 0; {
		var line []byte
		line, rest = nextLine(rest)
		kept := false
		if i := bytes.IndexByte(filtered, '\n'); i >= 0 {
			// filter ends its copy with '\n', also after a last line
			// without one.
			if next := filtered[:i+1]; bytes.Equal(line, next) || (len(rest) == 0 && bytes.Equal(line, next[:i])) {
				kept, filtered = true, filtered[i+1:]
			}
		}
		switch {
		case kept && line[0] != '#': // one of fastText's sample lines
			if k == len(p.all) {
				return false
			}
			smp := p.all[k]
			k++
			if is := keepable(pr, line, smp, &ls); is != nil {
				sh.add(keepLine, nil, len(sh.series))
				sh.series = append(sh.series, is)
				break
			}
			sh.add(exactLine, line, len(sh.samples))
			sh.samples = append(sh.samples, smp)
		case !kept:
			if name, ok := skippable(line); ok {
				sh.add(skipLine, name, 1)
				break
			}
			fallthrough
		default:
			sh.add(exactLine, line, -1)
		}
		if len(sh.lines) > maxLayoutLines || len(sh.text) > maxLayoutText {
			return false
		}
	}
	if len(filtered) > 0 || k != len(p.all) {
		return false
	}
	for f, t := range p.types {
		sh.types = append(sh.types, layoutType{f, t})
	}
	slices.SortFunc(sh.types, func(a, b layoutType) int { return strings.Compare(a.family, b.family) })
	sh.families, sh.example, sh.shape, sh.escaped, sh.mixed = p.Families, slices.Clip(p.Example), p.shape, p.Escaped, p.Mixed
	return true
}

// keepable returns the shared series of a kept line when fastText reads
// any line of that series followed by one blank and a value without the
// series cache as well as with it (see fastText's reading of a series it
// has not seen), or nil. smp is the sample fastText made of the line: its
// value and label set are checked against the line's.
func keepable(pr *Parser, line []byte, smp Sample, ls *simpleSeries) *internedSeries {
	line = bytes.TrimSuffix(line, []byte("\n"))
	sp := bytes.LastIndexByte(line, ' ')
	if sp <= 0 || seriesEnd(line) != sp {
		return nil
	}
	series := line[:sp]
	v, fast := fastValue(line[sp+1:])
	if !fast || math.Float64bits(v) != math.Float64bits(smp.Value) || !utf8.Valid(series) || !ls.read(series) {
		return nil
	}
	// The series cache may have been emptied since fastText read the
	// line: then the line is an exactLine.
	if is, ok := pr.series.get(series); ok && &is.memo == smp.memo {
		return is
	}
	return nil
}

// skippable returns the metric name of a sample line that filter dropped
// when any line that starts with that name and passes the same check is
// dropped the same way: the name, then '{', or blanks and a value.
func skippable(line []byte) ([]byte, bool) {
	end := nameEnd(line)
	if end <= 0 || !validName(line[:end]) {
		return nil, false
	}
	if c := line[end]; c != '{' && !valueStart(line[end:]) {
		return nil, false
	}
	return line[:end], true
}

// add appends a line whose check is text (see layoutLine for arg); a
// skipLine of the same name as the line before counts one more line of it.
func (sh *layoutShape) add(kind lineKind, text []byte, arg int) {
	if n := len(sh.lines); kind == skipLine && n > 0 {
		if prev := &sh.lines[n-1]; prev.kind == skipLine && bytes.Equal(sh.text[prev.off:prev.off+prev.n], text) {
			prev.arg++
			return
		}
	}
	sh.lines = append(sh.lines, layoutLine{off: uint32(len(sh.text)), n: uint32(len(text)), kind: kind, arg: int32(arg)})
	sh.text = append(sh.text, text...)
}

// equal reports whether sh and b are the same structure: the same checks
// and the same results for a page that passes them.
func (sh *layoutShape) equal(b *layoutShape) bool {
	if sh.families != b.families || sh.shape != b.shape || !bytes.Equal(sh.text, b.text) ||
		!slices.Equal(sh.lines, b.lines) || !slices.Equal(sh.series, b.series) ||
		!slices.Equal(sh.types, b.types) || !slices.Equal(sh.example, b.example) {
		return false
	}
	return slices.EqualFunc(sh.samples, b.samples, func(x, y Sample) bool {
		return x.Name == y.Name && math.Float64bits(x.Value) == math.Float64bits(y.Value) &&
			x.key == y.key && x.memo == y.memo && labels.Equal(x.Labels, y.Labels)
	})
}

// hash is a hash of what equal compares.
func (sh *layoutShape) hash(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.Write(sh.text)
	var b [8]byte
	put := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	for _, ln := range sh.lines {
		put(uint64(ln.off)<<32 | uint64(ln.n))
		put(uint64(ln.kind)<<32 | uint64(uint32(ln.arg)))
	}
	for _, is := range sh.series {
		put(uint64(uintptr(unsafe.Pointer(is))))
	}
	for _, smp := range sh.samples {
		h.WriteString(smp.Name)
		put(math.Float64bits(smp.Value))
		put(smp.key)
	}
	for _, t := range sh.types {
		h.WriteString(t.family)
		h.WriteString(string(t.typ))
	}
	put(uint64(sh.families))
	return h.Sum64()
}

// size estimates the bytes sh holds.
func (sh *layoutShape) size() int {
	return len(sh.text) + 16*len(sh.lines) + 8*len(sh.series) + 64*len(sh.samples) + 32*len(sh.types) + 128
}

// shapeCache holds the structures the Parser's Layouts have built, so
// that Layouts of pages of one structure share one. It is bounded like
// the series cache: when a new structure would not fit, it is emptied (the
// Layouts keep theirs; the next of each kind is shared again).
type shapeCache struct {
	mu     sync.Mutex
	seed   maphash.Seed
	m      map[uint64][]*layoutShape
	n      int
	bytes  int
	resets uint64
}

// Bounds of a Parser's shape cache: the structures of a fleet's kinds of
// server (engine, version, model, parallelism), a few KB to a few tens of
// KB each.
const (
	maxShapes      = 256
	maxShapesBytes = 8 << 20
)

// share returns the shape equal to sh that the cache holds, or files sh
// and returns it.
func (c *shapeCache) share(sh *layoutShape) *layoutShape {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.seed = maphash.MakeSeed()
		c.m = map[uint64][]*layoutShape{}
	}
	h := sh.hash(c.seed)
	for _, x := range c.m[h] {
		if x.equal(sh) {
			return x
		}
	}
	size := sh.size()
	if size > maxShapesBytes {
		return sh
	}
	if c.n >= maxShapes || c.bytes+size > maxShapesBytes {
		c.m, c.n, c.bytes = map[uint64][]*layoutShape{}, 0, 0
		c.resets++
	}
	c.m[h] = append(c.m[h], sh)
	c.n++
	c.bytes += size
	return sh
}
