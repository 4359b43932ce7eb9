package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kvwatch/kvwatch/internal/sim"
)

// simulateOpts are the flags of kvwatch simulate.
type simulateOpts struct {
	scenario   string
	servers    int
	engine     string
	tp         int
	seed       uint64
	speed      float64
	tick       time.Duration
	listenHost string
	basePort   int
}

func addSimulate(app *kingpin.Application, r registry) {
	o := &simulateOpts{}
	c := app.Command("simulate", "Serve simulated engine endpoints (SGLang, vLLM, llama.cpp, TGI, Triton, routers) under a KV-cache load model, on loopback; no GPU needed.")
	c.Flag("scenario", "Built-in scenario name ("+fmt.Sprint(sim.BuiltinNames())+") or a scenario YAML file; see docs/simulator.md.").Default("pd-sglang").StringVar(&o.scenario)
	c.Flag("servers", "Instead of a scenario, simulate this many unified servers of --engine (scale tests).").IntVar(&o.servers)
	c.Flag("engine", "Engine of the generated fleet with --servers.").Default(sim.EngineSGLang).EnumVar(&o.engine, sim.Engines...)
	c.Flag("tp", "Tensor-parallel ranks of each generated server with --servers.").Default("1").IntVar(&o.tp)
	c.Flag("seed", "Seed of the load model; the same seed gives the same run.").Default("1").Uint64Var(&o.seed)
	c.Flag("speed", "Time acceleration: simulated seconds per wall-clock second.").Default("1").Float64Var(&o.speed)
	c.Flag("tick", "Wall-clock time between load-model updates (pages change once per tick).").Default("1s").DurationVar(&o.tick)
	c.Flag("listen-host", "Address the simulated endpoints listen on.").Default("127.0.0.1").StringVar(&o.listenHost)
	c.Flag("base-port", "Port of the first endpoint; the others follow. 0 picks free ports.").Default("0").IntVar(&o.basePort)
	r.add(c, func(ctx context.Context, e *env) int { return exitCode(e, runSimulate(ctx, e, o)) })
}

func runSimulate(ctx context.Context, e *env, o *simulateOpts) error {
	var sc *sim.Scenario
	var err error
	if o.servers > 0 {
		sc, err = sim.GeneratedScenario(o.servers, o.engine, o.tp)
	} else {
		sc, err = sim.LoadScenarioOrBuiltin(o.scenario)
	}
	if err != nil {
		return usageError{err}
	}
	if o.speed <= 0 || o.tick <= 0 {
		return usageError{fmt.Errorf("--speed and --tick must be positive, got %g and %s", o.speed, o.tick)}
	}
	c, err := sim.NewCluster(sc, sim.Options{Seed: o.seed, Speed: o.speed, Tick: o.tick, Logger: e.Logger, ListenHost: o.listenHost, BasePort: o.basePort})
	if err != nil {
		return usageError{err}
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close()
	for _, ep := range c.Endpoints() {
		fmt.Fprintf(e.Stdout, "%-8s %-20s %s%s\n", ep.Role, ep.Engine, ep.URL, ep.MetricsPath)
	}
	e.Logger.Info("simulator running; stop with Ctrl-C", "scenario", sc.Name, "servers", len(sc.Servers), "speed", o.speed)
	<-ctx.Done()
	return nil
}
