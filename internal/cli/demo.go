package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/version"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/promapi"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/web"
)

// embeddedFlags are serve's flags for the embedded history, rules and UI.
type embeddedFlags struct {
	history       string
	fullRes       string
	downStep      string
	snapshotFile  string
	ruleFiles     []string
	alertmanagers []string
}

func (f *embeddedFlags) register(c *kingpin.CmdClause) {
	c.Flag("history", "In-memory history window for the web UI, the query API and alert rules, e.g. 6h; 0 turns history, rules and charts off. Default: the config's history.retention (1h).").PlaceHolder("DURATION").StringVar(&f.history)
	c.Flag("history.full-resolution", "How much of the newest history keeps every scrape; older data is downsampled to --history.downsample-step. Default 1h.").PlaceHolder("DURATION").StringVar(&f.fullRes)
	c.Flag("history.downsample-step", "Resolution of history older than --history.full-resolution (the newest sample of each step, plus the samples around counter resets and staleness markers). Default 1m.").PlaceHolder("DURATION").StringVar(&f.downStep)
	c.Flag("history.snapshot-file", "File the history is written to periodically and on shutdown, and restored from on start, so a restart keeps the window. Default: the config's history.snapshot_file (none).").PlaceHolder("FILE").StringVar(&f.snapshotFile)
	c.Flag("rules.file", "Prometheus rule file (recording and alert rules) to evaluate over the history; repeat for several. Default: the rules `kvwatch stack generate` writes, with the config's alert thresholds.").PlaceHolder("FILE").StringsVar(&f.ruleFiles)
	c.Flag("alertmanager.url", "Alertmanager base URL to send alerts to (its v2 API); repeat for several. Added to the config's alerting.alertmanagers.").PlaceHolder("URL").StringsVar(&f.alertmanagers)
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

func setHistoryGC(e *env) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(historyGCPercent)
	e.Logger.Debug("history is on: garbage collector target set", "GOGC", historyGCPercent)
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
		setHistoryGC(e)
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
		emb.rules, err = alerting.New(alerting.Options{Groups: groups, Interval: interval, Storage: emb.store,
			Notifiers: notifiers, ExternalURL: externalURL(d), Logger: e.Logger})
		if err != nil {
			return nil, usageError{fmt.Errorf("rules: %w", err)}
		}
		api := promapi.Options{Queryable: emb.store, Logger: e.Logger, Version: version.Version,
			Revision: version.Revision, Branch: version.Branch, BuildDate: version.BuildDate, Rules: emb.rules}
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
	o := stack.Options{Config: cfg, Alerts: cfg.Alerts}
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
func (emb *embedded) run(ctx context.Context, d *serve.Daemon) error {
	if emb.store == nil {
		return d.Run(ctx)
	}
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

// demoOpts are the flags of kvwatch demo.
type demoOpts struct {
	scenario string
	listen   string
	speed    float64
	embedded embeddedFlags
}

func addDemo(app *kingpin.Application, r registry) {
	o := &demoOpts{}
	c := app.Command("demo", "Start a simulated PD cluster and kvwatch serve with history, alerts and the web UI on loopback; prints the URL and a status line. Ctrl-C stops everything.")
	c.Flag("scenario", "Simulator scenario: a built-in name ("+strings.Join(sim.BuiltinNames(), ", ")+") or a scenario file.").Default("pd-sglang").StringVar(&o.scenario)
	c.Flag("web.listen-address", "Address of the web UI and API (loopback).").Default(serve.DefaultListenAddress).StringVar(&o.listen)
	c.Flag("speed", "Simulated time per wall-clock second.").Default("1").Float64Var(&o.speed)
	o.embedded.register(c)
	r.add(c, func(ctx context.Context, e *env) int { return exitCode(e, runDemo(ctx, e, o)) })
}

func runDemo(ctx context.Context, e *env, o *demoOpts) error {
	sc, err := sim.LoadScenarioOrBuiltin(o.scenario)
	if err != nil {
		return usageError{err}
	}
	if o.speed <= 0 {
		return usageError{fmt.Errorf("--speed must be positive, got %g", o.speed)}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := sim.NewCluster(sc, sim.Options{Speed: o.speed, Logger: e.Logger})
	if err != nil {
		return usageError{err}
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close()
	d, emb, err := demoDaemon(e, c, nil, o.listen, o.embedded)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- emb.run(ctx, d) }()
	url := externalURL(d)
	fmt.Fprintf(e.Stdout, "kvwatch demo: %d simulated servers (%s)\n", len(c.Endpoints()), sc.Name)
	fmt.Fprintf(e.Stdout, "web UI:  %s\nmetrics: %smetrics\nPrometheus API: %sapi/v1/query\nStop with Ctrl-C.\n", url, url, url)
	statusLoop(ctx, e, d, emb, done)
	cancel()
	return <-done
}

// demoDaemon builds serve for the simulated endpoints, with history and
// rules attached; cfg nil means config.Default().
func demoDaemon(e *env, c *sim.Cluster, cfg *config.Config, listen string, f embeddedFlags) (*serve.Daemon, *embedded, error) {
	var targets []config.Target
	for _, ep := range c.Endpoints() {
		targets = append(targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, Role: ep.Role})
	}
	if cfg == nil {
		cfg = config.Default()
	}
	d, err := serve.New(serve.Options{Config: cfg, Targets: targets, Engines: engine.NewRegistry(),
		ListenAddresses: []string{listen}, Logger: e.Logger})
	if err != nil {
		return nil, nil, usageError{err}
	}
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "127.0.0.1" && host != "localhost" && host != "::1" {
		return nil, nil, usageError{fmt.Errorf("--web.listen-address %s: the demo listens on loopback only", listen)}
	}
	emb, err := attachEmbedded(e, d, f)
	if err != nil {
		return nil, nil, err
	}
	return d, emb, nil
}

// statusLoop prints a status line from the report until ctx ends or the
// daemon stops: rewritten in place on a terminal, one line every 5s
// otherwise.
func statusLoop(ctx context.Context, e *env, d *serve.Daemon, emb *embedded, done chan error) {
	every := 5 * time.Second
	if e.Interactive {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if e.Interactive {
				fmt.Fprintln(e.Stdout)
			}
			return
		case err := <-done:
			done <- err
			return
		case <-t.C:
			line := statusLine(d.Report(), emb)
			if e.Interactive {
				fmt.Fprintf(e.Stdout, "\r\033[K%s", line)
			} else {
				io.WriteString(e.Stdout, line+"\n")
			}
		}
	}
}

// statusLine summarizes the fleet: usage per KV server, then alerts.
func statusLine(r report.Report, emb *embedded) string {
	var parts []string
	for _, s := range r.Servers {
		if s.Role == kv.RoleRouter {
			continue
		}
		name := s.Name
		if string(s.Role) != s.Name {
			name = fmt.Sprintf("%s (%s)", s.Name, s.Role)
		}
		if !s.OK || s.Server == nil {
			parts = append(parts, fmt.Sprintf("%s DOWN: %s", name, orDash(s.Reason)))
			continue
		}
		v := s.Server
		part := fmt.Sprintf("%s KV %s %s tok, run=%s queue=%s", name, percent(v.UsageRatio), count(v.Used), count(v.Running), count(v.Queued.QueuedTotal()))
		if len(s.Headroom) > 0 {
			part += fmt.Sprintf(", fits %s×%s", count(s.Headroom[0].Requests), tokens(s.Headroom[0].Tokens))
		}
		parts = append(parts, part)
	}
	f := r.Fleet
	parts = append(parts, "fleet KV "+percent(f.UsageRatio))
	line := time.Now().Format("15:04:05") + "  " + strings.Join(parts, " | ")
	if emb.rules != nil {
		firing, pending := 0, 0
		for _, a := range emb.rules.Alerts() {
			if a.State == alerting.StateFiring {
				firing++
			} else {
				pending++
			}
		}
		line += fmt.Sprintf(" | alerts: %d firing, %d pending", firing, pending)
	}
	return line
}

// daemonFeeder lets the history record the daemon's samples straight from
// its latest scrapes (history.Feeder) instead of gathering metric
// families every interval.
type daemonFeeder struct{ d *serve.Daemon }

func (f daemonFeeder) Gather() ([]*dto.MetricFamily, error) { return f.d.Gatherer().Gather() }
func (f daemonFeeder) Feed(b *history.Batch)                { f.d.Walk(b.Add) }
