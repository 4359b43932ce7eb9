package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/forecast"
)

// exitDataMissing is plan's exit code when no pool needs servers but some
// pool could not be planned, or the store could not be read.
const exitDataMissing = 3

// planOptions are the flags of `kvwatch plan`.
type planOptions struct {
	against    string
	httpConfig string
	timeout    time.Duration
	configFile string
	window     string
	period     string
	horizon    string
	resolution string
	at         string
	output     string
}

// addPlan registers `kvwatch plan`.
func addPlan(app *kingpin.Application, r registry) {
	o := &planOptions{}
	cmd := app.Command("plan", "Project each pool's KV capacity over days from a central store: the daily peak of KV load and its trend, the dates the peak reaches the warning threshold, full and the end of N-1 safety, and the servers to add per pool (docs/planning.md). Exit code 0: nothing needed within the horizon; 1: some pool needs servers; 2: usage error; 3: data missing (the store could not be read, holds no kvwatch series, or a pool has too little history).")
	cmd.Flag("against", "Base URL of the Prometheus-compatible API holding the kvwatch_* series: Prometheus, VictoriaMetrics, Mimir, Thanos or kvwatch serve. Required.").PlaceHolder("URL").StringVar(&o.against)
	cmd.Flag("against.http-config", "Auth and TLS for --against, in the keys a kvwatch target uses (basic_auth, authorization, bearer_token_file, tls_config, proxy_url).").PlaceHolder("FILE").StringVar(&o.httpConfig)
	cmd.Flag("against.timeout", "Timeout of all the queries against --against; the store is told to stop evaluating then too.").Default(model.Duration(forecast.DefaultTimeout).String()).DurationVar(&o.timeout)
	cmd.Flag("config.file", "kvwatch config file whose alerts.kv_usage_warning (the threshold the peak is to stay under) and alerts.kv_usage_warning_for (how long a peak must last to count: the default --resolution) the plan uses. Default: their defaults, 0.9 and 10m.").PlaceHolder("FILE").StringVar(&o.configFile)
	cmd.Flag("window", "How much history to fit: the trend starts at most this far back.").Default(forecast.FormatDuration(forecast.DefaultWindow)).StringVar(&o.window)
	cmd.Flag("period", "The period of one peak: a day removes the daily cycle, a week the weekly one (with a longer --window).").Default(forecast.FormatDuration(forecast.DefaultPeriod)).StringVar(&o.period)
	cmd.Flag("horizon", "How far ahead to project dates and plan servers.").Default(forecast.FormatDuration(forecast.DefaultHorizon)).StringVar(&o.horizon)
	cmd.Flag("resolution", "Length of the windows each server's values are averaged over, and the step of each pool's sums within a period: a peak is the highest load the pool held for that long. A divisor of --period, no finer than the store's samples. Default: the config's alerts.kv_usage_warning_for (10m), the hold the warning needs to fire.").PlaceHolder("DURATION").StringVar(&o.resolution)
	cmd.Flag("at", "Plan as of this time (RFC 3339, or Unix seconds): the end of the window. Default: now. An earlier time checks a past plan against what came.").PlaceHolder("TIME").StringVar(&o.at)
	cmd.Flag("output", "Output format: text (a table for a ticket) or json (docs/planning.md).").Short('o').Default("text").EnumVar(&o.output, "text", "json")
	r.add(cmd, o.run)
}

// planRequest turns the flags into the store's request and the plan's
// options.
func (o *planOptions) planRequest(now time.Time) (*forecast.Store, forecast.Request, forecast.Options, error) {
	var req forecast.Request
	var opts forecast.Options
	durations := []struct {
		flag, value string
		def         time.Duration
		into        *time.Duration
	}{
		{"window", o.window, forecast.DefaultWindow, &req.Window},
		{"period", o.period, forecast.DefaultPeriod, &req.Period},
		{"horizon", o.horizon, forecast.DefaultHorizon, &opts.Horizon},
		{"resolution", o.resolution, 10 * time.Minute, &req.Resolution},
	}
	for _, d := range durations {
		if d.value == "" {
			continue // --resolution: from the config, below
		}
		v, err := parseDuration(d.value)
		if err != nil || v <= 0 {
			return nil, req, opts, fmt.Errorf("--%s %q: want a positive duration, e.g. %s", d.flag, d.value, forecast.FormatDuration(d.def))
		}
		*d.into = time.Duration(v)
	}
	if n := req.Periods(); n < forecast.MinPeriods {
		return nil, req, opts, fmt.Errorf("--window %s holds %d of --period %s; a trend needs %d: give --window %s or more",
			o.window, n, o.period, forecast.MinPeriods, forecast.FormatDuration(time.Duration(forecast.MinPeriods)*req.Period))
	}
	opts.At, opts.Period = now, req.Period
	if o.at != "" {
		at, err := parseTime(o.at)
		if err != nil {
			return nil, req, opts, err
		}
		if at.After(now) {
			return nil, req, opts, fmt.Errorf("--at %s is in the future: the store has nothing there yet", o.at)
		}
		opts.At = at
	}
	req.At = opts.At
	cfg := config.Default()
	if o.configFile != "" {
		c, err := config.LoadWithoutFiles(o.configFile)
		if err != nil {
			return nil, req, opts, err
		}
		cfg = c
	}
	opts.Warning = cfg.Alerts.KVUsageWarning
	if req.Resolution == 0 {
		req.Resolution = forecast.HoldResolution(req.Period, time.Duration(cfg.Alerts.KVUsageWarningFor))
	}
	if req.Resolution > req.Period || req.Period%req.Resolution != 0 {
		return nil, req, opts, fmt.Errorf("--resolution %s does not divide --period %s: give e.g. --resolution 10m", o.resolution, o.period)
	}

	if o.against == "" {
		return nil, req, opts, errors.New("--against is required: the base URL of the store holding the kvwatch_* series, e.g. --against http://prometheus:9090")
	}
	u, err := url.Parse(o.against)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, req, opts, fmt.Errorf("--against %q: want the http(s) base URL of a Prometheus-compatible API, e.g. http://prometheus:9090", o.against)
	}
	hc := promcfg.DefaultHTTPClientConfig
	if o.httpConfig != "" {
		c, _, err := promcfg.LoadHTTPConfigFile(o.httpConfig)
		if err != nil {
			return nil, req, opts, fmt.Errorf("--against.http-config: %w", err)
		}
		hc = *c
	}
	client, err := promcfg.NewClientFromConfig(hc, "kvwatch-plan", promcfg.WithUserAgent("kvwatch/"+version.Version))
	if err != nil {
		return nil, req, opts, fmt.Errorf("--against.http-config: %w", err)
	}
	return &forecast.Store{Base: u, Client: client}, req, opts, nil
}

// parseTime reads --at: RFC 3339 or Unix seconds.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(f * 1000)), nil
	}
	return time.Time{}, fmt.Errorf("--at %q: want an RFC 3339 time (2026-03-15T12:00:00Z) or Unix seconds", s)
}

func (o *planOptions) run(ctx context.Context, e *env) int {
	store, req, opts, err := o.planRequest(time.Now())
	if err != nil {
		return exitCode(e, usageError{fmt.Errorf("plan: %w", err)})
	}
	qctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	histories, err := forecast.Read(qctx, store, req)
	switch {
	case errors.Is(err, forecast.ErrAuth), errors.Is(err, forecast.ErrNotAPI):
		return exitCode(e, usageError{fmt.Errorf("plan: %w", err)})
	case errors.Is(err, forecast.ErrTimeout):
		fmt.Fprintf(e.Stderr, "kvwatch: plan: %v: no answer within --against.timeout %s; raise it, or shorten --window or coarsen --resolution\n", err, o.timeout)
		return exitDataMissing
	case errors.Is(err, forecast.ErrNoSeries):
		fmt.Fprintf(e.Stderr, "kvwatch: plan: %v; does kvwatch serve write to it (--remote-write.url), or does its Prometheus scrape serve (kvwatch stack generate)?\n", err)
		return exitDataMissing
	case err != nil:
		fmt.Fprintf(e.Stderr, "kvwatch: plan: %v\n", err)
		return exitDataMissing
	}
	rep := forecast.NewReport(store.Describe(), req, histories, opts)
	if o.output == "json" {
		err = rep.WriteJSON(e.Stdout)
	} else {
		err = rep.WriteText(e.Stdout)
	}
	if err != nil {
		return exitCode(e, err)
	}
	switch {
	case rep.ActionNeeded:
		return exitFailed
	case len(rep.Unplanned) > 0:
		return exitDataMissing
	}
	return exitOK
}
