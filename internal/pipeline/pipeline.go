// Package pipeline turns one validated configuration into the running parts
// every face reads engines through: the scrape targets, the scraper (body
// limit, per-target limits, HTTP clients) and the report tracker (headroom
// sizes, the planning threshold). `status`, `top`, serve's target loops,
// serve's /probe, `demo` and `check` all build their parts here, so a value of
// the config means the same on every face; none builds its own scraper or
// tracker.
package pipeline

import (
	"slices"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Pipeline is a validated configuration and the parts built from it. It is
// immutable once built: a reload builds a new one.
type Pipeline struct {
	// Config is the parsed config (defaults applied).
	Config *config.Config
	// Targets are every target, config file and command line first, then
	// file_sd targets in file name order, then those service discovery
	// found (WithDiscovered).
	Targets []*scrape.Target
	// FileSDTargets is how many of Targets came from file_sd files.
	FileSDTargets int
	// DiscoveredTargets is how many of Targets service discovery found
	// (kubernetes_sd_configs, dns_sd_configs, http_sd_configs).
	DiscoveredTargets int
	// Engines are the adapters the scraper reads pages with.
	Engines *engine.Registry

	scraper *scrape.Scraper
	cs      *config.Setup
}

// Load reads the sources with config.LoadTargets (every problem at once,
// with its line) and builds the pipeline. A nil reg means
// engine.NewRegistry(); a nil src.Engines checks engine names against reg.
func Load(src config.Sources, reg *engine.Registry) (*Pipeline, error) {
	if reg == nil {
		reg = engine.NewRegistry()
	}
	if src.Engines == nil {
		src.Engines = EngineNames(reg)
	}
	cs, err := config.LoadTargets(src)
	if err != nil {
		return nil, err
	}
	return build(cs, reg, nil, nil)
}

// EngineNames is reg's check of engine names for config.Sources; a nil reg
// means engine.NewRegistry().
func EngineNames(reg *engine.Registry) func(string) error {
	if reg == nil {
		reg = engine.NewRegistry()
	}
	return func(name string) error {
		_, err := reg.ByName(name)
		return err
	}
}

// build makes the targets of cs followed by discovered and, unless one is
// given (a file_sd refresh or a discovery keeps its scraper and the caches
// it holds), the scraper of cs.
func build(cs *config.Setup, reg *engine.Registry, s *scrape.Scraper, discovered []config.Target) (*Pipeline, error) {
	all := cs.Targets
	if len(discovered) > 0 {
		all = append(slices.Clip(cs.Targets), discovered...)
	}
	targets, err := scrape.Targets(&config.Config{Global: cs.Config.Global, Targets: all})
	if err != nil {
		return nil, err
	}
	if s == nil {
		s = scrape.New(reg, cs.Config.Global.BodySizeLimitBytes)
	}
	return &Pipeline{Config: cs.Config, Targets: targets, FileSDTargets: cs.FileSDTargets, DiscoveredTargets: len(discovered),
		Engines: reg, scraper: s, cs: cs}, nil
}

// Scraper is the scraper of every target of p (and of serve's probes): its
// body limit is the config's global.body_size_limit.
func (p *Pipeline) Scraper() *scrape.Scraper { return p.scraper }

// NewTracker returns a report tracker with the config's headroom sizes and
// planning threshold: one per target for serve's loops and probes, one per
// run for status and top.
func (p *Pipeline) NewTracker() *report.Tracker {
	t := report.NewTracker(p.Config.Global.HeadroomTokens)
	t.SetPlanning(p.PlanOptions())
	return t
}

// PlanOptions are the planning settings of the config.
func (p *Pipeline) PlanOptions() report.PlanOptions { return report.PlanOptionsOf(p.Config) }

// Summarize fills r's pools, fleet line and pool plans from its rows, with
// the config's headroom sizes and planning threshold (what Tracker.Update
// does for a tracker of p).
func (p *Pipeline) Summarize(r *report.Report) {
	r.Summarize(p.Config.Global.HeadroomTokens)
	r.PlanPools(p.PlanOptions())
}

// WithTargets returns a copy of p with only targets (e.g. serve's shard of
// them); the scraper is shared.
func (p *Pipeline) WithTargets(targets []*scrape.Target) *Pipeline {
	c := *p
	c.Targets = targets
	return &c
}

// FileSDChanged reports whether the file_sd files matched now differ from
// those read into p (added, removed or modified).
func (p *Pipeline) FileSDChanged() bool { return p.cs != nil && p.cs.FileSDChanged() }

// RefreshFileSD re-reads the file_sd files with the same config; the
// scraper is kept, discovered targets are not (WithDiscovered adds them).
func (p *Pipeline) RefreshFileSD() (*Pipeline, error) {
	cs, err := p.cs.Refresh()
	if err != nil {
		return nil, err
	}
	return build(cs, p.Engines, p.scraper, nil)
}

// WithDiscovered returns p's config targets (config file, command line,
// file_sd) followed by discovered, the targets service discovery found,
// in place of those p had; the scraper is kept. A discovered target whose
// name a config target or an earlier discovered one has is left out, and
// its name returned in taken.
func (p *Pipeline) WithDiscovered(discovered []config.Target) (np *Pipeline, taken []string, err error) {
	names := make(map[string]bool, len(p.cs.Targets)+len(discovered))
	for _, t := range p.cs.Targets {
		names[t.Name] = true
	}
	kept := make([]config.Target, 0, len(discovered))
	for _, t := range discovered {
		if names[t.Name] {
			taken = append(taken, t.Name)
			continue
		}
		names[t.Name] = true
		kept = append(kept, t)
	}
	np, err = build(p.cs, p.Engines, p.scraper, kept)
	return np, taken, err
}
