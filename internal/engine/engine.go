// Package engine holds one adapter per inference engine, each a pure
// function from a parsed /metrics page (and, for llama.cpp, its /slots and
// /props bodies) to the normalized kv.Server. Adapters are listed once, in
// detection order, in Registry. The package does no I/O, reads no clock and
// keeps no state.
package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Spec declares one engine: what its file knows. The registry derives the
// Adapter from it (Name, MetricNames, Detect, DisabledHint, MetricsPath,
// ExtraPaths), so an engine's file holds its names and its Normalize only.
type Spec struct {
	// Name is the engine's name in output and in --engine.
	Name string
	// DisabledHint says how to turn the engine's metrics on, or where the
	// engine serves them (for a failed scrape that Answer recognizes, or of
	// a target that forces the engine).
	DisabledHint string
	// Answer recognizes what the engine answers on a metrics path instead
	// of a page (answers.go): its answer while its metrics are off, or its
	// API port's answer when it serves metrics on another port; nil when
	// it has neither.
	Answer func(status int, body []byte) AnswerKind
	// MetricsPort is the default port of the listener the engine serves
	// metrics on, when that is not its API port; 0 otherwise.
	MetricsPort int
	// MetricsPath is where the engine serves Prometheus metrics, when not
	// /metrics.
	MetricsPath string
	// ExtraPaths are further endpoints the adapter reads (Input.Extra).
	ExtraPaths []string
	// Detect: the page is this engine's when any of these canonical names
	// is present.
	Detect []string
	// Reads are the other canonical names Normalize reads (MetricNames is
	// Detect plus Reads).
	Reads []string
	// Normalize reads the input into a server, ranks rolled up. It is
	// pure: no I/O, no clock, no state.
	Normalize func(Input) (kv.Server, error)
}

// Input is what an adapter reads.
type Input struct {
	Page *expo.Page
	// Extra holds the bodies of the extra endpoints the adapter asked for
	// (ExtraPaths), by path; a path is missing when it could not be read.
	Extra map[string][]byte
	// KVUnified is the target's kv_unified: whether a llama.cpp server's
	// slots share one KV cache (true) or each hold their own (false);
	// nil when the config does not say. Other engines ignore it.
	KVUnified *bool
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
// engine's metrics on, or where the engine serves them.
type DisabledHint interface {
	DisabledHint() string
}

// Registry is the ordered list of adapters and the union of the names they read.
type Registry struct {
	adapters []Adapter
	specs    []Spec
	wanted   map[string]struct{}
}

// NewRegistry returns the registry of every adapter, in detection order:
// specific engines before those whose names others also pass through.
func NewRegistry() *Registry {
	return newRegistry(
		sglangSpec,
		sglangRouterSpec,
		vllmSpec,
		tgiSpec,
		tritonSpec,
		llamacppSpec,
		trtllmServeSpec,
		lmdeploySpec,
		lmcacheSpec,
		dynamoSpec,
	)
}

// ProcessStart is the start time of the process that writes a page
// (prometheus_client's process collector, on the Python engines' pages):
// read beside the adapters' names, for the scraper to notice a restart.
const ProcessStart = "process_start_time_seconds"

func newRegistry(specs ...Spec) *Registry {
	r := &Registry{specs: specs, wanted: map[string]struct{}{ProcessStart: {}}}
	for _, s := range specs {
		a := adapterOf(s)
		r.adapters = append(r.adapters, a)
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

// Detect returns the adapter for the page.
//
// The rule when a page matches several engines (a Dynamo worker passes its
// engine's sglang:* or vllm:* families through next to its own
// dynamo_component_* ones; a vLLM process may carry LMCache's): the first
// match in detection order is the engine, since the engines come before
// those that pass others' names through. The returned adapter reads the
// page as that engine, takes the KV signals (capacity, used, evictable,
// usage, spread) from the next matching engine that has them when the first
// has none, and adds a kv.WarnTwoEngines warning naming both.
func (r *Registry) Detect(p *expo.Page) (Adapter, error) {
	first := -1
	var match []Spec // with more than one match only: most pages have one
	for i, a := range r.adapters {
		switch {
		case !a.Detect(p):
		case first < 0:
			first = i
		default:
			if match == nil {
				match = append(match, r.specs[first])
			}
			match = append(match, r.specs[i])
		}
	}
	switch {
	case first < 0:
		msg := fmt.Sprintf("no known engine metrics among the page's %d families", p.Families)
		if len(p.Example) > 0 {
			msg += fmt.Sprintf(" (e.g. %s)", strings.Join(p.Example, ", "))
		}
		return nil, fmt.Errorf("%s; kvwatch reads %s; if this is one of them behind renamed metrics, set engine: in the config or --engine", msg, strings.Join(r.Names(), ", "))
	case match == nil:
		return r.adapters[first], nil
	}
	return adapterOf(several(match)), nil
}

// several is the spec of a page that matches every spec in match (in
// detection order): read as the first, KV from the first that has it.
func several(match []Spec) Spec {
	first := match[0]
	names := make([]string, len(match))
	for i, m := range match {
		names[i] = m.Name
	}
	s := first
	s.Normalize = func(in Input) (kv.Server, error) {
		srv, err := first.Normalize(in)
		if err != nil {
			return srv, err
		}
		from := first.Name
		// An asleep engine has released its KV: another engine's KV on
		// its page is not its.
		if !hasKV(&srv) && !srv.Explained(kv.UnknownAsleep) {
			for _, m := range match[1:] {
				o, err := m.Normalize(in)
				if err != nil || !hasKV(&o) {
					continue
				}
				srv.Capacity, srv.Used, srv.Evictable = o.Capacity, o.Used, o.Evictable
				srv.UsageRatio, srv.Spread = o.UsageRatio, o.Spread
				from = m.Name
				break
			}
		}
		kvFrom := "KV from " + from
		switch {
		case srv.Explained(kv.UnknownAsleep):
			kvFrom = "no KV: " + first.Name + " is asleep"
		case !hasKV(&srv):
			kvFrom = "no engine on the page reports KV"
		}
		srv.Warn(kv.WarnTwoEngines, "page matches %s; read as %s (the first in detection order), %s",
			strings.Join(names, " and "), first.Name, kvFrom)
		return srv, nil
	}
	return s
}

// hasKV reports whether a server knows any of its KV pool.
func hasKV(s *kv.Server) bool {
	return s.Capacity.OK() || s.Used.OK() || s.UsageRatio.OK()
}

// adapter is the Adapter a Spec derives; pathAdapter, extraAdapter and
// pathExtraAdapter add the optional interfaces a spec asks for, so a type
// assertion finds exactly what the engine has.
type adapter struct {
	s Spec
	// names is MetricNames, worked out once.
	names []string
}

type pathAdapter struct{ adapter }

type extraAdapter struct{ adapter }

type pathExtraAdapter struct{ adapter }

func adapterOf(s Spec) Adapter {
	a := adapter{s: s}
	a.names = append([]string(nil), s.Detect...)
	for _, n := range s.Reads {
		if !containsName(a.names, n) {
			a.names = append(a.names, n)
		}
	}
	switch {
	case s.MetricsPath != "" && len(s.ExtraPaths) > 0:
		return pathExtraAdapter{a}
	case s.MetricsPath != "":
		return pathAdapter{a}
	case len(s.ExtraPaths) > 0:
		return extraAdapter{a}
	}
	return a
}

// Name implements Adapter.
func (a adapter) Name() string { return a.s.Name }

// DisabledHint implements DisabledHint.
func (a adapter) DisabledHint() string { return a.s.DisabledHint }

// MetricNames implements Adapter: the detection names, then the others read.
func (a adapter) MetricNames() []string { return slices.Clone(a.names) }

// Detect implements Adapter: any of the spec's detection names is present.
func (a adapter) Detect(p *expo.Page) bool {
	for _, n := range a.s.Detect {
		if p.Has(n) {
			return true
		}
	}
	return false
}

// Normalize implements Adapter: the spec's Normalize, then warnings for
// implausible pool values (checkPools) and a kv.WarnDuplicateSeries warning
// for every name read that holds the same label set more than once.
func (a adapter) Normalize(in Input) (kv.Server, error) {
	srv, err := a.s.Normalize(in)
	if err != nil {
		return srv, err
	}
	checkPools(&srv)
	if in.Page != nil {
		for _, n := range a.names {
			if d := duplicates(in.Page, n); d > 0 {
				srv.Warn(kv.WarnDuplicateSeries, "%s: %d duplicate series (same name and labels); the adapter kept one per its rule (largest gauge, counters summed per rank)", n, d)
			}
		}
	}
	return srv, nil
}

// MetricsPath implements MetricsPath.
func (a pathAdapter) MetricsPath() string { return a.s.MetricsPath }

// ExtraPaths implements ExtraPaths.
func (a extraAdapter) ExtraPaths() []string { return a.s.ExtraPaths }

// MetricsPath implements MetricsPath.
func (a pathExtraAdapter) MetricsPath() string { return a.s.MetricsPath }

// ExtraPaths implements ExtraPaths.
func (a pathExtraAdapter) ExtraPaths() []string { return a.s.ExtraPaths }

func containsName(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
