package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	ossignal "os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/promapi"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// queryFlags bound the query API (/api/v1/query, query_range).
type queryFlags struct {
	timeout        time.Duration
	maxSamples     int
	maxConcurrency int
	maxQueued      int
	maxLength      int
	maxLabelBytes  int
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
	c.Flag("query.max-label-bytes", "Most bytes of label sets one query's label_join and label_replace calls may build.").Default(strconv.Itoa(promapi.DefaultMaxLabelBytes)).IntVar(&f.maxLabelBytes)
}

// apply sets the bounds in o.
func (f *queryFlags) apply(o *promapi.Options) {
	o.Timeout, o.MaxSamples, o.MaxConcurrency, o.MaxQueued, o.MaxQueryLength = f.timeout, f.maxSamples, f.maxConcurrency, f.maxQueued, f.maxLength
	o.MaxLabelBytes = f.maxLabelBytes
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
	allowedHosts   []string
	maxConns       int
	maxScrapes     int
	embedded       embeddedFlags
	fleet          fleetFlags // serve_fleet.go: --shard, --remote-write.*
}

func addServe(app *kingpin.Application, r registry) {
	o := &serveOpts{}
	c := app.Command("serve", "Scrape engines and export normalized kvwatch_* metrics for Prometheus, with /probe, a JSON report, health and reload endpoints; see docs/configuration.md and docs/metrics.md.")
	c.Arg("target", "Servers to scrape besides the config file's, as [ROLE=]URL, e.g. decode=http://127.0.0.1:30002.").StringsVar(&o.targets)
	c.Flag("config.file", "kvwatch config file: targets, file_sd, intervals, auth, headroom sizes, probe allowlist (reloaded on SIGHUP and POST /-/reload).").PlaceHolder("FILE").StringVar(&o.configFile)
	c.Flag("web.listen-address", "Address to listen on; repeat for several. Loopback by default; another address needs --web.config.file with both TLS and authentication, or --web.insecure-listen.").Default(signal.DefaultListenAddress).StringsVar(&o.listen)
	c.Flag("web.config.file", "exporter-toolkit web config file enabling TLS and basic auth (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md).").PlaceHolder("FILE").StringVar(&o.webConfigFile)
	c.Flag("web.insecure-listen", "Allow a non-loopback listen address without TLS and authentication in --web.config.file, for TLS terminated by a proxy or a service mesh (logs a warning at every start).").BoolVar(&o.insecureListen)
	c.Flag("web.allowed-hosts", "Host name clients may reach serve by, besides IP addresses, localhost, the listen addresses' names and this machine's; repeat for several, * for any. Other names are refused with 403 (DNS rebinding).").PlaceHolder("NAME").StringsVar(&o.allowedHosts)
	c.Flag("web.max-connections", "Connections open at once over all listen addresses; at the cap the one idle longest is closed for a new one, and a few spare ones answer the health checks.").Default(strconv.Itoa(serve.DefaultMaxConnections)).IntVar(&o.maxConns)
	c.Flag("scrape.max-concurrent", "Scrapes in flight at once over all targets and probes.").Default(strconv.Itoa(serve.DefaultMaxConcurrentScrapes)).IntVar(&o.maxScrapes)
	o.embedded.register(c)
	o.fleet.register(c)
	r.add(c, func(ctx context.Context, e *env) int { return exitCode(e, runServe(ctx, e, o)) })
}

func runServe(ctx context.Context, e *env, o *serveOpts) error {
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
	if o.maxConns < 1 {
		return usageError{fmt.Errorf("--web.max-connections %d: must be at least 1 (serve always caps its connections)", o.maxConns)}
	}
	own := prometheus.NewRegistry()
	own.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("kvwatch"))
	ao := app.Options{
		Sources:              config.Sources{File: o.configFile, Extra: extra},
		ListenAddresses:      o.listen,
		WebConfigFile:        o.webConfigFile,
		InsecureListen:       o.insecureListen,
		AllowedHosts:         o.allowedHosts,
		MaxConnections:       o.maxConns,
		Registry:             own,
		Logger:               e.Logger,
		MaxConcurrentScrapes: o.maxScrapes,
	}
	if err := o.fleet.apply(&ao); err != nil {
		return usageError{err}
	}
	if err := o.embedded.apply(&ao); err != nil {
		return err
	}
	srv, err := app.New(ao)
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
				_ = srv.Reload(ctx) // logged by the runtime; the old config keeps running
			}
		}
	}()
	return srv.Run(ctx)
}

// embeddedFlags are serve's flags for the embedded history, rules and UI.
type embeddedFlags struct {
	history       string
	fullRes       string
	downStep      string
	snapshotFile  string
	snapshotSet   bool // --history.snapshot-file given, "" included
	ruleFiles     []string
	alertmanagers []string
	query         queryFlags
}

func (f *embeddedFlags) register(c *kingpin.CmdClause) {
	c.Flag("history", "In-memory history window for the web UI, the query API and alert rules, e.g. 6h; 0 turns history, rules and charts off. Default: the config's history.retention.").PlaceHolder("DURATION").StringVar(&f.history)
	c.Flag("history.full-resolution", "How much of the newest history keeps every scrape; older data is downsampled to --history.downsample-step.").Default(model.Duration(history.DefaultFullResolution).String()).StringVar(&f.fullRes)
	c.Flag("history.downsample-step", "Resolution of history older than --history.full-resolution (the newest sample of each step, plus the samples around counter resets and staleness markers).").Default(model.Duration(history.DefaultDownsampleStep).String()).StringVar(&f.downStep)
	c.Flag("history.snapshot-file", "File the history is written to periodically and on shutdown, and restored from on start, so a restart keeps the window; \"\" turns snapshots off. Default: the config's history.snapshot_file, else history.snapshot in the state directory ($STATE_DIRECTORY, else $XDG_STATE_HOME/kvwatch, else ~/.local/state/kvwatch).").PlaceHolder("FILE").IsSetByUser(&f.snapshotSet).StringVar(&f.snapshotFile)
	c.Flag("rules.file", "Prometheus rule file (recording and alert rules) to evaluate over the history; repeat for several. Default: the rules `kvwatch stack generate` writes, with the config's alert thresholds.").PlaceHolder("FILE").StringsVar(&f.ruleFiles)
	c.Flag("alertmanager.url", "Alertmanager base URL to send alerts to (its v2 API); repeat for several. Added to the config's alerting.alertmanagers.").PlaceHolder("URL").StringsVar(&f.alertmanagers)
	f.query.register(c)
}

// apply sets the history, rules and query options of o from the flags.
func (f *embeddedFlags) apply(o *app.Options) error {
	if f.history != "" {
		r, err := parseDuration(f.history)
		if err != nil {
			return usageError{fmt.Errorf("--history: %w", err)}
		}
		d := time.Duration(r)
		o.History = &d
	}
	if f.snapshotSet {
		o.SnapshotFile = &f.snapshotFile
	}
	for _, fl := range []struct {
		name, val string
		to        *time.Duration
	}{{"--history.full-resolution", f.fullRes, &o.FullResolution}, {"--history.downsample-step", f.downStep, &o.DownsampleStep}} {
		if fl.val != "" {
			d, err := parseDuration(fl.val)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", fl.name, err)}
			}
			if d <= 0 {
				return usageError{fmt.Errorf("%s %s: give a positive duration, e.g. %s", fl.name, fl.val, model.Duration(history.DefaultDownsampleStep))}
			}
			*fl.to = time.Duration(d)
		}
	}
	o.RuleFiles = f.ruleFiles
	for _, u := range f.alertmanagers {
		if _, err := alerting.NewAlertmanager(u, nil); err != nil {
			return usageError{fmt.Errorf("--alertmanager.url: %w", err)}
		}
	}
	o.Alertmanagers = f.alertmanagers
	f.query.apply(&o.Query)
	return nil
}
