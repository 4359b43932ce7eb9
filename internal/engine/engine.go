// Package engine holds one adapter per inference engine, each a pure
// function from a parsed /metrics page (and, for llama.cpp, its /slots and
// /props bodies) to the normalized kv.Server. Adapters are listed once, in
// detection order, in Registry. The package does no I/O, reads no clock and
// keeps no state.
package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Input is what an adapter reads.
type Input struct {
	Page *expo.Page
	// Extra holds the bodies of the extra endpoints the adapter asked for
	// (ExtraPaths), by path; a path is missing when it could not be read.
	Extra map[string][]byte
}

// Adapter reads one engine's metrics.
type Adapter interface {
	// Name is the engine's name in output and in --engine, e.g. "sglang".
	Name() string
	// MetricNames lists every canonical sample name the adapter reads.
	MetricNames() []string
	// Detect reports whether the page was written by this engine.
	Detect(p *expo.Page) bool
	// Normalize reads the input into a server; ranks rolled up.
	Normalize(in Input) (kv.Server, error)
}

// ExtraPaths is implemented by adapters that need more than /metrics.
type ExtraPaths interface {
	ExtraPaths() []string
}

// MetricsPath is implemented by adapters whose engine serves Prometheus
// metrics somewhere other than /metrics.
type MetricsPath interface {
	MetricsPath() string
}

// DisabledHint is implemented by adapters to say how to turn their
// engine's metrics on, for a 404 from /metrics.
type DisabledHint interface {
	DisabledHint() string
}

// Registry is the ordered list of adapters and the union of the names they read.
type Registry struct {
	adapters []Adapter
	wanted   map[string]struct{}
}

// NewRegistry returns the registry of every adapter, in detection order:
// specific engines before those whose names others also pass through.
func NewRegistry() *Registry {
	return newRegistry(
		SGLang{},
		SGLangRouter{},
		VLLM{},
		TGI{},
		Triton{},
		LlamaCpp{},
		TRTLLMServe{},
		LMDeploy{},
		Dynamo{},
	)
}

func newRegistry(adapters ...Adapter) *Registry {
	r := &Registry{adapters: adapters, wanted: map[string]struct{}{}}
	for _, a := range adapters {
		for _, n := range a.MetricNames() {
			r.wanted[n] = struct{}{}
		}
	}
	return r
}

// Adapters returns the adapters in detection order.
func (r *Registry) Adapters() []Adapter { return r.adapters }

// Want reports whether any adapter reads the canonical sample name; pass it
// to expo.Parse.
func (r *Registry) Want(name string) bool {
	_, ok := r.wanted[name]
	return ok
}

// Names returns every engine name, in detection order.
func (r *Registry) Names() []string {
	out := make([]string, len(r.adapters))
	for i, a := range r.adapters {
		out[i] = a.Name()
	}
	return out
}

// ByName returns the adapter called name.
func (r *Registry) ByName(name string) (Adapter, error) {
	for _, a := range r.adapters {
		if a.Name() == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("unknown engine %q; want one of %s", name, strings.Join(r.Names(), ", "))
}

// Detect returns the first adapter that recognises the page.
func (r *Registry) Detect(p *expo.Page) (Adapter, error) {
	for _, a := range r.adapters {
		if a.Detect(p) {
			return a, nil
		}
	}
	msg := fmt.Sprintf("no known engine metrics among the page's %d families", p.Families)
	if len(p.Example) > 0 {
		msg += fmt.Sprintf(" (e.g. %s)", strings.Join(p.Example, ", "))
	}
	return nil, fmt.Errorf("%s; kvwatch reads %s; if this is one of them behind renamed metrics, set engine: in the config or --engine", msg, strings.Join(r.Names(), ", "))
}

// rankOf reads the rank labels of a sample.
func rankOf(s expo.Sample, dp, tp, pp string) kv.RankID {
	id := kv.RankID{}
	if dp != "" {
		id.DP = s.Labels.Get(dp)
	}
	if tp != "" {
		id.TP = s.Labels.Get(tp)
	}
	if pp != "" {
		id.PP = s.Labels.Get(pp)
	}
	return id
}

// ranks collects per-rank signals while an adapter reads a page.
type ranks struct {
	order []kv.RankID
	by    map[kv.RankID]*kv.Signals
}

func newRanks() *ranks { return &ranks{by: map[kv.RankID]*kv.Signals{}} }

func (r *ranks) get(id kv.RankID) *kv.Signals {
	s, ok := r.by[id]
	if !ok {
		s = &kv.Signals{}
		r.by[id] = s
		r.order = append(r.order, id)
	}
	return s
}

// list returns the collected ranks.
func (r *ranks) list() []kv.Rank {
	out := make([]kv.Rank, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, kv.Rank{RankID: id, Signals: *r.by[id]})
	}
	return out
}

// combineFn merges two samples of the same rank: max for gauges that TP
// ranks duplicate, sum for counters split by another label.
type combineFn func(a, b float64) float64

func maxf(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}
func sumf(a, b float64) float64 { return a + b }

// read sets *field(rank) for every sample of name that keep accepts,
// combining samples of the same rank with fn. NaN and ±Inf samples are
// skipped (unknown, not zero). It reports whether any sample was used.
func (r *ranks) read(p *expo.Page, name string, rankFn func(expo.Sample) kv.RankID, keep func(expo.Sample) bool, fn combineFn, field func(*kv.Signals) *kv.Value, mk func(float64) kv.Value) bool {
	used := false
	for _, s := range p.Samples(name) {
		if keep != nil && !keep(s) {
			continue
		}
		if !expo.Finite(s.Value) {
			continue
		}
		f := field(r.get(rankFn(s)))
		if f.OK() {
			*f = mk(fn(f.V, s.Value))
		} else {
			*f = mk(s.Value)
		}
		used = true
	}
	return used
}

// firstLabel returns the first non-empty value of label among the samples
// of the names given, in order.
func firstLabel(p *expo.Page, label string, names ...string) string {
	for _, n := range names {
		for _, s := range p.Samples(n) {
			if v := s.Labels.Get(label); v != "" {
				return v
			}
		}
	}
	return ""
}

// sortedUnique returns the sorted distinct non-empty values.
func sortedUnique(vals []string) []string {
	m := map[string]struct{}{}
	for _, v := range vals {
		if v != "" {
			m[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
