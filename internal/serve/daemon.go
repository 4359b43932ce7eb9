// Package serve is kvwatch's exporter daemon: it scrapes every configured
// engine on its own interval (jittered, never two scrapes of one target at
// once, bounded concurrency overall), keeps the latest normalized result and
// report per target, and serves /metrics (normalized kvwatch_* families and
// per-target scrape health), /probe (one-off scrapes of allowlisted hosts),
// /api/kvwatch/v1/report, health, readiness and reload endpoints behind the
// exporter-toolkit's TLS and basic auth. Other packages add routes with
// Handle. It keeps no history and evaluates no rules: those attach through
// Gatherer and Report. It reads no config file and handles no OS signals:
// it is built from a pipeline.Pipeline, and the runtime that owns it
// (package app) hands it the next one with ApplyConfig on a reload.
package serve

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// DefaultMaxConcurrentScrapes is Options.MaxConcurrentScrapes' default.
const DefaultMaxConcurrentScrapes = 256

// Options configure a Daemon.
type Options struct {
	// Pipeline is the validated config, its targets, scraper and
	// trackers (package pipeline); required.
	Pipeline *pipeline.Pipeline
	// Reload re-reads the config of the runtime that owns the daemon and
	// applies it to every component; POST /-/reload calls it. nil: the
	// route answers that reloading is not available.
	Reload func(ctx context.Context) error

	// ListenAddresses are the addresses to serve on; default
	// signal.DefaultListenAddress. Ports may be 0 (see Addrs).
	ListenAddresses []string
	// WebConfigFile is an exporter-toolkit web config file (TLS, basic auth).
	WebConfigFile string
	// InsecureListen allows a non-loopback listen address without TLS and
	// authentication in WebConfigFile (TLS terminated by a proxy or a
	// service mesh); New logs a warning. See checkListen.
	InsecureListen bool
	// AllowedHosts are host names a request's Host header may carry besides
	// IP addresses, localhost, the listen addresses' names and this
	// machine's; "*" allows any (see hostPolicy).
	AllowedHosts []string
	// MaxConnections caps the connections open to the listen addresses
	// (see connLimiter); default DefaultMaxConnections.
	MaxConnections int

	// Registry holds kvwatch's own metrics (process, Go, reload, deadline
	// misses), served on /metrics next to the kvwatch_* families. nil: a new
	// registry with the process and Go collectors.
	Registry *prometheus.Registry
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// MaxConcurrentScrapes bounds scrapes in flight over all targets and
	// probes; 0: DefaultMaxConcurrentScrapes.
	MaxConcurrentScrapes int
	// Shard keeps only this instance's share of the targets (shard.go).
	Shard Shard
	// Discovered, when set, returns a pipeline with the targets service
	// discovery found added to the given one's (package discovery's
	// Runner.Discovered); the daemon asks it for every pipeline it
	// applies, and again after DiscoveryChanged.
	Discovered func(*pipeline.Pipeline) *pipeline.Pipeline
}

// Daemon is a running exporter. Its methods are safe for concurrent use.
type Daemon struct {
	opts      Options
	log       *slog.Logger
	own       *prometheus.Registry
	kvReg     *prometheus.Registry
	coll      *collector
	mux       *http.ServeMux
	handledMu sync.Mutex
	handled   map[string]bool // patterns added by Handle
	listeners []net.Listener
	sem       chan struct{}
	// timedOut bounds the scrapes of targets whose last scrape timed out
	// to half of sem's slots (scrapeAndRecord).
	timedOut chan struct{}
	workers  *workerPool // the scrapes run here (see workerPool)
	probes   *probeCache
	conns    *connLimiter // the listeners' connections
	timeouts httpTimeouts
	guard    *guard // in front of every route (guard.go)

	reloadOK       prometheus.Gauge
	reloadTime     prometheus.Gauge
	deadlineMisses prometheus.Counter
	targetCount    prometheus.Gauge

	// setup is replaced on reload; read with Setup.
	setup atomic.Pointer[pipeline.Pipeline]

	mu     sync.RWMutex
	states map[string]*targetState
	order  []string // target names in config order
	ready  atomic.Bool

	reloadCh chan *pipeline.Pipeline
	sdCh     chan struct{}
	discCh   chan struct{}
	running  atomic.Bool
	started  atomic.Bool
}

// targetState is one target's loop and latest state.
type targetState struct {
	key    string
	target *scrape.Target
	cancel context.CancelFunc
	done   chan struct{}
	// tracker computes the target's report row; used only by its loop.
	tracker *report.Tracker
	// timedOut is true when the target's last scrape timed out; used only
	// by its loop.
	timedOut bool
	// e is the latest state; guarded by Daemon.mu.
	e entry
}

// New checks the options and the config, and binds the listen addresses
// (so a port in use is an error here, not later). Call Run to start.
func New(opts Options) (*Daemon, error) {
	if opts.Pipeline == nil {
		return nil, errors.New("serve: no pipeline")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if len(opts.ListenAddresses) == 0 {
		opts.ListenAddresses = []string{signal.DefaultListenAddress}
	}
	if opts.MaxConcurrentScrapes <= 0 {
		opts.MaxConcurrentScrapes = DefaultMaxConcurrentScrapes
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if opts.MaxConnections < 0 {
		return nil, fmt.Errorf("--web.max-connections %d: must be at least 1", opts.MaxConnections)
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if err := checkListen(opts, opts.Logger); err != nil {
		return nil, err
	}
	hosts, err := newHostPolicy(opts.ListenAddresses, opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: opts, log: opts.Logger, own: opts.Registry,
		kvReg: prometheus.NewRegistry(), mux: http.NewServeMux(), handled: map[string]bool{},
		sem: make(chan struct{}, opts.MaxConcurrentScrapes), timedOut: make(chan struct{}, max(1, opts.MaxConcurrentScrapes/2)),
		workers: newWorkerPool(workerIdleTimeout), states: map[string]*targetState{},
		reloadCh: make(chan *pipeline.Pipeline), sdCh: make(chan struct{}, 1), discCh: make(chan struct{}, 1)}
	d.probes = newProbeCache(1024)
	d.timeouts = defaultTimeouts
	d.conns, d.guard = newConnLimiter(opts.MaxConnections), newGuard(&d.timeouts, hosts, opts.Logger)
	d.setup.Store(opts.Shard.apply(opts.Pipeline))

	gauge := func(m signal.Metric) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help})
	}
	d.reloadOK, d.reloadTime, d.targetCount = gauge(signal.ConfigReloadSuccess), gauge(signal.ConfigReloadTime), gauge(signal.Targets)
	d.deadlineMisses = prometheus.NewCounter(prometheus.CounterOpts{Name: signal.ScrapeDeadlineMisses.Name, Help: signal.ScrapeDeadlineMisses.Help})
	own := append(multiCollector{d.reloadOK, d.reloadTime, d.deadlineMisses, d.targetCount}, d.conns.collectors()...)
	if err := d.own.Register(prometheus.WrapCollectorWith(nil, append(own, d.guard.collectors()...))); err != nil {
		return nil, fmt.Errorf("register kvwatch's own metrics: %w", err)
	}
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
	d.coll = newCollector(d.entries)
	d.coll.planOptions = d.planOptions
	d.kvReg.MustRegister(d.coll)
	d.routes()

	for _, a := range opts.ListenAddresses {
		l, err := net.Listen("tcp", a)
		if err != nil {
			d.closeListeners()
			return nil, fmt.Errorf("listen on %s: %w; pick another --web.listen-address", a, err)
		}
		d.listeners = append(d.listeners, l)
	}
	return d, nil
}

// multiCollector registers several collectors as one.
type multiCollector []prometheus.Collector

func (m multiCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m {
		c.Describe(ch)
	}
}

func (m multiCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m {
		c.Collect(ch)
	}
}

// Close releases the listen addresses of a daemon that will not Run (its
// assembly failed); Run closes them itself.
func (d *Daemon) Close() {
	if !d.started.Load() {
		d.closeListeners()
	}
}

func (d *Daemon) closeListeners() {
	for _, l := range d.listeners {
		l.Close()
	}
}

// isLoopback reports whether a listen address only accepts local connections.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addrs returns the addresses the daemon listens on (with real ports when
// the options asked for port 0).
func (d *Daemon) Addrs() []net.Addr {
	out := make([]net.Addr, len(d.listeners))
	for i, l := range d.listeners {
		out[i] = l.Addr()
	}
	return out
}

// URL is the base URL of the daemon's first listen address
// (http://host:port/), e.g. for the UI's links in alerts; "" when it has none.
func (d *Daemon) URL() string {
	for _, a := range d.Addrs() {
		return "http://" + a.String() + "/"
	}
	return ""
}

// Handle adds a route (e.g. the web UI at "/", a query API under
// /api/v1/), served behind the same TLS and authentication. It must be
// called before Run; patterns follow net/http.ServeMux.
func (d *Daemon) Handle(pattern string, h http.Handler) {
	if d.started.Load() {
		panic("serve: Handle called after Run")
	}
	d.mux.Handle(pattern, h)
	d.handledMu.Lock()
	d.handled[pattern] = true
	d.handledMu.Unlock()
}

// Registerer registers kvwatch's own metrics (e.g. service discovery's),
// as RegisterOwn does.
func (d *Daemon) Registerer() prometheus.Registerer { return d.own }

// RegisterOwn adds a collector of kvwatch's own metrics (e.g. the
// history's size), served on /metrics next to the process and Go metrics
// and never recorded into the history.
func (d *Daemon) RegisterOwn(c prometheus.Collector) error { return d.own.Register(c) }

// Gatherer gathers only the normalized kvwatch_* families and per-target
// scrape health, from the latest scrape of each target.
func (d *Daemon) Gatherer() prometheus.Gatherer { return d.kvReg }

// Walk passes every sample the Gatherer would gather to fn, with its label
// pairs (name, value, ...; empty values included), without building metric
// families: cheaper for a consumer that only records samples, such as the
// history.
func (d *Daemon) Walk(fn func(name string, counter bool, v float64, pairs ...string)) {
	d.coll.walk(fn)
}

// Ready reports whether every target has been scraped once since Run.
func (d *Daemon) Ready() bool { return d.ready.Load() }

// Setup returns the pipeline in effect (this instance's shard of the
// targets).
func (d *Daemon) Setup() *pipeline.Pipeline { return d.setup.Load() }

// Run starts scraping and serving, and returns after ctx is canceled and
// the server has shut down (or when serving fails).
func (d *Daemon) Run(ctx context.Context) error {
	if d.started.Swap(true) {
		return errors.New("serve: Run called twice")
	}
	d.handledMu.Lock()
	root := false
	for _, p := range []string{"/", "GET /", "/{$}", "GET /{$}"} {
		root = root || d.handled[p]
	}
	d.handledMu.Unlock()
	if !root { // nobody serves a UI: link serve's routes
		d.mux.Handle("GET /{$}", d.landingPage())
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, below
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer d.workers.close() // after the targets stop
	defer d.stopAll()

	d.running.Store(true)
	defer d.running.Store(false)
	d.apply(ctx, d.setup.Load())
	d.log.Info("kvwatch serve started", "targets", len(d.setup.Load().Targets), "listen", d.opts.ListenAddresses)

	listen := d.opts.ListenAddresses
	flags := &web.FlagConfig{WebListenAddresses: &listen, WebSystemdSocket: new(bool), WebConfigFile: &d.opts.WebConfigFile}
	// One server per listener (exporter-toolkit sets each one's handler
	// and TLS config), all within one connection limit.
	servers := make([]*http.Server, len(d.listeners))
	serveErr := make(chan error, len(d.listeners))
	for i, l := range d.listeners {
		servers[i] = d.newServer()
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveErr <- web.Serve(d.conns.listener(l), servers[i], flags, d.log)
		}()
	}
	defer d.guard.logins.close() // after the servers stop
	shutdown := func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		for _, srv := range servers {
			if srv.Shutdown(sctx) != nil {
				srv.Close()
			}
		}
		d.closeListeners() // those of a server that failed before serving
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		d.watchFileSD(ctx)
	}()

	for {
		select {
		case <-ctx.Done():
			shutdown()
			d.log.Info("kvwatch serve stopped")
			return nil
		case err := <-serveErr:
			shutdown()
			if errors.Is(err, http.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("serve http: %w", err)
		case p := <-d.reloadCh:
			d.apply(ctx, p)
		case <-d.sdCh:
			d.refreshFileSD(ctx)
		case <-d.discCh:
			d.apply(ctx, d.setup.Load())
		}
	}
}

// ApplyConfig makes p the daemon's pipeline: loops of removed or changed
// targets stop, new ones start, /probe and the report use p's settings.
// Before Run it only replaces the pipeline Run starts with. It cannot fail:
// p is validated; the error is ctx's when it ends first.
func (d *Daemon) ApplyConfig(ctx context.Context, p *pipeline.Pipeline) error {
	if !d.running.Load() {
		d.setup.Store(d.opts.Shard.apply(p))
		return nil
	}
	select {
	case d.reloadCh <- p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DiscoveryChanged tells the daemon that service discovery found other
// targets: it asks Options.Discovered again. It does not block.
func (d *Daemon) DiscoveryChanged() {
	select {
	case d.discCh <- struct{}{}:
	default: // already told
	}
}

// RecordReload sets kvwatch_config_last_reload_successful (and, on
// success, its timestamp) for a reload of the runtime's config.
func (d *Daemon) RecordReload(err error) {
	if err != nil {
		d.reloadOK.Set(0)
		return
	}
	d.reloadOK.Set(1)
	d.reloadTime.SetToCurrentTime()
}

// watchFileSD re-reads file_sd files when they change, polling every
// refresh_interval (the shortest configured).
func (d *Daemon) watchFileSD(ctx context.Context) {
	for {
		s := d.setup.Load()
		every := time.Duration(0)
		for _, f := range s.Config.FileSD {
			if iv := time.Duration(f.RefreshInterval); every == 0 || iv < every {
				every = iv
			}
		}
		if every == 0 {
			every = time.Minute // no file_sd now; a reload may add some
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if len(s.Config.FileSD) == 0 || !s.FileSDChanged() {
			continue
		}
		select {
		case d.sdCh <- struct{}{}:
		default: // a refresh is already queued
		}
	}
}

// refreshFileSD runs on Run's goroutine when file_sd files changed.
func (d *Daemon) refreshFileSD(ctx context.Context) {
	ns, err := d.setup.Load().RefreshFileSD()
	d.RecordReload(err)
	if err != nil {
		d.log.Error("file_sd files changed but are wrong; keeping the previous targets", "err", err)
		return
	}
	d.apply(ctx, ns)
	d.log.Info("file_sd targets changed", "targets", len(ns.Targets))
}

// fingerprint identifies a target's effective settings; a target whose
// fingerprint is unchanged keeps its loop over a reload.
func fingerprint(t *scrape.Target, s *pipeline.Pipeline) string {
	return fmt.Sprintf("%s|%s|%s|%v|%s|%s|%v|%d|%v|%v|%v|%v|%d", t.Name, t.URL.String(), t.Role, t.Labels, t.Engine,
		t.Interval, t.Timeout, s.Config.Global.BodySizeLimitBytes, s.Config.Global.HeadroomTokens, s.PlanOptions(), t.Compression, t.Limits, t.MaxRunning)
}

// apply makes s the running setup: loops of removed or changed targets
// stop, new ones start; counters carry over by name. It runs on Run's
// goroutine only.
func (d *Daemon) apply(ctx context.Context, s *pipeline.Pipeline) {
	if d.opts.Discovered != nil {
		s = d.opts.Discovered(s)
	}
	s = d.opts.Shard.apply(s)
	d.setup.Store(s)
	keys := make(map[string]string, len(s.Targets))
	var stop []*targetState
	d.mu.RLock()
	for _, t := range s.Targets {
		keys[t.Name] = fingerprint(t, s)
	}
	for name, st := range d.states {
		if k, ok := keys[name]; !ok || k != st.key {
			stop = append(stop, st)
		}
	}
	d.mu.RUnlock()
	for _, st := range stop { // stopped first, so their counts are final
		st.cancel()
		<-st.done
	}

	var start []*targetState
	d.mu.Lock()
	order := make([]string, 0, len(s.Targets))
	for _, t := range s.Targets {
		order = append(order, t.Name)
		old := d.states[t.Name]
		if old != nil && old.key == keys[t.Name] {
			continue
		}
		st := &targetState{key: keys[t.Name], target: t, done: make(chan struct{}), tracker: s.NewTracker()}
		st.e = entry{target: t, role: t.Role}
		if st.e.role == "" {
			st.e.role = kv.RoleUnified
		}
		if old != nil {
			st.e.scrapes, st.e.failures, st.e.lastSuccess, st.e.changes = old.e.scrapes, old.e.failures, old.e.lastSuccess, old.e.changes
		}
		d.states[t.Name] = st
		start = append(start, st)
	}
	for name := range d.states {
		if _, ok := keys[name]; !ok {
			delete(d.states, name)
		}
	}
	d.order = order
	d.mu.Unlock()
	d.targetCount.Set(float64(len(order)))

	var round *sync.WaitGroup
	if len(start) == 0 {
		d.ready.Store(true)
	} else if !d.ready.Load() {
		round = &sync.WaitGroup{}
		round.Add(len(start))
		go func() {
			round.Wait()
			d.ready.Store(true)
		}()
	}
	for _, st := range start {
		lctx, cancel := context.WithCancel(ctx)
		st.cancel = cancel
		go d.loop(lctx, st, round)
	}
}

// stopAll stops every loop and waits for them.
func (d *Daemon) stopAll() {
	d.mu.Lock()
	all := make([]*targetState, 0, len(d.states))
	for _, st := range d.states {
		all = append(all, st)
	}
	d.mu.Unlock()
	for _, st := range all {
		if st.cancel != nil {
			st.cancel()
			<-st.done
		}
	}
}

// offset spreads targets over their interval, the same for a target every
// time (like Prometheus), so restarts keep the spacing.
func offset(t *scrape.Target) time.Duration {
	if t.Interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name))
	h.Write([]byte(t.URL.String()))
	return time.Duration(h.Sum64() % uint64(t.Interval))
}

// loop scrapes one target every interval until ctx ends. Scrapes of one
// target never overlap: a slow scrape delays the next, and every slot that
// could not start on time counts as a deadline miss.
func (d *Daemon) loop(ctx context.Context, st *targetState, round *sync.WaitGroup) {
	defer close(st.done)
	first := true
	defer func() {
		if first && round != nil {
			round.Done()
		}
	}()
	iv := st.target.Interval
	if iv <= 0 {
		iv = config.DefaultScrapeInterval
	}
	next := time.Now().Add(offset(st.target))
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if !d.scrapeAndRecord(ctx, st) {
			return
		}
		if first {
			first = false
			if round != nil {
				round.Done()
			}
		}
		next = next.Add(iv)
		if now := time.Now(); now.After(next) {
			missed := now.Sub(next)/iv + 1
			d.deadlineMisses.Add(float64(missed))
			next = next.Add(missed * iv)
		}
		timer.Reset(time.Until(next))
	}
}

// workerIdleTimeout is how long a scrape worker waits for work before it
// stops.
const workerIdleTimeout = 30 * time.Second

// scrapeAndRecord scrapes st's target within the concurrency bound on one
// of the pool's workers, and records the result; false when ctx ended
// first.
//
// A target whose last scrape timed out (a hanging one) holds its slot for
// its whole timeout, a healthy one for milliseconds: the slots taken in
// turn, 900 hanging targets at a 4 s timeout every 5 s would ask for 720
// of 256 slots, and every target, the healthy ones too, would wait its
// turn behind them. Such targets first take one of half the slots
// (timedOut), so the other half stays for the rest.
func (d *Daemon) scrapeAndRecord(ctx context.Context, st *targetState) bool {
	if st.timedOut {
		select {
		case d.timedOut <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		defer func() { <-d.timedOut }()
	}
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-d.sem }()
	ok := false
	d.workers.run(func() {
		res := d.setup.Load().Scraper().Scrape(ctx, st.target)
		st.timedOut = res.Reason == signal.ReasonTimeout
		if ok = ctx.Err() == nil; ok {
			d.record(st, res)
		}
	})
	return ok
}

// scrapeOnce scrapes t within the concurrency bound; ok is false when ctx
// ended first.
func (d *Daemon) scrapeOnce(ctx context.Context, t *scrape.Target) (scrape.Result, bool) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return scrape.Result{}, false
	}
	res := d.setup.Load().Scraper().Scrape(ctx, t)
	<-d.sem
	if ctx.Err() != nil {
		return res, false
	}
	return res, true
}

// record stores a result as the target's latest state.
func (d *Daemon) record(st *targetState, res scrape.Result) {
	row := st.tracker.Row(&res)
	d.mu.Lock()
	prev := st.e
	e := &st.e
	e.scraped = true
	e.res = res
	e.row = row
	e.scrapes++
	if res.OK() {
		e.lastSuccess = res.Time.Add(res.Duration)
		e.role = res.Server.Role // the configured role, or the engine's; cache for a page of tiers only (scrape.Target)
	} else {
		e.failures[reasonIndex(res.Reason)]++
	}
	for _, what := range res.Changed {
		if i := slices.Index(signal.Changes[:], what); i >= 0 {
			e.changes[i]++
		}
	}
	d.mu.Unlock()
	switch {
	case !res.OK() && (!prev.scraped || prev.res.OK() || prev.res.Reason != res.Reason):
		d.log.Warn("target down", "target", st.target.Name, "url", safetext.URL(st.target.URL, st.target.SecretParams...), "reason", res.Reason, "err", res.Err)
	case res.OK() && prev.scraped && !prev.res.OK():
		d.log.Info("target up again", "target", st.target.Name, "url", safetext.URL(st.target.URL, st.target.SecretParams...))
	}
	if len(res.Changed) > 0 {
		// Once per change: the page's later scrapes carry the warning
		// (scrape.DialectWarnFor), not the log.
		d.log.Warn("target's page changed", "target", st.target.Name, "url", safetext.URL(st.target.URL, st.target.SecretParams...),
			"changed", strings.Join(res.Changed, ","), "engine", res.Dialect.Engine, "fingerprint", res.Dialect.Fingerprint,
			"format", res.Dialect.Format, "escaping", res.Dialect.Escaping)
	}
	if res.PrevEngine != "" {
		d.log.Warn("target's engine changed", "target", st.target.Name, "url", safetext.URL(st.target.URL, st.target.SecretParams...),
			"from", res.PrevEngine, "to", res.Server.Engine, "role", res.Server.Role)
	}
}

// entries snapshots every target's latest state, in config order.
func (d *Daemon) entries() []entry {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]entry, 0, len(d.order))
	for _, name := range d.order {
		if st := d.states[name]; st != nil {
			out = append(out, st.e)
		}
	}
	return out
}

// Report returns the latest report: one row per target scraped at least
// once, in config order, and the fleet line. It is the JSON schema of
// `kvwatch status --output json`.
func (d *Daemon) Report() report.Report {
	es := d.entries()
	r := report.Report{Schema: report.SchemaVersion, Time: time.Now(), Servers: make([]report.Server, 0, len(es))}
	for _, e := range es {
		if !e.scraped {
			continue
		}
		r.Servers = append(r.Servers, e.row)
	}
	d.setup.Load().Summarize(&r)
	return r
}
