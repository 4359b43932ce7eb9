// Package expo reads a /metrics body (Prometheus text format or OpenMetrics)
// into a Page of samples, using the Prometheus project's textparse parsers.
// Before parsing it drops every family the caller does not want, which is
// most of an engine's page (histogram buckets above all), so reading a page
// costs a fraction of a full parse. Label sets met on earlier pages are
// shared from bounded caches rather than built again, and a page with the
// structure of the one before it (a Layout) is read in one walk. It does
// not fetch anything and knows no engine; callers say which sample names
// they need.
package expo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/kvwatch/kvwatch/internal/safetext"
)

// Sample is one series of a page at scrape time.
type Sample struct {
	// Name is the canonical sample name (see Canonical).
	Name   string
	Labels labels.Labels
	// Value may be NaN or ±Inf as the engine sent it; adapters decide.
	Value float64
	// key: see SeriesKey.
	key uint64
	// memo is the shared label set's (see Memoized); nil for a label set
	// built for this page alone.
	memo *seriesMemo
}

// SeriesKey is the hash of the sample's labels without the metric name
// label: two samples of one canonical name whose labels are the same (the
// name's spelling aside, "sglang:x" and "sglang_x") have the same key, so
// a page that repeats a series is found without hashing its labels again
// (a Parser keeps the key with the label sets it shares). Different label
// sets may collide: compare the labels of samples whose keys are equal.
func (s Sample) SeriesKey() uint64 { return s.key }

// Page is the wanted part of one /metrics body.
type Page struct {
	samples map[string][]Sample
	types   map[string]model.MetricType
	// Families is the number of metric families in the whole body, wanted or
	// not, counted from TYPE lines (pages without them count at most five).
	Families int
	// Example holds up to five family names of the body, to tell a user what
	// a page they did not expect contains. It is read-only: the pages read
	// through one Layout share it.
	Example []string
	// Escaped is true when a sample name of a colon prefix was written
	// with an underscore (sglang_token_usage for sglang:token_usage):
	// escaped by the exposition (OpenMetrics escaping=underscores) or by a
	// relabelling on the way. Canonical folded it back.
	Escaped bool
	// Mixed is true when the page writes sample names of one colon prefix
	// both ways (sglang:x and sglang_y).
	Mixed bool
	// all is the array the samples' slices share.
	all []Sample
	// shape covers every sample's label set.
	shape LabelShape
}

// Len returns the number of samples kept.
func (p *Page) Len() int { return len(p.all) }

// Shape returns the largest label count, label name and label value of
// the samples kept (see LabelShape): a page within limits on all three
// needs no look at each label set.
func (p *Page) Shape() LabelShape { return p.shape }

// Samples returns the samples named name (canonical form), in page order.
func (p *Page) Samples(name string) []Sample { return p.samples[name] }

// Has reports whether the page has at least one sample named name.
func (p *Page) Has(name string) bool { return len(p.samples[name]) > 0 }

// Type returns the declared type of family name, or "unknown".
func (p *Page) Type(family string) model.MetricType {
	if t, ok := p.types[family]; ok {
		return t
	}
	return model.MetricTypeUnknown
}

// EachType calls fn with the canonical family name of every kept TYPE
// line, in no order: the families the page declares among those wanted,
// with samples or without.
func (p *Page) EachType(fn func(family string)) {
	for n := range p.types {
		fn(n)
	}
}

// Names returns every sample name kept, unsorted.
func (p *Page) Names() []string {
	out := make([]string, 0, len(p.samples))
	for n := range p.samples {
		out = append(out, n)
	}
	return out
}

// Canonical maps name to the colon form its engine normally uses, for the
// colon prefixes the Parser was made with: with "sglang",
// "sglang_token_usage" becomes "sglang:token_usage" (some versions and
// relabelling setups write an underscore). Other names are kept; a nil
// Parser keeps every name.
func (pr *Parser) Canonical(name string) string {
	if pr == nil {
		return name
	}
	for _, p := range pr.colon {
		if len(name) > len(p) && name[len(p)] == '_' && strings.HasPrefix(name, p) {
			return p + ":" + name[len(p)+1:]
		}
	}
	return name
}

// colonPrefix returns the index of the colon prefix the canonical name c
// has among the Parser's first 64, or -1.
func (pr *Parser) colonPrefix(c string) int {
	if pr == nil {
		return -1
	}
	for i, p := range pr.colon[:min(len(pr.colon), 64)] {
		if len(c) > len(p) && c[len(p)] == ':' && strings.HasPrefix(c, p) {
			return i
		}
	}
	return -1
}

// ErrNotMetrics is wrapped by Parse when the body is not an exposition at all.
var ErrNotMetrics = errors.New("not a Prometheus metrics page")

// ErrJSON is wrapped by Parse when the body is JSON; it wraps ErrNotMetrics.
var ErrJSON = fmt.Errorf("%w: the body is JSON", ErrNotMetrics)

// Want reports whether a canonical sample name is needed. name may point
// into the body being read: Want must not keep it.
type Want func(name string) bool

// Parse reads body. contentType is the response's Content-Type header
// (OpenMetrics is recognised; anything else is read as the text format).
// Only samples for which want(canonical name) is true are kept; want nil
// keeps everything. The page keeps no reference into body, and Parse is
// safe for concurrent use. It shares nothing between pages and keeps names
// as written: a Parser shares label sets and folds colon prefixes.
func Parse(body []byte, contentType string, want Want) (*Page, error) {
	return (*Parser)(nil).Parse(body, contentType, want)
}

// Parse reads body like the package's Parse, sharing label sets with the
// other pages p has read. A nil p shares nothing.
func (pr *Parser) Parse(body []byte, contentType string, want Want) (*Page, error) {
	return pr.parse(body, contentType, want, nil)
}

// parse reads body. When lay is not nil, a page fastText reads becomes its
// layout, a page the text parser reads leaves it empty, and a page that
// fails leaves it as it was (see ParseWith).
func (pr *Parser) parse(body []byte, contentType string, want Want, lay *Layout) (*Page, error) {
	sc := getScratch()
	// Nothing the page keeps points into the scratch space or body: type
	// names are copied, and label sets are built into buffers of their own.
	defer putScratch(sc)
	filtered, fams, example, nseries, err := pr.filter(body, want, sc)
	if err != nil {
		return nil, err
	}
	p := pr.newPage()
	p.Families, p.Example, p.Escaped, p.Mixed = fams, example, sc.escaped != 0, sc.escaped&sc.colon != 0
	om := isOpenMetrics(contentType)
	if om && !bytes.HasSuffix(bytes.TrimRight(filtered, "\n"), []byte("# EOF")) {
		return nil, errors.New("openmetrics page ends without '# EOF': the body was cut short")
	}
	if !om && want != nil {
		var (
			sb = labels.NewScratchBuilder(8)
			ls simpleSeries
		)
		if all, ok := pr.fastText(filtered, want, p.types, &sb, &ls, p.all[:0], nseries, &p.shape); ok {
			p.all = all
			if lay != nil {
				lay.build(pr, body, filtered, p) // before byName sorts all
			}
			p.samples = byName(all, p.samples)
			return p, nil
		}
		clear(p.types) // the text parser reads the page again, from the start
		p.shape = LabelShape{}
	}
	st := labels.NewSymbolTable()
	var parser textparse.Parser
	if om {
		parser = textparse.NewOpenMetricsParser(filtered, st, textparse.WithOMParserSTSeriesSkipped())
	} else {
		parser = textparse.NewPromParser(filtered, st, false)
	}
	var (
		lset labels.Labels
		sb   = labels.NewScratchBuilder(8)
		ls   simpleSeries
		// all holds the page's samples in page order; Parse files them by
		// name at the end, in one array instead of a growing one per name.
		all = slices.Grow(p.all[:0], nseries)
	)
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse metrics: %w", err)
		}
		switch entry {
		case textparse.EntryType:
			name, typ := parser.Type()
			p.types[pr.canonicalTypeName(name)] = typ
		case textparse.EntrySeries:
			series, _, v := parser.Series()
			var (
				name   string
				is     *internedSeries
				sh     LabelShape
				key    uint64
				memo   *seriesMemo
				cached bool
			)
			// A series is written alike in both formats (OpenMetrics
			// only adds what follows the value: a timestamp, an
			// exemplar), so both share the cache and the simple path.
			if pr != nil {
				is, cached = pr.series.get(series)
			}
			if cached {
				// Seen on an earlier page (only simple series are cached).
				lset, name, sh, key, memo = is.labels, is.name, is.shape, is.key, &is.memo
			} else if ls.read(series) {
				// The common case, built without the parser's two copies
				// (of the series text and of the label set) and only for
				// wanted names.
				if want != nil && !want(pr.Canonical(yoloString(ls.name))) {
					continue
				}
				lset = ls.labels(&sb)
				name = pr.Canonical(lset.Get(model.MetricNameLabel))
				sh, key = shapeOf(lset), keyOf(lset)
				if pr != nil {
					is = &internedSeries{text: string(series), labels: lset, name: name, shape: sh, key: key}
					memo = &is.memo
					pr.series.put(is.text, is)
				}
			} else {
				parser.Labels(&lset)
				lset = lset.Copy()
				name = pr.Canonical(lset.Get(model.MetricNameLabel))
				sh, key = shapeOf(lset), keyOf(lset)
			}
			if want != nil && !want(name) {
				continue // e.g. a _bucket line of a kept family name
			}
			p.shape.widen(sh)
			all = append(all, Sample{Name: name, Labels: lset, Value: v, key: key, memo: memo})
		}
	}
	p.all = all
	p.samples = byName(all, p.samples)
	if lay != nil {
		lay.cur = nil // a page the text parser reads has no layout
	}
	return p, nil
}

// byName files samples by name, each name's in their order in all. The
// slices share all's array and are capped, so appending to one copies.
func byName(all []Sample, out map[string][]Sample) map[string][]Sample {
	// Engines write each name's samples in one run (a family's lines
	// together): then the runs are the slices, without sorting.
	runs := 0
	for i := range all {
		if i == 0 || all[i].Name != all[i-1].Name {
			runs++
		}
	}
	if out == nil {
		out = make(map[string][]Sample, runs)
	}
	grouped := true
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].Name == all[i].Name {
			j++
		}
		if _, dup := out[all[i].Name]; dup {
			grouped = false
			break
		}
		out[all[i].Name] = all[i:j:j]
		i = j
	}
	if grouped {
		return out
	}
	clear(out)
	slices.SortStableFunc(all, func(a, b Sample) int { return strings.Compare(a.Name, b.Name) })
	runs = 0
	for i := range all {
		if i == 0 || all[i].Name != all[i-1].Name {
			runs++
		}
	}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].Name == all[i].Name {
			j++
		}
		out[all[i].Name] = all[i:j:j]
		i = j
	}
	return out
}

// scratch is what filter needs while it reads one body, reused from one
// Parse to the next through scratchPool: growing a new filtered copy for
// every page was half the bytes a scrape allocated. Nothing in it outlives
// a Parse call; the map keys point into the body being read.
type scratch struct {
	// filtered receives the wanted lines.
	filtered []byte
	// seen holds the family names of TYPE lines.
	seen map[string]struct{}
	// decided caches want's answer per sample name.
	decided map[string]bool
	// name is room for a family name plus a suffix.
	name []byte
	// escaped and colon have bit i set when a wanted sample name of the
	// Parser's i-th colon prefix was written with an underscore, with its
	// colon (Page.Escaped, Page.Mixed).
	escaped, colon uint64
}

var scratchPool sync.Pool

// maxPooledFiltered is the largest filtered copy kept for reuse, in bytes;
// kvwatch keeps a few KB of a 10–200 KB page.
const maxPooledFiltered = 1 << 20

func getScratch() *scratch {
	if sc, ok := scratchPool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{seen: map[string]struct{}{}, decided: map[string]bool{}}
}

func putScratch(sc *scratch) {
	if cap(sc.filtered) > maxPooledFiltered {
		sc.filtered = nil
	}
	sc.filtered = sc.filtered[:0]
	sc.escaped, sc.colon = 0, 0
	// clear drops the keys, so a pooled scratch pins no old body.
	clear(sc.seen)
	clear(sc.decided)
	scratchPool.Put(sc)
}

// simpleSeries is a text-format series in its usual shape, split without
// copying: name{l1="v1",...} (or a bare name) with plain label names, values
// without escapes, no blanks, and none of the labels whose values the
// parser rewrites or that would clash with the name ("le", "quantile",
// "__name__"). Its strings point into the series bytes.
type simpleSeries struct {
	name  []byte
	pairs [][2][]byte
}

// read splits series and reports whether it has the simple shape; when it
// does not, the caller asks the parser.
func (s *simpleSeries) read(series []byte) bool {
	s.pairs = s.pairs[:0]
	i := bytes.IndexByte(series, '{')
	if i < 0 {
		s.name = series
		return validName(series)
	}
	s.name = series[:i]
	if !validName(s.name) {
		return false
	}
	rest := series[i+1:]
	for {
		if len(rest) == 1 && rest[0] == '}' {
			return true
		}
		j := 0
		for j < len(rest) && isLabelChar(rest[j], j == 0) {
			j++
		}
		if j == 0 || j+1 >= len(rest) || rest[j] != '=' || rest[j+1] != '"' {
			return false
		}
		ln := rest[:j]
		switch string(ln) {
		case "le", "quantile", model.MetricNameLabel:
			return false
		}
		rest = rest[j+2:]
		k := bytes.IndexAny(rest, "\"\\")
		if k < 0 || rest[k] != '"' {
			return false
		}
		s.pairs = append(s.pairs, [2][]byte{ln, rest[:k]})
		rest = rest[k+1:]
		if len(rest) > 0 && rest[0] == ',' {
			rest = rest[1:]
		} else if len(rest) == 0 || rest[0] != '}' {
			return false
		}
	}
}

// labels builds the label set the way the text parser does (name first,
// then the labels in order, sorted) into a string of its own.
func (s *simpleSeries) labels(sb *labels.ScratchBuilder) labels.Labels {
	sb.Reset()
	sb.Add(model.MetricNameLabel, yoloString(s.name))
	for _, p := range s.pairs {
		sb.Add(yoloString(p[0]), yoloString(p[1]))
	}
	sb.Sort()
	return sb.Labels()
}

func isLabelChar(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// yoloString views b as a string without copying; the string must not
// outlive b's contents.
func yoloString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// filter copies the lines of wanted families out of body, appending them
// to sc.filtered, and counts the families (with want nil it returns body
// itself). series counts the sample lines returned, a capacity hint. It
// rejects bodies that are clearly not expositions (HTML, JSON, binary) and
// lines whose metric name is malformed, with the line number.
func (pr *Parser) filter(body []byte, want Want, sc *scratch) (out []byte, families int, example []string, series int, err error) {
	if err := notMetrics(body); err != nil {
		return nil, 0, nil, 0, err
	}
	if want == nil {
		out = body
	} else {
		out = sc.filtered[:0]
		// Whatever out grows to goes back to the pool with sc.
		defer func() {
			if out != nil {
				sc.filtered = out[:0]
			}
		}()
	}
	seen := sc.seen
	// A family's HELP and TYPE lines come one after the other: the
	// previous meta line's answer is reused for the same family.
	var lastFamily string
	lastWant := false
	wantFamily := func(f string) bool {
		if f == lastFamily && lastFamily != "" {
			return lastWant
		}
		c := pr.Canonical(f)
		w := want(c)
		if !w {
			// c+"_total", built in sc's buffer: want does not keep it.
			sc.name = append(append(sc.name[:0], c...), "_total"...)
			w = want(yoloString(sc.name))
		}
		lastFamily, lastWant = f, w
		return w
	}
	// Sample lines of one family come in runs (a histogram's buckets above
	// all): a line that starts with the previous line's name followed by
	// '{', ' ' or '\t' has that same name, so its checks and the want
	// decision are reused. Decisions are cached per name for the rest.
	var lastName []byte
	lastKeep := false
	decided := sc.decided
	lineNo := 0
	for rest := body; len(rest) > 0; {
		lineNo++
		var line []byte
		line, rest = nextLine(rest)
		t := line
		for len(t) > 0 && (t[0] == ' ' || t[0] == '\t') {
			t = t[1:]
		}
		if n := len(lastName); n > 0 && len(t) > n && (t[n] == '{' || t[n] == ' ' || t[n] == '\t') && bytes.Equal(t[:n], lastName) &&
			(t[n] == '{' || valueStart(t[n:])) {
			if lastKeep {
				out = append(out, line...)
			}
			if lastKeep || want == nil {
				series++
			}
			continue
		}
		if len(bytes.TrimSpace(t)) == 0 {
			continue
		}
		if t[0] == '#' {
			f, nf := metaFields(t)
			if nf >= 3 && (string(f[1]) == "TYPE" || string(f[1]) == "HELP" || string(f[1]) == "UNIT") {
				if string(f[1]) == "TYPE" {
					if _, ok := seen[string(f[2])]; !ok {
						seen[yoloString(f[2])] = struct{}{}
						if len(example) < 5 {
							example = append(example, string(f[2]))
						}
					}
				}
				if want != nil && wantFamily(yoloString(f[2])) {
					out = append(out, line...)
				}
			} else if want != nil && nf >= 2 && string(f[1]) == "EOF" {
				out = append(out, line...)
			}
			continue
		}
		if t[0] == '{' { // UTF-8 quoted name: let the parser judge it
			if want != nil {
				out = append(out, line...)
			}
			series++
			continue
		}
		end := nameEnd(t)
		if end < 0 {
			end = len(bytes.TrimRight(t, "\r\n"))
		}
		name := t[:end]
		keep, decidedName := decided[string(name)] // a decided name is a valid one
		if (!decidedName && !validName(name)) || end == len(t) || (t[end] != '{' && !valueStart(t[end:])) {
			return nil, 0, nil, 0, fmt.Errorf("%w: line %d: %q is not a metric line", ErrNotMetrics, lineNo, safetext.Clip(string(bytes.TrimSpace(line)), 60))
		}
		if len(example) < 5 { // untyped pages: name a few families
			if fam := familyOf(string(name)); !containsString(example, fam) {
				example = append(example, fam)
			}
		}
		if !decidedName {
			if want != nil {
				c := pr.Canonical(yoloString(name))
				keep = want(c)
				if i := pr.colonPrefix(c); keep && i >= 0 {
					if c != yoloString(name) {
						sc.escaped |= 1 << i
					} else {
						sc.colon |= 1 << i
					}
				}
			}
			decided[yoloString(name)] = keep
		}
		lastName, lastKeep = name, keep
		if keep {
			out = append(out, line...)
		}
		if keep || want == nil {
			series++
		}
	}
	if want != nil && len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if len(seen) == 0 {
		families = len(example)
	}
	return out, max(families, len(seen)), example, series, nil
}

// notMetrics returns an error for a body that is clearly not an
// exposition: HTML or JSON.
func notMetrics(body []byte) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 {
		switch trimmed[0] {
		case '<':
			return fmt.Errorf("%w: the body is HTML; is the URL the engine's metrics endpoint?", ErrNotMetrics)
		case '{', '[':
			if json.Valid(trimmed) {
				return fmt.Errorf("%w; point kvwatch at the Prometheus endpoint (trtllm-serve: /prometheus/metrics)", ErrJSON)
			}
		}
	}
	return nil
}

// isOpenMetrics reports whether a Content-Type is OpenMetrics'.
func isOpenMetrics(contentType string) bool {
	return strings.Contains(contentType, "application/openmetrics-text")
}

// nextLine splits off the first line of b, its '\n' included when it has
// one.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

// metaFields is fields3 for a comment line, quicker for the usual
// "# HELP name ..." and "# TYPE name ...": their name ends at an ASCII
// blank; a byte beyond ASCII (a Unicode space, maybe) goes to fields3.
func metaFields(t []byte) (f [3][]byte, n int) {
	if len(t) > 7 && t[0] == '#' && t[1] == ' ' && t[6] == ' ' {
		if kw := t[2:6]; string(kw) == "HELP" || string(kw) == "TYPE" {
			k := 7
			for k < len(t) && t[k] < utf8.RuneSelf && !asciiSpace(t[k]) {
				k++
			}
			if k > 7 && (k == len(t) || asciiSpace(t[k])) {
				return [3][]byte{t[:1], kw, t[7:k]}, 3
			}
		}
	}
	return fields3(t)
}

// asciiSpace reports the ASCII bytes unicode.IsSpace is true for.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// fields3 returns the first three of bytes.Fields(b) and how many of them
// there are (at most 3), without allocating.
func fields3(b []byte) (f [3][]byte, n int) {
	start := -1
	for i := 0; i < len(b); {
		r, size := rune(b[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(b[i:])
		}
		if unicode.IsSpace(r) {
			if start >= 0 {
				f[n] = b[start:i]
				n++
				if n == 3 {
					return f, n
				}
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		f[n] = b[start:]
		n++
	}
	return f, n
}

// familyOf strips the histogram and counter sample suffixes.
func familyOf(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count", "_total", "_created"} {
		if strings.HasSuffix(name, s) {
			return strings.TrimSuffix(name, s)
		}
	}
	return name
}

// valueStart reports whether b (after a metric name without labels) starts,
// after blanks, with something that can begin a sample value.
func valueStart(b []byte) bool {
	b = bytes.TrimLeft(b, " \t")
	if len(b) == 0 {
		return false
	}
	switch c := b[0]; {
	case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == 'N', c == 'I', c == 'n', c == 'i':
		return true
	}
	return false
}

func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for i, c := range b {
		switch {
		case c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// Finite reports whether v is a usable number (not NaN or ±Inf).
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nameEnd is the index of the first '{', ' ' or '\t' in t, or -1
// (bytes.IndexAny builds its byte set at every call).
func nameEnd(t []byte) int {
	for i, c := range t {
		if c == '{' || c == ' ' || c == '\t' {
			return i
		}
	}
	return -1
}
