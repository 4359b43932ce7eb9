package cli

import (
	"context"
	"fmt"
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
	printDemo(e.Stdout, selfCommand(), sc.Name, c.Endpoints(), srv.Daemon().URL())
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
		targets = append(targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, Role: ep.Role, KVUnified: ep.KVUnified})
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
			writeLine(e, statusLine(srv.Daemon().Report(), srv.Rules()), textWidth(e))
		}
	}
}

// statusLine is the whole fleet in one line (the demo's, and status -o
// line's): a part per pool of KV servers, a pool of one server as that
// server (by name; its role when that is another word), then the limiting
// pool and, with rules, the alert counts. A part says the KV usage, the
// tokens used, running and queued requests, the headroom and the state of
// every server that needs an operator (leak, stuck, full, pressure); a
// failed server says DOWN and why.
func statusLine(r report.Report, rules *alerting.Manager) string {
	var parts []string
	for i := range r.Pools {
		parts = append(parts, poolPart(&r, &r.Pools[i]))
	}
	if f := r.Fleet; f.LimitIndex >= 0 {
		parts = append(parts, "limit: "+r.Pools[f.LimitIndex].Name+" pool KV "+textfmt.Percent(r.Pools[f.LimitIndex].UsageRatio))
	}
	at := r.Time
	if at.IsZero() { // no scrape yet
		at = time.Now()
	}
	line := at.Local().Format("15:04:05") + "  " + strings.Join(parts, " | ")
	if rules != nil {
		firing, pending := 0, 0
		for _, a := range rules.Alerts() {
			if a.State == alerting.StateFiring {
				firing++
			} else {
				pending++
			}
		}
		line += " | alerts: " + textfmt.AlertCounts(firing, pending)
	}
	return line
}

// poolPart is one pool's part of the status line.
func poolPart(r *report.Report, p *report.Pool) string {
	var members []*report.Server
	for i := range r.Servers {
		if s := &r.Servers[i]; s.Role.HoldsKV() && report.PoolKeyOf(s) == p.PoolKey {
			members = append(members, s)
		}
	}
	named := func(s *report.Server) string {
		if string(s.Role) == s.Name {
			return s.Name
		}
		return fmt.Sprintf("%s (%s)", s.Name, s.Role)
	}
	if len(members) == 1 && (!members[0].OK || members[0].Server == nil) {
		return named(members[0]) + " DOWN: " + orDash(members[0].Reason)
	}
	var part, headroom string
	if len(members) == 1 {
		s := members[0]
		v := s.Server
		part = fmt.Sprintf("%s KV %s %s tok, run=%s queue=%s", named(s), textfmt.Percent(v.UsageRatio), textfmt.Count(v.Used),
			textfmt.Count(v.Running), textfmt.Count(v.Queued.QueuedTotal()))
		if h, ok := s.FirstHeadroom(); ok {
			headroom = textfmt.Headroom(h.Requests, h.Tokens)
		}
	} else {
		part = fmt.Sprintf("%s pool (%s) KV %s %s tok, run=%s queue=%s", p.Name, plural(p.Servers, "server"), textfmt.Percent(p.UsageRatio),
			textfmt.Count(p.Used), textfmt.Count(p.Running), textfmt.Count(p.Queued))
		if h, ok := p.FirstHeadroom(); ok {
			headroom = textfmt.Headroom(h.Requests, h.Tokens)
		}
	}
	if headroom != "" {
		part += ", fits " + headroom
	}
	for _, s := range members {
		switch {
		case !s.OK || s.Server == nil:
			part += ", " + s.Name + " DOWN: " + orDash(s.Reason)
		case s.Plan != nil && s.Plan.State != kv.StateOK && s.Plan.State != kv.StateIdle && s.Plan.State != kv.StateUnknown:
			st := strings.ToUpper(textfmt.State(s.Plan.State))
			if len(members) > 1 {
				st = s.Name + " " + st
			}
			part += ", " + st
		}
	}
	return part
}
