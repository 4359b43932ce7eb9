package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// demoOpts are the flags of kvwatch demo.
type demoOpts struct {
	scenario string
	listen   string
	speed    float64
	basePort int
	embedded embeddedFlags
}

func addDemo(app *kingpin.Application, r registry) {
	o := &demoOpts{}
	c := app.Command("demo", "Start a simulated PD cluster and kvwatch serve with history, alerts and the web UI on loopback; prints the URL and a status line. Ctrl-C stops everything.")
	c.Flag("scenario", "Simulator scenario: a built-in name ("+strings.Join(sim.BuiltinNames(), ", ")+") or a scenario file.").Default("pd-sglang").StringVar(&o.scenario)
	c.Flag("web.listen-address", "Address of the web UI and API (loopback).").Default(signal.DefaultListenAddress).StringVar(&o.listen)
	c.Flag("speed", "Simulated time per wall-clock second.").Default("1").Float64Var(&o.speed)
	c.Flag("base-port", "Port of the first simulated server; the others follow in scenario order (a scenario's port: wins). 0 picks free ports.").Default("0").IntVar(&o.basePort)
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
	if err := checkBasePort(o.basePort, len(sc.Servers)); err != nil {
		return usageError{err}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := sim.NewCluster(sc, sim.Options{Speed: o.speed, Logger: e.Logger, BasePort: o.basePort})
	if err != nil {
		return usageError{err}
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close()
	srv, err := demoServe(e, c, nil, o.listen, o.embedded)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	printDemo(e.Stdout, sc.Name, c.Endpoints(), srv.Daemon().URL())
	statusLoop(ctx, e, srv, done)
	cancel()
	return <-done
}

// demoServe assembles serve with package app, exactly as `kvwatch serve`
// is assembled, for the simulated endpoints; cfg nil means
// config.Default().
func demoServe(e *env, c *sim.Cluster, cfg *config.Config, listen string, f embeddedFlags) (*app.Serve, error) {
	if host, _, err := net.SplitHostPort(listen); err == nil && host != "127.0.0.1" && host != "localhost" && host != "::1" {
		return nil, usageError{fmt.Errorf("--web.listen-address %s: the demo listens on loopback only", listen)}
	}
	var targets []config.Target
	for _, ep := range c.Endpoints() {
		targets = append(targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, Role: ep.Role})
	}
	if cfg == nil {
		cfg = config.Default()
	}
	if cfg.History.SnapshotFile == nil {
		// The demo's history is simulated: it stays out of the default
		// snapshot file, which a real serve's history may be in.
		own, off := *cfg, ""
		own.History.SnapshotFile = &off
		cfg = &own
	}
	o := app.Options{Sources: config.Sources{Config: cfg, Extra: targets}, ListenAddresses: []string{listen}, Logger: e.Logger}
	if err := f.apply(&o); err != nil {
		return nil, err
	}
	srv, err := app.New(o)
	if err != nil {
		return nil, usageError{err}
	}
	return srv, nil
}

// statusLoop prints a status line from the report until ctx ends or the
// daemon stops: rewritten in place on a terminal, one line every 5s
// otherwise.
func statusLoop(ctx context.Context, e *env, srv *app.Serve, done chan error) {
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
			line := statusLine(srv.Daemon().Report(), srv.Rules())
			if e.Interactive {
				fmt.Fprintf(e.Stdout, "\r\033[K%s", line)
			} else {
				io.WriteString(e.Stdout, line+"\n")
			}
		}
	}
}

// statusLine summarizes the fleet: usage per KV server, then alerts.
func statusLine(r report.Report, rules *alerting.Manager) string {
	var parts []string
	for _, s := range r.Servers {
		if !s.Role.HoldsKV() {
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
		part := fmt.Sprintf("%s KV %s %s tok, run=%s queue=%s", name, textfmt.Percent(v.UsageRatio), textfmt.Count(v.Used),
			textfmt.Count(v.Running), textfmt.Count(v.Queued.QueuedTotal()))
		if h, ok := s.FirstHeadroom(); ok {
			part += ", fits " + textfmt.Headroom(h.Requests, h.Tokens)
		}
		if s.Plan != nil && s.Plan.State != kv.StateOK && s.Plan.State != kv.StateIdle {
			part += ", " + strings.ToUpper(textfmt.State(s.Plan.State))
		}
		parts = append(parts, part)
	}
	if f := r.Fleet; f.LimitIndex >= 0 {
		parts = append(parts, "limit: "+r.Pools[f.LimitIndex].Name+" pool KV "+textfmt.Percent(r.Pools[f.LimitIndex].UsageRatio))
	}
	line := time.Now().Format("15:04:05") + "  " + strings.Join(parts, " | ")
	if rules != nil {
		firing, pending := 0, 0
		for _, a := range rules.Alerts() {
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
