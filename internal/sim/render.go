package sim

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// numStyle is how an engine's exporter prints numbers.
type numStyle int

const (
	pyNum   numStyle = iota // Python prometheus_client: repr(float): 0.0, 2581504.0, 0.28, 1e-05
	cppNum                  // llama.cpp: std::ostream default, 6 significant digits: 4806, 4.56819
	rustNum                 // Rust metrics-exporter-prometheus / prometheus-cpp: 0, 512, 0.4875
)

// page builds one exposition body.
type page struct {
	b     []byte
	style numStyle
}

func (w *page) family(name, help, typ string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, help...)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// sample writes name{labels} value; labels is a pre-rendered `k="v",...` list.
func (w *page) sample(name, labels string, v float64) {
	w.b = append(w.b, name...)
	if labels != "" {
		w.b = append(w.b, '{')
		w.b = append(w.b, labels...)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ' ')
	w.b = w.num(w.b, v)
	w.b = append(w.b, '\n')
}

func (w *page) num(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	switch w.style {
	case pyNum:
		return pyFloat(b, v)
	case cppNum:
		return strconv.AppendFloat(b, v, 'g', 6, 64)
	default:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.AppendInt(b, int64(v), 10)
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
}

// pyFloat formats like Python's repr(float).
func pyFloat(b []byte, v float64) []byte {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e16:
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
		return append(b, ".0"...)
	case a >= 1e-4 && a < 1e16:
		return strconv.AppendFloat(b, v, 'f', -1, 64)
	default:
		return strconv.AppendFloat(b, v, 'e', -1, 64)
	}
}

// labels renders k, v pairs as `k="v",...`; sorted when sortKeys (Python
// multiprocess mode and Go exporters sort, single-process Python keeps
// declaration order).
func labels(sortKeys bool, kv ...string) string {
	type pair struct{ k, v string }
	ps := make([]pair, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, pair{kv[i], kv[i+1]})
	}
	if sortKeys {
		sort.Slice(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	}
	var sb strings.Builder
	for i, p := range ps {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(p.k)
		sb.WriteString(`="`)
		sb.WriteString(escapeLabel(p.v))
		sb.WriteByte('"')
	}
	return sb.String()
}

func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// histogram writes a histogram's _bucket/_sum/_count (and _created if
// created > 0) samples. leFirst puts le before the other labels (sorted
// exporters), else last (prometheus_client single process).
func (w *page) histogram(name, lbls string, h *histogram, leFirst bool, created float64) {
	var cum int64
	for i := 0; i <= len(h.bounds); i++ {
		cum += h.counts[i]
		le := "+Inf"
		if i < len(h.bounds) {
			le = string(pyFloat(nil, h.bounds[i]))
			if w.style != pyNum {
				le = string(w.num(nil, h.bounds[i]))
			}
		}
		l := `le="` + le + `"`
		if leFirst {
			l = join(l, lbls)
		} else {
			l = join(lbls, l)
		}
		w.sample(name+"_bucket", l, float64(cum))
	}
	w.sample(name+"_count", lbls, float64(h.count))
	w.sample(name+"_sum", lbls, h.sum)
	if created > 0 {
		w.sample(name+"_created", lbls, created)
	}
}

// render writes a server's /metrics body from a snapshot.
func render(p *snapshot) []byte { return p.srv.eng.render(p) }
