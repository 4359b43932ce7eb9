package expo

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/model/value"
)

// fastText reads the filtered lines of a text-format page without the
// text parser's lexer when the lines have the shapes engines write:
//
//	# HELP name text
//	# TYPE name counter|gauge|histogram|summary|untyped
//	name{l1="v1",...} value
//	name value
//
// with single blanks, legacy names, label values without escapes, no
// timestamp, and none of the labels the parser rewrites (see
// simpleSeries). For those lines the text parser returns exactly this (the
// same series text, labels, canonical NaN and float syntax, see
// textparse.PromParser). Any other sample line is read alone by the text
// parser. ok is false, and the caller parses the whole page with the text
// parser (which also words the errors), for a line it cannot read that
// way, any other comment, or invalid UTF-8. It adds the TYPE
// lines to types (the caller empties it when ok is false). lines must end
// in '\n' (filter makes sure of it).
func (pr *Parser) fastText(lines []byte, want Want, types map[string]model.MetricType, sb *labels.ScratchBuilder, ls *simpleSeries, all []Sample, n int, shape *LabelShape) ([]Sample, bool) {
	all = slices.Grow(all[:0], n)
	var (
		st *labels.SymbolTable
		// lastType is the last TYPE line: the parser rewrites a
		// histogram's le values by the type it last read.
		lastType []byte
		slowBuf  []byte
		// The series cache is read under one read lock for the page (not
		// one a line); what the page adds is put once the lock is let go.
		puts []*internedSeries
		// lastName, lastWant: want's answer for the previous sample's
		// name (a family's samples come in a run).
		lastName string
		lastWant bool
	)
	if pr != nil {
		pr.series.mu.RLock()
		defer func() {
			pr.series.mu.RUnlock()
			for _, is := range puts {
				pr.series.put(is.text, is)
			}
		}()
	}
	for rest := lines; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return nil, false
		}
		line, withNL := rest[:i], rest[:i+1]
		rest = rest[i+1:]
		if len(line) == 0 {
			return nil, false
		}
		if line[0] == '#' {
			isType, ok := pr.fastMeta(line, types)
			if !ok {
				return nil, false
			}
			if isType {
				lastType = withNL
			}
			continue
		}
		var (
			name  string
			lset  labels.Labels
			sh    LabelShape
			key   uint64
			memo  *seriesMemo
			v     float64
			fast  bool
			found bool
		)
		// The usual line: a series seen on an earlier page, then one blank
		// and the value. A key of the cache is a simple series that was
		// checked when it was built, so finding it checks the line's
		// series text.
		if sp := bytes.LastIndexByte(line, ' '); sp > 0 {
			var is *internedSeries
			if is, found = pr.cachedSeriesRLocked(line[:sp]); found {
				if v, fast = fastValue(line[sp+1:]); fast {
					lset, name, sh, key, memo = is.labels, is.name, is.shape, is.key, &is.memo
				}
			}
		}
		if !found {
			end := seriesEnd(line)
			var val []byte
			if end >= 0 && end+1 < len(line) && line[end] == ' ' {
				val = line[end+1:]
			}
			v, fast = fastValue(val)
			if fast && utf8.Valid(line[:end]) && ls.read(line[:end]) {
				if want != nil && !want(pr.Canonical(yoloString(ls.name))) {
					continue
				}
				lset = ls.labels(sb)
				name = pr.Canonical(lset.Get(model.MetricNameLabel))
				sh, key = shapeOf(lset), keyOf(lset)
				if pr != nil {
					is := &internedSeries{text: string(line[:end]), labels: lset, name: name, shape: sh, key: key}
					memo = &is.memo
					puts = append(puts, is)
				}
			} else {
				fast = false
			}
		}
		if !fast {
			// A series the text parser rewrites (le, quantile), an
			// escape, a timestamp, odd blanks: the parser reads this line
			// alone, as it would within the page (it keeps no state from
			// one line to the next). An error there is worded by the
			// parser reading the whole page.
			slowBuf = append(append(slowBuf[:0], lastType...), withNL...)
			smp, keep, err := pr.slowLine(slowBuf, len(lastType) > 0, want, &st)
			if err != nil {
				return nil, false
			}
			if keep {
				all = append(all, smp)
				shape.widen(shapeOf(smp.Labels))
			}
			continue
		}
		if want != nil {
			if name != lastName || lastName == "" {
				lastName, lastWant = name, want(name)
			}
			if !lastWant {
				continue
			}
		}
		all = append(all, Sample{Name: name, Labels: lset, Value: v, key: key, memo: memo})
		shape.widen(sh)
	}
	return all, true
}

// fastValue parses a sample value the way the text parser does, when it is
// a lone float token (no timestamp after it) of the syntax it accepts.
func fastValue(val []byte) (float64, bool) {
	if len(val) == 0 {
		return 0, false
	}
	for _, c := range val {
		switch c {
		case ' ', '{', 'p', 'P', '_':
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(yoloString(val), 64)
	if err != nil {
		return 0, false
	}
	if math.IsNaN(v) {
		v = math.Float64frombits(value.NormalNaN)
	}
	return v, true
}

// slowLine reads one sample line (ending in '\n') with the text parser,
// after the TYPE line before it when typed; keep is false for a sample
// want does not keep.
func (pr *Parser) slowLine(lines []byte, typed bool, want Want, st **labels.SymbolTable) (smp Sample, keep bool, err error) {
	if *st == nil {
		*st = labels.NewSymbolTable()
	}
	parser := textparse.NewPromParser(lines, *st, false)
	if typed {
		if entry, err := parser.Next(); err != nil || entry != textparse.EntryType {
			return Sample{}, false, errors.New("not a type line")
		}
	}
	entry, err := parser.Next()
	if err != nil {
		return Sample{}, false, err
	}
	if entry != textparse.EntrySeries {
		return Sample{}, false, errors.New("not a sample line")
	}
	_, _, v := parser.Series()
	var lset labels.Labels
	parser.Labels(&lset)
	lset = lset.Copy()
	if _, err := parser.Next(); !errors.Is(err, io.EOF) {
		return Sample{}, false, errors.New("more than one entry in a line")
	}
	name := pr.Canonical(lset.Get(model.MetricNameLabel))
	if want != nil && !want(name) {
		return Sample{}, false, nil
	}
	return Sample{Name: name, Labels: lset, Value: v, key: keyOf(lset)}, true, nil
}

// cachedSeriesRLocked looks a series text up in the cache; the caller
// holds its read lock.
func (pr *Parser) cachedSeriesRLocked(series []byte) (*internedSeries, bool) {
	if pr == nil {
		return nil, false
	}
	v, ok := pr.series.m[string(series)]
	return v, ok
}

// fastMeta files a "# TYPE name type" line in types (isType) and accepts
// a "# HELP name text" line, both in the exact shape fastText reads.
func (pr *Parser) fastMeta(line []byte, types map[string]model.MetricType) (isType, ok bool) {
	var help bool
	switch {
	case bytes.HasPrefix(line, []byte("# HELP ")):
		help = true
	case bytes.HasPrefix(line, []byte("# TYPE ")):
	default:
		return false, false
	}
	rest := line[len("# TYPE "):]
	sp := bytes.IndexByte(rest, ' ')
	if sp <= 0 || !validName(rest[:sp]) {
		return false, false
	}
	name, text := rest[:sp], rest[sp+1:]
	if help {
		// Any text of valid UTF-8: the parser skips NUL bytes in it, and
		// takes the rest up to the line's end.
		return false, utf8.Valid(text)
	}
	var t model.MetricType
	switch string(text) {
	case "counter":
		t = model.MetricTypeCounter
	case "gauge":
		t = model.MetricTypeGauge
	case "histogram":
		t = model.MetricTypeHistogram
	case "summary":
		t = model.MetricTypeSummary
	case "untyped":
		t = model.MetricTypeUnknown
	default:
		return false, false
	}
	types[pr.canonicalTypeName(name)] = t
	return true, true
}

// seriesEnd returns the length of the series text at the start of line
// (name, or name{...} through the closing brace, label values without
// escapes), or -1 when it is not of that shape.
func seriesEnd(line []byte) int {
	i := 0
	for i < len(line) && line[i] != '{' && line[i] != ' ' {
		i++
	}
	if !validName(line[:i]) {
		return -1
	}
	if i == len(line) || line[i] == ' ' {
		return i
	}
	i++ // '{'
	for {
		if i >= len(line) {
			return -1
		}
		if line[i] == '}' {
			return i + 1
		}
		j := i
		for j < len(line) && isLabelChar(line[j], j == i) {
			j++
		}
		if j == i || j+1 >= len(line) || line[j] != '=' || line[j+1] != '"' {
			return -1
		}
		k := quoteOrEscape(line[j+2:])
		if k < 0 || line[j+2+k] != '"' {
			return -1
		}
		i = j + 2 + k + 1
		if i < len(line) && line[i] == ',' {
			i++
		} else if i >= len(line) || line[i] != '}' {
			return -1
		}
	}
}

// quoteOrEscape is the index of the first '"' or '\\' in b, or -1.
func quoteOrEscape(b []byte) int {
	for i, c := range b {
		if c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}
