package cli

import (
	"context"
	"errors"
	"os"
	ossignal "os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/serve"
)

// serveOpts are the flags of kvwatch serve.
type serveOpts struct {
	configFile     string
	targets        []string
	listen         []string
	webConfigFile  string
	insecureListen bool
	maxScrapes     int
	embedded       embeddedFlags
}

func addServe(app *kingpin.Application, r registry) {
	o := &serveOpts{}
	c := app.Command("serve", "Scrape engines and export normalized kvwatch_* metrics for Prometheus, with /probe, a JSON report, health and reload endpoints; see docs/configuration.md and docs/metrics.md.")
	c.Arg("target", "Servers to scrape besides the config file's, as [ROLE=]URL, e.g. decode=http://127.0.0.1:30002.").StringsVar(&o.targets)
	c.Flag("config.file", "kvwatch config file: targets, file_sd, intervals, auth, headroom sizes, probe allowlist (reloaded on SIGHUP and POST /-/reload).").PlaceHolder("FILE").StringVar(&o.configFile)
	c.Flag("web.listen-address", "Address to listen on; repeat for several. Loopback by default; another address needs --web.config.file with both TLS and authentication, or --web.insecure-listen.").Default(serve.DefaultListenAddress).StringsVar(&o.listen)
	c.Flag("web.config.file", "exporter-toolkit web config file enabling TLS and basic auth (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md).").PlaceHolder("FILE").StringVar(&o.webConfigFile)
	c.Flag("web.insecure-listen", "Allow a non-loopback listen address without TLS and authentication in --web.config.file, for TLS terminated by a proxy or a service mesh (logs a warning at every start).").BoolVar(&o.insecureListen)
	c.Flag("scrape.max-concurrent", "Scrapes in flight at once over all targets and probes.").Default("256").IntVar(&o.maxScrapes)
	o.embedded.register(c)
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

	// Build the daemon.
	d, err := serve.New(serve.Options{
		ConfigFile:           o.configFile,
		Targets:              extra,
		Engines:              engine.NewRegistry(),
		ListenAddresses:      o.listen,
		WebConfigFile:        o.webConfigFile,
		InsecureListen:       o.insecureListen,
		Registry:             own,
		Logger:               e.Logger,
		MaxConcurrentScrapes: o.maxScrapes,
	})
	if err != nil {
		return usageError{err}
	}
	emb, err := attachEmbedded(e, d, o.embedded)
	if err != nil {
		return err
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
	return emb.run(ctx, d)
}
