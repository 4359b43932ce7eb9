package expo

// The Parse and filter of before the allocation work (commit 1aa4146),
// verbatim but renamed: FuzzParseMatchesReference checks that the pooled,
// fast-path Parse returns exactly what this one does.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/kvwatch/kvwatch/internal/safetext"
)

// Parse reads body. contentType is the response's Content-Type header
// (OpenMetrics is recognised; anything else is read as the text format).
// Only samples for which want(canonical name) is true are kept; want nil
// keeps everything.
func parseReference(body []byte, contentType string, want Want) (*Page, error) {
	filtered, fams, example, err := filterReference(body, want)
	if err != nil {
		return nil, err
	}
	p := &Page{samples: map[string][]Sample{}, types: map[string]model.MetricType{}, Families: fams, Example: example}
	om := strings.Contains(contentType, "application/openmetrics-text")
	if om && !bytes.HasSuffix(bytes.TrimRight(filtered, "\n"), []byte("# EOF")) {
		return nil, fmt.Errorf("openmetrics page ends without '# EOF': the body was cut short")
	}
	st := labels.NewSymbolTable()
	var parser textparse.Parser
	if om {
		parser = textparse.NewOpenMetricsParser(filtered, st, textparse.WithOMParserSTSeriesSkipped())
	} else {
		parser = textparse.NewPromParser(filtered, st, false)
	}
	var lset labels.Labels
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
			p.types[testParser.Canonical(string(name))] = typ
		case textparse.EntrySeries:
			_, _, v := parser.Series()
			parser.Labels(&lset)
			name := testParser.Canonical(lset.Get(model.MetricNameLabel))
			if want != nil && !want(name) {
				continue // e.g. a _bucket line of a kept family name
			}
			p.samples[name] = append(p.samples[name], Sample{Name: name, Labels: lset.Copy(), Value: v})
		}
	}
	return p, nil
}

// filter copies the lines of wanted families out of body and counts the
// families. It rejects bodies that are clearly not expositions (HTML, JSON,
// binary) and lines whose metric name is malformed, with the line number.
func filterReference(body []byte, want Want) (out []byte, families int, example []string, err error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 {
		switch trimmed[0] {
		case '<':
			return nil, 0, nil, fmt.Errorf("%w: the body is HTML; is the URL the engine's metrics endpoint?", ErrNotMetrics)
		case '{', '[':
			if json.Valid(trimmed) {
				return nil, 0, nil, fmt.Errorf("%w: the body is JSON; point kvwatch at the Prometheus endpoint (trtllm-serve: /prometheus/metrics)", ErrNotMetrics)
			}
		}
	}
	if want == nil {
		out = body
	} else {
		out = make([]byte, 0, len(body)/8)
	}
	seen := map[string]struct{}{}
	wantFamily := func(f string) bool {
		c := testParser.Canonical(f)
		return want(c) || want(c+"_total")
	}
	// Sample lines of one family come in runs (a histogram's buckets above
	// all): a line that starts with the previous line's name followed by
	// '{', ' ' or '\t' has that same name, so its checks and the want
	// decision are reused. Decisions are cached per name for the rest.
	var lastName []byte
	lastKeep := false
	decided := map[string]bool{}
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
			continue
		}
		if len(bytes.TrimSpace(t)) == 0 {
			continue
		}
		if t[0] == '#' {
			f := bytes.Fields(t)
			if len(f) >= 3 && (string(f[1]) == "TYPE" || string(f[1]) == "HELP" || string(f[1]) == "UNIT") {
				name := string(f[2])
				if string(f[1]) == "TYPE" {
					if _, ok := seen[name]; !ok {
						seen[name] = struct{}{}
						if len(example) < 5 {
							example = append(example, name)
						}
					}
				}
				if want != nil && wantFamily(name) {
					out = append(out, line...)
				}
			} else if want != nil && len(f) >= 2 && string(f[1]) == "EOF" {
				out = append(out, line...)
			}
			continue
		}
		if t[0] == '{' { // UTF-8 quoted name: let the parser judge it
			if want != nil {
				out = append(out, line...)
			}
			continue
		}
		end := bytes.IndexAny(t, "{ \t")
		if end < 0 {
			end = len(bytes.TrimRight(t, "\r\n"))
		}
		name := t[:end]
		if !validName(name) || end == len(t) || (t[end] != '{' && !valueStart(t[end:])) {
			return nil, 0, nil, fmt.Errorf("%w: line %d: %q is not a metric line", ErrNotMetrics, lineNo, safetext.Clip(string(bytes.TrimSpace(line)), 60))
		}
		if len(example) < 5 { // untyped pages: name a few families
			if fam := familyOf(string(name)); !containsString(example, fam) {
				example = append(example, fam)
			}
		}
		keep, ok := decided[string(name)]
		if !ok {
			keep = want != nil && want(testParser.Canonical(string(name)))
			decided[string(name)] = keep
		}
		lastName, lastKeep = name, keep
		if keep {
			out = append(out, line...)
		}
	}
	if want != nil && len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	if len(seen) == 0 {
		families = len(example)
	}
	return out, max(families, len(seen)), example, nil
}
