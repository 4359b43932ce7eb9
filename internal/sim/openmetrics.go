package sim

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyClient is the prometheus_client release a Python engine serves its
// page with (prometheus_client's make_asgi_app answers by choose_encoder):
// it decides which format and escaping the engine answers an Accept
// header with.
type pyClient int

const (
	// pyTextOnly: the text format 0.0.4 whatever the scraper asks.
	pyTextOnly pyClient = iota
	// pyClient023: 0.23 on, choose_encoder with escaping: the first
	// OpenMetrics entry of version 1.0.0 or later answers in its escaping
	// (underscores when it names none), one without a version in
	// underscores; a text/plain entry of version 1.0.0 or later answers
	// the text format in its escaping; else the text format 0.0.4.
	pyClient023
)

// Content types prometheus_client answers with.
const (
	ctText0_0_4 = "text/plain; version=0.0.4; charset=utf-8"
	ctText1_0_0 = "text/plain; version=1.0.0; charset=utf-8"
	ctOM1_0_0   = "application/openmetrics-text; version=1.0.0; charset=utf-8"
)

// Name escapings (prometheus_client.openmetrics.exposition).
const (
	escAllowUTF8   = "allow-utf-8"
	escUnderscores = "underscores"
	escDots        = "dots"
	escValues      = "values"
)

// answer is the format a request gets: OpenMetrics or the text format,
// names escaped by escaping ("" and allow-utf-8: as written).
type answer struct {
	om          bool
	escaping    string
	contentType string
}

// negotiate answers accept as the client's choose_encoder does.
func (c pyClient) negotiate(accept string) answer {
	text := answer{contentType: ctText0_0_4}
	if c != pyClient023 {
		return text
	}
	for _, entry := range strings.Split(accept, ",") {
		toks := strings.Split(entry, ";")
		media := strings.TrimSpace(toks[0])
		switch {
		case media == "application/openmetrics-text":
			version, escaping := acceptParams(toks)
			if version == "" {
				return answer{om: true, escaping: escUnderscores, contentType: ctOM1_0_0}
			}
			if versionAtLeast1(version) {
				return answer{om: true, escaping: escaping, contentType: "application/openmetrics-text; version=" + version + "; charset=utf-8; escaping=" + escaping}
			}
		case media == "text/plain":
			if version, escaping := acceptParams(toks); versionAtLeast1(version) {
				return answer{escaping: escaping, contentType: ctText1_0_0 + "; escaping=" + escaping}
			}
		}
	}
	return text
}

// acceptParams returns an Accept entry's version and escaping (underscores
// unless it names a known one), as _get_version and _get_escaping do.
func acceptParams(toks []string) (version, escaping string) {
	escaping = escUnderscores
	for _, t := range toks[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(t), "=")
		if !ok {
			continue
		}
		switch k {
		case "version":
			version = v
		case "escaping":
			if slices.Contains([]string{escAllowUTF8, escUnderscores, escDots, escValues}, v) {
				escaping = v
			}
		}
	}
	return version, escaping
}

// versionAtLeast1 reports whether a version string is 1.0.0 or later.
func versionAtLeast1(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 1
}

// rewrite writes the text page that prometheus_client's generate_latest
// wrote (multiprocess mode: no _created series) as a gets it: OpenMetrics
// (a counter's HELP and TYPE name the family without _total; # EOF last)
// and sample names escaped. HELP and TYPE names are escaped with the
// metric-name rules (a colon is valid), sample names with the label-name
// rules (a colon is not), as prometheus_client does: with underscores,
// "# TYPE sglang:x gauge" stays and its sample is sglang_x.
func (a answer) rewrite(text []byte) []byte {
	if !a.om && (a.escaping == "" || a.escaping == escAllowUTF8) {
		return text
	}
	counters := map[string]bool{}
	for rest := text; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		if f := strings.Fields(string(line)); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" && f[3] == "counter" {
			counters[f[2]] = true
		}
	}
	out := make([]byte, 0, len(text)+len(text)/8)
	for rest := text; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		if bytes.HasPrefix(line, []byte("# HELP ")) || bytes.HasPrefix(line, []byte("# TYPE ")) {
			kw := string(line[:7])
			name, tail, _ := strings.Cut(string(line[7:]), " ")
			if a.om && counters[name] {
				name = strings.TrimSuffix(name, "_total")
			}
			if a.om && kw == "# HELP " {
				tail = strings.ReplaceAll(tail, `"`, `\"`)
			}
			out = append(out, kw...)
			out = append(out, escapeMetricName(name, a.escaping)...)
			out = append(out, ' ')
			out = append(out, tail...)
			out = append(out, '\n')
			continue
		}
		end := bytes.IndexAny(line, "{ ")
		if end < 0 {
			end = len(line)
		}
		out = append(out, escapeName(string(line[:end]), a.escaping, isLabelNameRune)...)
		out = append(out, line[end:]...)
		out = append(out, '\n')
	}
	if a.om {
		out = append(out, "# EOF\n"...)
	}
	return out
}

// cutLine splits off the first line of b without its '\n'.
func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// escapeMetricName is prometheus_client's escape_metric_name for a name
// that needs no quotes (every name the simulator writes is a legacy one).
func escapeMetricName(name, escaping string) string {
	if escaping == escDots {
		return escapeName(name, escaping, isMetricNameRune)
	}
	return name // allow-utf-8, underscores and values keep a legacy name
}

// escapeName is prometheus_client's _escape of a name: valid runes by
// valid, the others replaced as the escaping says.
func escapeName(name, escaping string, valid func(r rune, i int) bool) string {
	var b strings.Builder
	switch escaping {
	case escUnderscores:
		for i, r := range name {
			if valid(r, i) {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	case escDots:
		for i, r := range name {
			switch {
			case r == '_':
				b.WriteString("__")
			case r == '.':
				b.WriteString("_dot_")
			case valid(r, i):
				b.WriteRune(r)
			default:
				b.WriteString("__")
			}
		}
	case escValues:
		b.WriteString("U__")
		for i, r := range name {
			switch {
			case r == '_':
				b.WriteString("__")
			case valid(r, i):
				b.WriteRune(r)
			case r == utf8.RuneError:
				b.WriteString("_FFFD_")
			default:
				b.WriteString("_" + strconv.FormatInt(int64(r), 16) + "_")
			}
		}
	default:
		return name
	}
	return b.String()
}

func isLabelNameRune(r rune, i int) bool {
	return r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
}

func isMetricNameRune(r rune, i int) bool { return r == ':' || isLabelNameRune(r, i) }
