// Package app is the runtime of `kvwatch serve` (and of `kvwatch demo`'s
// serve): from the command line's options and one validated config it
// builds the exporter daemon, service discovery, the history, the rule
// manager with its notifiers, the query API, the web UI and the remote
// writer, runs them under one run group, and owns the config in effect: a reload (SIGHUP,
// POST /-/reload) loads the config once and hands it to every component
// that reads it, or to none. Alertmanager's app and Prometheus' main.go
// reloaders are its models. It also owns the process-wide GOGC while serve
// keeps history.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/version"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/discovery"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/forecast"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/promapi"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/web"
)

// Options are what the command line gives serve. Values that the config
// file also sets are overrides: they win over the file at start and on
// every reload.
type Options struct {
	// Sources are where the config and the targets come from; they are
	// read again on every reload.
	Sources config.Sources
	// Engines are the adapters; nil means engine.NewRegistry().
	Engines *engine.Registry

	// Daemon settings (see serve.Options).
	ListenAddresses      []string
	WebConfigFile        string
	InsecureListen       bool
	AllowedHosts         []string
	MaxConnections       int
	MaxConcurrentScrapes int
	Shard                serve.Shard
	// Registry holds kvwatch's own metrics; nil: serve's default.
	Registry *prometheus.Registry
	Logger   *slog.Logger

	// History overrides history.retention when set (--history); 0 turns
	// history, rules and charts off.
	History *time.Duration
	// SnapshotFile overrides history.snapshot_file when set
	// (--history.snapshot-file); "" turns snapshots off.
	SnapshotFile *string
	// FullResolution and DownsampleStep are the history's tiers
	// (--history.full-resolution, --history.downsample-step); 0: the
	// history package's defaults. They are not config keys: a reload
	// keeps them.
	FullResolution, DownsampleStep time.Duration

	// RuleFiles are rule files to evaluate instead of the generated rules;
	// re-read on every reload.
	RuleFiles []string
	// Alertmanagers are added to the config's alerting.alertmanagers.
	Alertmanagers []string
	// Query bounds the query API (its Queryable, Rules and build
	// information are set here).
	Query promapi.Options

	// RemoteWrite returns the remote writes of the command line and of a
	// config (its remote_write entries); nil: the config's only.
	RemoteWrite func(*config.Config) ([]config.RemoteWrite, error)
	// RemoteWriteJob and RemoteWriteInstance label the pushed series;
	// an empty instance means this host's name and serve's port.
	RemoteWriteJob, RemoteWriteInstance string
}

// Serve is serve's runtime: the daemon and what attaches to it.
type Serve struct {
	o      Options
	log    *slog.Logger
	daemon *serve.Daemon
	disc   *discovery.Runner
	store  *history.Store
	rules  *alerting.Manager
	ui     *web.UI
	rw     *serve.RemoteWriter
	proj   *forecast.Projector
	// noDefaultSnapshot says the default snapshot file (neither the config
	// nor the command line names one) was found unusable at start: no
	// state directory, or another serve holds it. Snapshots are off then.
	noDefaultSnapshot bool

	// components hear every reload, in order.
	components []component

	reloadMu sync.Mutex
	cfg      *pipeline.Pipeline // the config in effect; under reloadMu
}

// component is one part of the runtime that reads the config. prepare
// checks the new pipeline and builds what the component needs without
// changing anything, returning what applies it: a reload applies nothing
// unless every component prepared, so a config one of them refuses keeps
// the old one running everywhere.
type component struct {
	name    string
	prepare func(ctx context.Context, p *pipeline.Pipeline) (apply func() error, err error)
}

// New loads the config, builds every component and binds the listen
// addresses. Run starts it.
func New(o Options) (*Serve, error) {
	if o.Engines == nil {
		o.Engines = engine.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := pipeline.Load(o.Sources, o.Engines)
	if err != nil {
		return nil, err
	}
	s := &Serve{o: o, log: o.Logger, cfg: p}
	s.daemon, err = serve.New(serve.Options{Pipeline: p, Reload: s.Reload,
		ListenAddresses: o.ListenAddresses, WebConfigFile: o.WebConfigFile, InsecureListen: o.InsecureListen,
		AllowedHosts: o.AllowedHosts, MaxConnections: o.MaxConnections,
		Registry: o.Registry, Logger: o.Logger, MaxConcurrentScrapes: o.MaxConcurrentScrapes, Shard: o.Shard,
		Discovered: func(p *pipeline.Pipeline) *pipeline.Pipeline { return s.disc.Discovered(p) }})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.daemon.Close()
			if s.store != nil {
				s.store.Close()
			}
		}
	}()
	// Service discovery: the daemon asks it for the discovered targets
	// of every pipeline it applies, and again when they change.
	s.disc, err = discovery.New(discovery.Options{Registry: s.daemon.Registerer(), Logger: o.Logger,
		Engines: pipeline.EngineNames(o.Engines), Changed: s.daemon.DiscoveryChanged}, p.Config)
	if err != nil {
		return nil, err
	}
	s.components = append(s.components, component{"discovery", s.prepareDiscovery}, component{"targets", s.prepareDaemon})
	hs := s.historySettings(p.Config)
	if hs.Retention > 0 {
		if err := s.buildHistory(p, hs); err != nil {
			return nil, err
		}
	}
	if err := s.buildProjection(p); err != nil {
		return nil, err
	}
	s.ui = web.Register(s.daemon, s.uiOptions(p.Config))
	s.components = append(s.components, component{"web UI", s.prepareUI})
	if err := web.CheckAssets(); err != nil {
		s.log.Warn("web UI unavailable", "err", err)
	}
	if err := s.buildRemoteWrite(p); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// historySettings are the history's settings under c and the overrides.
func (s *Serve) historySettings(c *config.Config) history.Settings {
	n := history.Settings{Retention: time.Duration(c.History.Retention), Interval: time.Duration(c.Global.ScrapeInterval),
		SnapshotInterval: time.Duration(c.History.SnapshotInterval), MaxSeries: c.History.MaxSeries,
		MaxSeriesPerTarget: c.History.MaxSeriesPerTarget}
	if s.o.History != nil {
		n.Retention = *s.o.History
	}
	switch {
	case s.o.SnapshotFile != nil:
		n.SnapshotFile = *s.o.SnapshotFile
	case c.History.SnapshotFile != nil:
		n.SnapshotFile = *c.History.SnapshotFile
	case !s.noDefaultSnapshot:
		n.SnapshotFile, _ = config.DefaultSnapshotFile(os.Getenv) // "" without a state directory
	}
	return n
}

// defaultSnapshot reports whether the snapshot file under c is the
// default one: neither c nor the command line names one.
func (s *Serve) defaultSnapshot(c *config.Config) bool {
	return s.o.SnapshotFile == nil && c.History.SnapshotFile == nil
}

// lockSnapshot makes the history hold its snapshot file, so that no other
// serve writes it. A named file another serve holds keeps serve from
// starting; the default one never does: without a state directory, or
// when its directory cannot be made or another serve holds it, snapshots
// are off, with a warning.
func (s *Serve) lockSnapshot(c *config.Config) error {
	def := s.defaultSnapshot(c)
	var err error
	if def {
		var path string
		if path, err = config.DefaultSnapshotFile(os.Getenv); err == nil {
			err = os.MkdirAll(filepath.Dir(path), 0o700)
		}
	}
	if err == nil {
		if err = s.store.LockSnapshot(); err == nil || !def {
			return err
		}
	}
	s.log.Warn("history snapshots are off, so a restart loses the history's window: give this serve a snapshot file of its own "+
		"(history.snapshot_file, --history.snapshot-file or the STATE_DIRECTORY environment variable), or write history.snapshot_file: \"\" to say so", "err", err)
	s.noDefaultSnapshot = true
	return s.store.Reconfigure(s.historySettings(c))
}

// buildHistory makes the history (restored from its snapshot), the rule
// manager and the query API.
func (s *Serve) buildHistory(p *pipeline.Pipeline, hs history.Settings) error {
	s.store = history.New(history.Options{Retention: hs.Retention, Interval: hs.Interval,
		FullResolution: s.o.FullResolution, DownsampleStep: s.o.DownsampleStep,
		SnapshotFile: hs.SnapshotFile, SnapshotInterval: hs.SnapshotInterval,
		MaxSeries: hs.MaxSeries, MaxSeriesPerTarget: hs.MaxSeriesPerTarget, Logger: s.log})
	if err := s.lockSnapshot(p.Config); err != nil {
		return err
	}
	if f := s.store.Settings().SnapshotFile; f != "" {
		s.log.Info("history snapshots", "file", f, "every", hs.SnapshotInterval)
	} else if !s.noDefaultSnapshot {
		s.log.Info("history snapshots are off (history.snapshot_file: \"\"): a restart loses the history's window")
	}
	if err := s.store.Restore(time.Now()); err != nil && !errors.Is(err, history.ErrNoSnapshot) {
		return err
	}
	if err := s.daemon.RegisterOwn(s.store.Collector()); err != nil {
		return fmt.Errorf("history metrics: %w", err)
	}
	rc, err := s.rulesConfig(p.Config)
	if err != nil {
		return err
	}
	s.rules, err = alerting.New(alerting.Options{Groups: rc.Groups, Interval: rc.Interval, Storage: s.store,
		Notifiers: rc.Notifiers, ExternalURL: s.daemon.URL(), Logger: s.log})
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	api := s.o.Query
	api.Queryable, api.Rules, api.Logger = s.store, s.rules, s.log
	api.Version, api.Revision, api.Branch, api.BuildDate = version.Version, version.Revision, version.Branch, version.BuildDate
	promapi.New(api).Register(s.daemon)
	s.components = append(s.components, component{"history", s.prepareHistory}, component{"rules", s.prepareRules})
	return nil
}

// buildProjection makes the capacity projection over the history's days
// (forecast.Projector): its families on serve's own /metrics, its answer
// in the web UI; without history, only the reason.
func (s *Serve) buildProjection(p *pipeline.Pipeline) error {
	var src forecast.Source
	if s.store != nil {
		src = forecast.NewLocal("serve's history", s.store, s.log)
	}
	s.proj = forecast.NewProjector(src, s.projectionSettings(p.Config), s.log, nil)
	if err := s.daemon.RegisterOwn(s.proj); err != nil {
		return fmt.Errorf("projection metrics: %w", err)
	}
	s.components = append(s.components, component{"projection", s.prepareProjection})
	return nil
}

// projectionSettings are the projection's settings under c.
func (s *Serve) projectionSettings(c *config.Config) forecast.ProjectorSettings {
	n := forecast.ProjectorSettings{Warning: c.Alerts.KVUsageWarning, Hold: time.Duration(c.Alerts.KVUsageWarningFor)}
	if s.store != nil {
		n.History = s.historySettings(c).Retention
	}
	return n
}

func (s *Serve) prepareProjection(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	n := s.projectionSettings(p.Config)
	return func() error { s.proj.Apply(n); return nil }, nil
}

// rulesConfig is the rule manager's config under c: the rule files (read
// again), else the generated rules with c's thresholds; c's evaluation
// interval; c's Alertmanagers and webhooks and the command line's.
func (s *Serve) rulesConfig(c *config.Config) (alerting.Config, error) {
	var groups []rulefmt.RuleGroup
	if len(s.o.RuleFiles) > 0 {
		var err error
		if groups, err = alerting.LoadFiles(s.o.RuleFiles); err != nil {
			return alerting.Config{}, fmt.Errorf("--rules.file: %w", err)
		}
	} else {
		groups = stack.ServeRules(stack.Options{Config: c})
	}
	rc := alerting.Config{Groups: groups, Interval: time.Duration(c.Global.EvaluationInterval)}
	for i, u := range c.Alerting.Alertmanagers {
		am, err := alerting.NewAlertmanager(u, nil)
		if err != nil {
			return alerting.Config{}, fmt.Errorf("alerting.alertmanagers[%d]: %w", i, err)
		}
		rc.Notifiers = append(rc.Notifiers, am)
	}
	for _, u := range s.o.Alertmanagers {
		am, err := alerting.NewAlertmanager(u, nil)
		if err != nil {
			return alerting.Config{}, fmt.Errorf("--alertmanager.url: %w", err)
		}
		rc.Notifiers = append(rc.Notifiers, am)
	}
	for i, u := range c.Alerting.Webhooks {
		wh, err := alerting.NewWebhook(u, nil)
		if err != nil {
			return alerting.Config{}, fmt.Errorf("alerting.webhooks[%d]: %w", i, err)
		}
		rc.Notifiers = append(rc.Notifiers, wh)
	}
	return rc, nil
}

// uiOptions are the web UI's options under c.
func (s *Serve) uiOptions(c *config.Config) web.Options {
	o := web.Options{Report: s.daemon.Report, Warning: c.Alerts.KVUsageWarning, Critical: c.Alerts.KVUsageCritical,
		HistoryEnabled: s.store != nil, AlertsEnabled: s.rules != nil, Projection: func() any { return s.proj.Projection() },
		ScrapeIntervalSeconds: time.Duration(c.Global.ScrapeInterval).Seconds(),
		FullResolutionSeconds: s.o.FullResolution.Seconds(), DownsampleStepSeconds: s.o.DownsampleStep.Seconds()}
	if s.store != nil {
		o.HistorySeconds = s.historySettings(c).Retention.Seconds()
	}
	return o
}

// buildRemoteWrite makes the remote writer; it pushes nothing until a
// config or the command line names a store, and a reload may add one.
func (s *Serve) buildRemoteWrite(p *pipeline.Pipeline) error {
	remotes, err := s.remotes(p.Config)
	if err != nil {
		return err
	}
	dir := ""
	if s.o.Sources.File != "" {
		dir = filepath.Dir(s.o.Sources.File)
	}
	s.rw, err = serve.NewRemoteWriter(s.daemon, serve.RemoteWriteOptions{Remotes: remotes, Dir: dir,
		Job: s.o.RemoteWriteJob, Instance: s.remoteWriteInstance(), Logger: s.log})
	if err != nil {
		return err
	}
	if len(remotes) > 0 {
		s.log.Info("remote write", "remotes", len(remotes), "instance", s.remoteWriteInstance())
	}
	s.components = append(s.components, component{"remote write", s.prepareRemoteWrite})
	return nil
}

func (s *Serve) remotes(c *config.Config) ([]config.RemoteWrite, error) {
	if s.o.RemoteWrite == nil {
		return c.RemoteWrite, nil
	}
	return s.o.RemoteWrite(c)
}

// remoteWriteInstance is the instance label of pushed series: the
// option, else this host's name and serve's port.
func (s *Serve) remoteWriteInstance() string {
	if s.o.RemoteWriteInstance != "" {
		return s.o.RemoteWriteInstance
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	port := portOf(signal.DefaultListenAddress)
	if addrs := s.daemon.Addrs(); len(addrs) > 0 {
		port = portOf(addrs[0].String())
	}
	return net.JoinHostPort(host, port)
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func (s *Serve) prepareDaemon(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	return func() error { return s.daemon.ApplyConfig(ctx, p) }, nil
}

func (s *Serve) prepareDiscovery(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	apply, err := s.disc.Prepare(p.Config)
	if err != nil {
		return nil, err
	}
	return func() error { apply(); return nil }, nil
}

func (s *Serve) prepareHistory(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	n := s.historySettings(p.Config)
	if n.Retention <= 0 {
		return nil, fmt.Errorf("history.retention %s: history is on and cannot be turned off by a reload; restart serve to turn it off", n.Retention)
	}
	if err := history.CheckSettings(n); err != nil {
		return nil, err
	}
	if n.SnapshotFile != "" && s.defaultSnapshot(p.Config) {
		if err := os.MkdirAll(filepath.Dir(n.SnapshotFile), 0o700); err != nil {
			return nil, fmt.Errorf("history.snapshot_file (default %s): %w; name a file, or write \"\" to turn snapshots off", n.SnapshotFile, err)
		}
	}
	if err := s.store.CheckSnapshotFile(n.SnapshotFile); err != nil {
		return nil, fmt.Errorf("history.snapshot_file: %w", err)
	}
	return func() error { return s.store.Reconfigure(n) }, nil
}

func (s *Serve) prepareRules(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	rc, err := s.rulesConfig(p.Config)
	if err != nil {
		return nil, err
	}
	apply, err := s.rules.Prepare(rc)
	if err != nil {
		return nil, err
	}
	return func() error { apply(); return nil }, nil
}

func (s *Serve) prepareUI(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	if s.store == nil && s.historySettings(p.Config).Retention > 0 {
		return nil, fmt.Errorf("history.retention %s: serve started without history; restart serve to turn it on", p.Config.History.Retention)
	}
	o := s.uiOptions(p.Config)
	return func() error { s.ui.ApplyConfig(o); return nil }, nil
}

func (s *Serve) prepareRemoteWrite(ctx context.Context, p *pipeline.Pipeline) (func() error, error) {
	remotes, err := s.remotes(p.Config)
	if err != nil {
		return nil, err
	}
	return s.rw.Prepare(remotes, p.Config.Global.ScrapeInterval)
}

// Reload reads the config again and applies it to every component, or,
// when it or any component refuses it, to none: the previous config keeps
// running, kvwatch_config_last_reload_successful is 0 and the error names
// the component, the key and why.
func (s *Serve) Reload(ctx context.Context) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	err := s.reload(ctx)
	s.daemon.RecordReload(err)
	if err != nil {
		s.log.Error("config reload failed; the previous config keeps running", "err", err)
		return err
	}
	s.log.Info("config reloaded", "targets", len(s.cfg.Targets))
	return nil
}

func (s *Serve) reload(ctx context.Context) error {
	p, err := pipeline.Load(s.o.Sources, s.o.Engines)
	if err != nil {
		return err
	}
	applies := make([]func() error, 0, len(s.components))
	for _, c := range s.components {
		apply, err := c.prepare(ctx, p)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		applies = append(applies, apply)
	}
	var errs []error
	for i, apply := range applies {
		if err := apply(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.components[i].name, err))
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	s.cfg = p
	return errors.Join(errs...)
}

// Config returns the pipeline in effect: the config last loaded at start
// or by a successful reload.
func (s *Serve) Config() *pipeline.Pipeline {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	return s.cfg
}

// Daemon returns the exporter daemon.
func (s *Serve) Daemon() *serve.Daemon { return s.daemon }

// Rules returns the rule manager; nil without history.
func (s *Serve) Rules() *alerting.Manager { return s.rules }

// History returns the history; nil when it is off.
func (s *Serve) History() *history.Store { return s.store }

// Projector returns the capacity projection over the history.
func (s *Serve) Projector() *forecast.Projector { return s.proj }

// UI returns the web UI.
func (s *Serve) UI() *web.UI { return s.ui }

// RemoteWriter returns the remote writer.
func (s *Serve) RemoteWriter() *serve.RemoteWriter { return s.rw }

// HistoryGCPercent is the garbage collector's target (GOGC) while serve
// keeps history, unless the GOGC environment variable sets one. The
// history's closed chunks live outside the Go heap; what stays on it is
// mostly long-lived bookkeeping (series, chunk lists, open chunks,
// connections), and Go's default (100) lets the process grow to twice
// that before collecting (Prometheus lowered its default to 75 for the
// same reason). Measured in docs/benchmarks.md ("serve with history"):
// 1,000 endpoints over 24h at 234–263 MiB resident (peak 265 MiB) with 35
// against 252–288 (peak 301) with 50, for the same CPU. GOMEMLIMIT, when
// set, is honoured as well.
const HistoryGCPercent = 35

// Run runs every component under one run group until ctx ends or one of
// them fails; with history it sets GOGC (HistoryGCPercent) for its
// duration, the process being serve's.
func (s *Serve) Run(ctx context.Context) error {
	if s.store != nil && os.Getenv("GOGC") == "" {
		old := debug.SetGCPercent(HistoryGCPercent)
		s.log.Debug("history is on: garbage collector target set", "GOGC", HistoryGCPercent)
		defer debug.SetGCPercent(old)
	}
	var g run.Group
	var mu sync.Mutex
	var errs []error
	actor := func(name string, fn func(context.Context) error) {
		actx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			err := fn(actx)
			if err != nil {
				err = fmt.Errorf("%s: %w", name, err)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return err
		}, func(error) { cancel() })
	}
	// The daemon returns when ctx ends (or serving fails); the end of any
	// actor ends the others. Every actor's error is returned (the
	// history's last snapshot write among them).
	actor("serve", s.daemon.Run)
	actor("discovery", s.disc.Run)
	if s.store != nil {
		actor("history", func(ctx context.Context) error { return s.store.Run(ctx, Feeder(s.daemon)) })
		actor("rules", s.rules.Run)
		actor("projection", s.proj.Run)
	}
	actor("remote write", s.rw.Run)
	g.Run()
	if s.store != nil {
		s.store.Close() // after the last snapshot write: the file is free for the next serve
	}
	return errors.Join(errs...)
}

// Feeder lets the history record d's samples straight from its latest
// scrapes (history.Feeder) instead of gathering metric families every
// interval.
func Feeder(d *serve.Daemon) history.Gatherer { return daemonFeeder{d} }

type daemonFeeder struct{ d *serve.Daemon }

func (f daemonFeeder) Gather() ([]*dto.MetricFamily, error) { return f.d.Gatherer().Gather() }
func (f daemonFeeder) Feed(b *history.Batch)                { f.d.Walk(b.Add) }

// Components returns the names of the components a reload reaches, in
// order (docs and tests).
func (s *Serve) Components() []string {
	out := make([]string, len(s.components))
	for i, c := range s.components {
		out[i] = c.name
	}
	return slices.Clip(out)
}
