package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	ossignal "os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/promapi"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/web"
)

// queryFlags bound the query API (/api/v1/query, query_range).
type queryFlags struct {
	timeout        time.Duration
	maxSamples     int
	maxConcurrency int
	maxQueued      int
	maxLength      int
	// queuedGiven: --query.max-queued was on the command line, so its 0
	// means none; a queryFlags nobody parsed (its zero value) means the
	// defaults, as promapi.Options' zero value does.
	queuedGiven bool
}

func (f *queryFlags) register(c *kingpin.CmdClause) {
	c.Flag("query.timeout", "Longest a query of the query API may run, queueing included.").Default(promapi.DefaultTimeout.String()).DurationVar(&f.timeout)
	c.Flag("query.max-samples", "Most samples one query may hold in memory at once.").Default(strconv.Itoa(promapi.DefaultMaxSamples)).IntVar(&f.maxSamples)
	c.Flag("query.max-concurrency", "Queries that run at once; more wait for a slot (see --query.max-queued).").Default(strconv.Itoa(promapi.DefaultMaxConcurrency)).IntVar(&f.maxConcurrency)
	c.Flag("query.max-queued", "Queries that may wait for a slot; beyond them a query is answered 503 at once; 0 for none.").Default(strconv.Itoa(promapi.DefaultMaxQueued)).IsSetByUser(&f.queuedGiven).IntVar(&f.maxQueued)
	c.Flag("query.max-length", "Longest query expression accepted, in bytes.").Default(strconv.Itoa(promapi.DefaultMaxQueryLength)).IntVar(&f.maxLength)
}

// apply sets the bounds in o.
func (f *queryFlags) apply(o *promapi.Options) {
	o.Timeout, o.MaxSamples, o.MaxConcurrency, o.MaxQueued, o.MaxQueryLength = f.timeout, f.maxSamples, f.maxConcurrency, f.maxQueued, f.maxLength
	if f.maxQueued == 0 && f.queuedGiven {
		o.MaxQueued = -1 // none (promapi reads 0 as its default)
	}
}

// serveOpts are the flags of kvwatch serve.
type serveOpts struct {
	configFile     string
	targets        []string
	listen         []string
	webConfigFile  string
	insecureListen bool
	maxScrapes     int
	embedded       embeddedFlags
	fleet          fleetFlags // serve_fleet.go: --shard, --remote-write.*
}

func addServe(app *kingpin.Application, r registry) {
	o := &serveOpts{}
	c := app.Command("serve", "Scrape engines and export normalized kvwatch_* metrics for Prometheus, with /probe, a JSON report, health and reload endpoints; see docs/configuration.md and docs/metrics.md.")
	c.Arg("target", "Servers to scrape besides the config file's, as [ROLE=]URL, e.g. decode=http://127.0.0.1:30002.").StringsVar(&o.targets)
	c.Flag("config.file", "kvwatch config file: targets, file_sd, intervals, auth, headroom sizes, probe allowlist (reloaded on SIGHUP and POST /-/reload).").PlaceHolder("FILE").StringVar(&o.configFile)
	c.Flag("web.listen-address", "Address to listen on; repeat for several. Loopback by default; another address needs --web.config.file with both TLS and authentication, or --web.insecure-listen.").Default(serve.DefaultListenAddress).StringsVar(&o.listen)
	c.Flag("web.config.file", "exporter-toolkit web config file enabling TLS and basic auth (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md).").PlaceHolder("FILE").StringVar(&o.webConfigFile)
	c.Flag("web.insecure-listen", "Allow a non-loopback listen address without TLS and authentication in --web.config.file, for TLS terminated by a proxy or a service mesh (logs a warning at every start).").BoolVar(&o.insecureListen)
	c.Flag("scrape.max-concurrent", "Scrapes in flight at once over all targets and probes.").Default(strconv.Itoa(serve.DefaultMaxConcurrentScrapes)).IntVar(&o.maxScrapes)
	o.embedded.register(c)
	o.fleet.register(c)
	r.add(c, func(ctx context.Context, e *env) int { return exitCode(e, runServe(ctx, e, o)) })
}

func runServe(ctx context.Context, e *env, o *serveOpts) error {
	// Build the config.
	var extra []config.Target
	for _, a := range o.targets {
		t, err := parseTargetArg(a)
		if err != nil {
			return usageError{err}
		}
		extra = append(extra, t)
	}
	if o.configFile == "" && len(extra) == 0 {
		return usageError{errors.New("no targets: give --config.file (see examples/kvwatch.yml) or URLs such as http://127.0.0.1:30000")}
	}
	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("kvwatch"))

	// Build the daemon with its history, rules and UI.
	d, emb, err := assembleServe(e, serve.Options{
		ConfigFile:           o.configFile,
		Targets:              extra,
		Engines:              engine.NewRegistry(),
		ListenAddresses:      o.listen,
		WebConfigFile:        o.webConfigFile,
		InsecureListen:       o.insecureListen,
		Registry:             own,
		Logger:               e.Logger,
		MaxConcurrentScrapes: o.maxScrapes,
		Shard:                o.fleet.shard,
	}, o.embedded)
	if err != nil {
		return err
	}
	rw, err := o.fleet.remoteWriter(e, d, o.configFile)
	if err != nil {
		return usageError{err}
	}

	// Run it; SIGHUP reloads (main turns SIGINT and SIGTERM into ctx).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	defer ossignal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_ = d.Reload(ctx) // logged by the daemon; the old config keeps running
			}
		}
	}()
	return o.fleet.run(ctx, rw, func(ctx context.Context) error { return emb.run(ctx, e, d) })
}

// embeddedFlags are serve's flags for the embedded history, rules and UI.
type embeddedFlags struct {
	history       string
	fullRes       string
	downStep      string
	snapshotFile  string
	ruleFiles     []string
	alertmanagers []string
	query         queryFlags
}

func (f *embeddedFlags) register(c *kingpin.CmdClause) {
	c.Flag("history", "In-memory history window for the web UI, the query API and alert rules, e.g. 6h; 0 turns history, rules and charts off. Default: the config's history.retention.").PlaceHolder("DURATION").StringVar(&f.history)
	c.Flag("history.full-resolution", "How much of the newest history keeps every scrape; older data is downsampled to --history.downsample-step.").Default(model.Duration(history.DefaultFullResolution).String()).StringVar(&f.fullRes)
	c.Flag("history.downsample-step", "Resolution of history older than --history.full-resolution (the newest sample of each step, plus the samples around counter resets and staleness markers).").Default(model.Duration(history.DefaultDownsampleStep).String()).StringVar(&f.downStep)
	c.Flag("history.snapshot-file", "File the history is written to periodically and on shutdown, and restored from on start, so a restart keeps the window. Default: the config's history.snapshot_file (none).").PlaceHolder("FILE").StringVar(&f.snapshotFile)
	c.Flag("rules.file", "Prometheus rule file (recording and alert rules) to evaluate over the history; repeat for several. Default: the rules `kvwatch stack generate` writes, with the config's alert thresholds.").PlaceHolder("FILE").StringsVar(&f.ruleFiles)
	c.Flag("alertmanager.url", "Alertmanager base URL to send alerts to (its v2 API); repeat for several. Added to the config's alerting.alertmanagers.").PlaceHolder("URL").StringsVar(&f.alertmanagers)
	f.query.register(c)
}

// embedded is the history, rule manager and UI attached to a daemon.
type embedded struct {
	store *history.Store
	rules *alerting.Manager
}

// historyGCPercent is the garbage collector's target (GOGC) while serve
// keeps history, unless the GOGC environment variable sets one. The
// history's closed chunks live outside the Go heap; what stays on it is
// mostly long-lived bookkeeping (series, chunk lists, open chunks,
// connections), and Go's default (100) lets the process grow to twice
// that before collecting (Prometheus lowered its default to 75 for the
// same reason). Measured in docs/benchmarks.md ("serve with history"):
// 1,000 endpoints over 24h at 234–263 MiB resident (peak 265 MiB) with 35
// against 252–288 (peak 301) with 50, for the same CPU. GOMEMLIMIT, when
// set, is honoured as well.
const historyGCPercent = 35

// setHistoryGC sets the collector's target for the run of a serve that
// keeps history and returns what restores the previous one. GOGC is the
// process's: only the run that owns the process (Run, below) sets it, never
// the assembly, so building a serve (as tests do) leaves it alone.
func setHistoryGC(e *env) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(historyGCPercent)
	e.Logger.Debug("history is on: garbage collector target set", "GOGC", historyGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// assembleServe builds `kvwatch serve` (and `kvwatch demo`'s serve): the
// daemon, then the history, rules, notifiers, query API and web UI from the
// flags and the daemon's config, with their routes on the daemon.
func assembleServe(e *env, o serve.Options, f embeddedFlags) (*serve.Daemon, *embedded, error) {
	d, err := serve.New(o)
	if err != nil {
		return nil, nil, usageError{err}
	}
	emb, err := attachEmbedded(e, d, f)
	if err != nil {
		return nil, nil, err
	}
	return d, emb, nil
}

// attachEmbedded builds the history, rules, query API and web UI from the
// flags and the daemon's config, and registers their routes on d.
func attachEmbedded(e *env, d *serve.Daemon, f embeddedFlags) (*embedded, error) {
	cfg := d.Setup().Config
	if cfg == nil {
		cfg = config.Default()
	}
	h := cfg.History
	if f.history != "" {
		r, err := parseDuration(f.history)
		if err != nil {
			return nil, usageError{fmt.Errorf("--history: %w", err)}
		}
		h.Retention = r
	}
	if f.snapshotFile != "" {
		h.SnapshotFile = f.snapshotFile
	}
	var tiers [2]time.Duration
	for i, fl := range []struct{ name, val string }{{"--history.full-resolution", f.fullRes}, {"--history.downsample-step", f.downStep}} {
		if fl.val != "" {
			d, err := parseDuration(fl.val)
			if err != nil {
				return nil, usageError{fmt.Errorf("%s: %w", fl.name, err)}
			}
			tiers[i] = time.Duration(d)
		}
	}
	emb := &embedded{}
	interval := time.Duration(cfg.Global.ScrapeInterval)
	if h.Retention > 0 {
		emb.store = history.New(history.Options{Retention: time.Duration(h.Retention), Interval: interval,
			FullResolution: tiers[0], DownsampleStep: tiers[1],
			SnapshotFile: h.SnapshotFile, SnapshotInterval: time.Duration(h.SnapshotInterval), Logger: e.Logger})
		if err := emb.store.Restore(time.Now()); err != nil && !errors.Is(err, history.ErrNoSnapshot) {
			return nil, err
		}
		if err := d.RegisterOwn(emb.store.Collector()); err != nil {
			return nil, fmt.Errorf("history metrics: %w", err)
		}
		groups, err := ruleGroups(f.ruleFiles, cfg)
		if err != nil {
			return nil, usageError{err}
		}
		var notifiers []alerting.Notifier
		for _, u := range append(append([]string{}, cfg.Alerting.Alertmanagers...), f.alertmanagers...) {
			am, err := alerting.NewAlertmanager(u, nil)
			if err != nil {
				return nil, usageError{fmt.Errorf("--alertmanager.url: %w", err)}
			}
			notifiers = append(notifiers, am)
		}
		for _, u := range cfg.Alerting.Webhooks {
			wh, err := alerting.NewWebhook(u, nil)
			if err != nil {
				return nil, usageError{fmt.Errorf("alerting.webhooks: %w", err)}
			}
			notifiers = append(notifiers, wh)
		}
		emb.rules, err = alerting.New(alerting.Options{Groups: groups, Interval: time.Duration(cfg.Global.EvaluationInterval), Storage: emb.store,
			Notifiers: notifiers, ExternalURL: externalURL(d), Logger: e.Logger})
		if err != nil {
			return nil, usageError{fmt.Errorf("rules: %w", err)}
		}
		api := promapi.Options{Queryable: emb.store, Logger: e.Logger, Version: version.Version,
			Revision: version.Revision, Branch: version.Branch, BuildDate: version.BuildDate, Rules: emb.rules}
		f.query.apply(&api)
		promapi.New(api).Register(d)
	}
	web.Register(d, web.Options{Report: d.Report, Warning: cfg.Alerts.KVUsageWarning, Critical: cfg.Alerts.KVUsageCritical,
		HistorySeconds: time.Duration(h.Retention).Seconds(), HistoryEnabled: emb.store != nil, AlertsEnabled: emb.rules != nil,
		ScrapeIntervalSeconds: interval.Seconds(), FullResolutionSeconds: tiers[0].Seconds(), DownsampleStepSeconds: tiers[1].Seconds()})
	if err := web.CheckAssets(); err != nil {
		e.Logger.Warn("web UI unavailable", "err", err)
	}
	return emb, nil
}

// ruleGroups reads the rule files, or returns the stack's generated rules
// (the same groups `kvwatch stack generate` writes) when there are none.
func ruleGroups(files []string, cfg *config.Config) ([]rulefmt.RuleGroup, error) {
	if len(files) > 0 {
		return alerting.LoadFiles(files)
	}
	o := stack.Options{Config: cfg}
	return stack.ServeRules(o), nil
}

// externalURL is the UI's URL on the daemon's first address.
func externalURL(d *serve.Daemon) string {
	for _, a := range d.Addrs() {
		return "http://" + a.String() + "/"
	}
	return ""
}

// run runs the daemon with the history and rules until ctx ends.
func (emb *embedded) run(ctx context.Context, e *env, d *serve.Daemon) error {
	if emb.store == nil {
		return d.Run(ctx)
	}
	defer setHistoryGC(e)()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var histErr error
	wg.Add(2)
	go func() { defer wg.Done(); histErr = emb.store.Run(ctx, daemonFeeder{d}) }()
	go func() { defer wg.Done(); emb.rules.Run(ctx) }()
	err := d.Run(ctx)
	cancel()
	wg.Wait()
	return errors.Join(err, histErr)
}

// daemonFeeder lets the history record the daemon's samples straight from
// its latest scrapes (history.Feeder) instead of gathering metric
// families every interval.
type daemonFeeder struct{ d *serve.Daemon }

func (f daemonFeeder) Gather() ([]*dto.MetricFamily, error) { return f.d.Gatherer().Gather() }
func (f daemonFeeder) Feed(b *history.Batch)                { f.d.Walk(b.Add) }
