// Package catalog is kvwatch's offline knowledge of engine metric names:
// every family each supported engine exposes on /metrics (not only those
// kvwatch's adapters read), the version range where a name is known, the
// labels it carries, the source file it was read from, and a rename table
// (old name, new name, engine version, in renames.go, with the names whose
// meaning changed). `kvwatch check queries` uses it when no live store is
// given.
//
// Names are written as the engine exposes them in the Prometheus text
// format: counters with their `_total` sample name, histograms and summaries
// by their base name (the `_bucket`, `_sum`, `_count` samples are implied).
// The data lives in metrics.go, written by reading each engine's sources
// (see the Source of every entry and docs/check-queries.md); nothing here is
// generated at run time.
//
// It does not know deployment-specific labels (relabelling, Kubernetes
// target labels) and it does not know which version a given fleet runs: a
// name is known when any known version exposed it.
package catalog

import (
	"slices"
	"strings"
)

// Type is a metric family's type as exposed.
type Type string

// Family types.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram"
	Summary   Type = "summary"
	Info      Type = "info" // a gauge fixed at 1 whose labels carry the data
)

// Metric is one family an engine exposes.
type Metric struct {
	// Engine is the engine's catalog name: sglang, vllm, ...
	Engine string
	// Name is the exposed name: counters end in _total (except where the
	// engine's library adds none, as TGI's), histograms are the base name.
	Name string
	Type Type
	// Labels are the labels the engine itself sets (not the scraper's job
	// and instance, not le or quantile).
	Labels []string
	// Since and Until are the engine versions where the name appeared and
	// the last version that exposed it ("" = unknown or still current).
	Since, Until string
	// Source is the file the name was read from: repo path[@commit].
	Source string
	// Conditional, when set, says when the series exist at all (e.g.
	// "only with speculative decoding"): a store without them may simply
	// not be in that state.
	Conditional string
}

// Current reports whether the newest known version still exposes m.
func (m *Metric) Current() bool { return m.Until == "" }

// Rename is a known change of a name: New is "" when the metric was
// removed without a replacement.
type Rename struct {
	Engine string
	Old    string
	New    string
	// Version is the engine version (or change) that made it.
	Version string
	// Since is the first release that has New and Removed the first
	// without Old, as release numbers ("0.9.2", "0.12.0"), where they are
	// known: the drift sentinel warns of a page whose names contradict the
	// release its engine claims (engine.Contradictions).
	Since, Removed string
	// Note says what changed besides the name (units, type), if anything.
	Note string
	// Deprecated is true while the newest version still exposes Old
	// beside its successor: querying it works, for now.
	Deprecated bool
	// Differs, when set, says how New means something else than Old: New
	// is suggested, never rewritten in place of Old.
	Differs string
	Source  string
}

// Change is a name an engine kept while its meaning changed: a query of it
// still selects series, which now say something else.
type Change struct {
	Engine string
	Name   string
	// Version is the engine version (or change) that made it.
	Version string
	// Use is what to query for the old meaning ("" when nothing has it).
	Use string
	// Note says what the name means now.
	Note   string
	Source string
}

// Engine describes one engine's exposition.
type Engine struct {
	// Name is the catalog name; Display is how people write it.
	Name, Display string
	// Prefixes are the name prefixes the engine uses, with their separator
	// (e.g. "vllm:").
	Prefixes []string
	// PythonClient is true when the engine exposes its metrics with the
	// Python prometheus_client: since prometheus_client 0.23.0 its
	// OpenMetrics output spells a ':' as '_' unless the scraper asks for
	// UTF-8 names, so a store may hold either spelling.
	PythonClient bool
	// Source is where the names were read.
	Source string
}

// Catalog answers name lookups. The zero value is not usable; use Default.
type Catalog struct {
	metrics []Metric
	renames []Rename
	engines []Engine
	changes []Change
	byName  map[string][]int
	renamed map[string][]int
}

// Default returns the built-in catalog.
func Default() *Catalog { return New(metrics(), renames(), engines()).WithChanges(changes()) }

// New builds a catalog from its tables (tests build small ones).
func New(ms []Metric, rs []Rename, es []Engine) *Catalog {
	c := &Catalog{metrics: ms, renames: rs, engines: es, byName: map[string][]int{}, renamed: map[string][]int{}}
	for i := range ms {
		c.byName[ms[i].Name] = append(c.byName[ms[i].Name], i)
	}
	for i := range rs {
		c.renamed[rs[i].Old] = append(c.renamed[rs[i].Old], i)
	}
	return c
}

// Metrics returns every entry, in the tables' order.
func (c *Catalog) Metrics() []Metric { return slices.Clone(c.metrics) }

// Renames returns the rename table.
func (c *Catalog) Renames() []Rename { return slices.Clone(c.renames) }

// WithChanges sets the table of meaning changes and returns c.
func (c *Catalog) WithChanges(cs []Change) *Catalog {
	c.changes = cs
	return c
}

// Changes returns the table of meaning changes.
func (c *Catalog) Changes() []Change { return slices.Clone(c.changes) }

// ChangesOf returns the meaning changes of the family name.
func (c *Catalog) ChangesOf(name string) []Change {
	var out []Change
	for _, ch := range c.changes {
		if ch.Name == name {
			out = append(out, ch)
		}
	}
	return out
}

// Engines returns the engines the catalog knows.
func (c *Catalog) Engines() []Engine { return slices.Clone(c.engines) }

// Engine returns the engine with that name.
func (c *Catalog) Engine(name string) (Engine, bool) {
	for _, e := range c.engines {
		if e.Name == name {
			return e, true
		}
	}
	return Engine{}, false
}

// Family returns the entries whose exposed family is exactly name.
func (c *Catalog) Family(name string) []Metric {
	var out []Metric
	for _, i := range c.byName[name] {
		out = append(out, c.metrics[i])
	}
	return out
}

// Sample is what a sample name resolves to: the family and the suffix that
// was added to the family name ("", "_bucket", "_sum", "_count",
// "_created").
type Sample struct {
	Metric Metric
	Suffix string
}

// Lookup resolves a sample name as a store holds it: a family name, or a
// histogram's or summary's _bucket/_sum/_count, or a prometheus_client
// _created sample. Every entry with that name is returned (engines share
// no names in practice, but versions may repeat one).
func (c *Catalog) Lookup(sample string) []Sample {
	var out []Sample
	for _, m := range c.Family(sample) {
		out = append(out, Sample{Metric: m})
	}
	for _, suf := range []string{"_bucket", "_sum", "_count", "_created"} {
		base, ok := strings.CutSuffix(sample, suf)
		if !ok {
			continue
		}
		for _, m := range c.Family(base) {
			if validSuffix(m, suf) {
				out = append(out, Sample{Metric: m, Suffix: suf})
			}
		}
		if suf == "_created" {
			// prometheus_client: counter X_total has X_created.
			for _, m := range c.Family(base + "_total") {
				if m.Type == Counter && c.python(m.Engine) {
					out = append(out, Sample{Metric: m, Suffix: suf})
				}
			}
		}
	}
	return out
}

func validSuffix(m Metric, suf string) bool {
	switch suf {
	case "_bucket":
		return m.Type == Histogram
	case "_sum", "_count":
		return m.Type == Histogram || m.Type == Summary
	case "_created":
		return m.Type == Histogram || m.Type == Summary
	}
	return false
}

func (c *Catalog) python(engine string) bool {
	e, ok := c.Engine(engine)
	return ok && e.PythonClient
}

// PythonClient reports whether the engine exposes its names through
// prometheus_client (see Engine.PythonClient).
func (c *Catalog) PythonClient(engine string) bool { return c.python(engine) }

// RenamesOf returns the renames whose old name is name. A histogram's
// _bucket, _sum or _count sample is renamed with its family: the returned
// copies then carry the suffix on both names.
func (c *Catalog) RenamesOf(name string) []Rename {
	var out []Rename
	for _, i := range c.renamed[name] {
		out = append(out, c.renames[i])
	}
	if len(out) > 0 {
		return out
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		hist := false
		for _, m := range c.Family(base) {
			hist = hist || m.Type == Histogram || m.Type == Summary && suf != "_bucket"
		}
		if !hist {
			continue
		}
		for _, i := range c.renamed[base] {
			r := c.renames[i]
			r.Old = name
			if r.New != "" {
				r.New += suf
			}
			out = append(out, r)
		}
	}
	return out
}

// Final follows a chain of renames from r (old → new → newer) and returns
// every step, r first. It stops at a removal or after 8 steps.
func (c *Catalog) Final(r Rename) []Rename {
	chain := []Rename{r}
	for len(chain) < 8 {
		last := chain[len(chain)-1]
		if last.New == "" {
			break
		}
		next := c.RenamesOf(last.New)
		if len(next) == 0 || next[0].Engine != last.Engine {
			break
		}
		chain = append(chain, next[0])
	}
	return chain
}

// LabelsOf returns the labels a sample carries: the family's labels plus le
// for a histogram's _bucket and quantile for a summary's own samples.
func LabelsOf(s Sample) []string {
	l := slices.Clone(s.Metric.Labels)
	switch {
	case s.Metric.Type == Histogram && s.Suffix == "_bucket":
		l = append(l, "le")
	case s.Metric.Type == Summary && s.Suffix == "":
		l = append(l, "quantile")
	}
	return l
}
