package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestDesiredServersMatchesSimulator: the autoscaling signal two ways on
// the simulator's scenarios. kvwatch's scraper reads every engine once a
// minute; kv.PlanPools computes each pool's desired servers from what it
// read (what serve exports as kvwatch_pool_desired_servers), and promtool
// runs the generated recording rules over the same values as the series
// serve exports (the trusted ones; the others absent), at the same
// minutes. pool:kvwatch_pool_desired_servers must be the Go answer for
// every pool and minute, and absent exactly where the Go answer is not
// exported. The PD scenario is driven into overload halfway, so queued
// demand counts; the mixed scenario has engines that report no whole KV
// tokens, so absence is compared too.
func TestDesiredServersMatchesSimulator(t *testing.T) {
	v := promVersions(t)
	if len(v) == 0 {
		t.Skip("no promtool")
	}
	const minutes, target = 8, 0.8
	o := Options{Config: config.Default()}
	o.Config.Autoscaling.TargetKVUsage = target
	_, dir := generateDir(t, o)
	reg := engine.NewRegistry()
	compared, over, absent := 0, 0, 0
	for _, c := range []struct {
		scenario string
		overload string // the server whose load is raised halfway
	}{{"pd-sglang", "router"}, {"pd-sglang-dp", "router"}, {"planning", ""}, {"vllm-dp", ""}, {"mixed", ""}} {
		t.Run(c.scenario, func(t *testing.T) {
			cl := testenv.Builtin(t, c.scenario, sim.Options{Seed: 7, ManualClock: true})
			sc := scrape.New(reg, 64<<20)
			// values[series] are the samples a minute ("stale" where the
			// series is not exported), exps the expected answers.
			values := map[string][]string{}
			var exps []exprTest
			for m := 1; m <= minutes; m++ {
				if m == minutes/2 && c.overload != "" {
					if err := cl.SetLoad(c.overload, 8); err != nil {
						t.Fatal(err)
					}
				}
				cl.Advance(time.Minute)
				var members []kv.PlanMember
				for _, ep := range cl.Endpoints() {
					tg, err := scrape.NewTarget(&config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath})
					if err != nil {
						t.Fatal(err)
					}
					tg.Timeout = 5 * time.Second
					res := sc.Scrape(context.Background(), tg)
					if !res.OK() {
						t.Fatalf("%s at %dm: %v", ep.Name, m, res.Err)
					}
					s := res.Server
					id := srv{ep.Name, string(s.Role), testCluster, "p1"}
					put := func(metric string, val kv.Value) {
						k := id.sel(metric)
						for len(values[k]) < m-1 {
							values[k] = append(values[k], "stale")
						}
						if val.Trusted() {
							values[k] = append(values[k], num(val.V))
						} else {
							values[k] = append(values[k], "stale")
						}
					}
					put(signal.TargetUp.Name, kv.Of(1))
					put(signal.KVUsedTokens.Name, s.Used)
					put(signal.KVCapacityTokens.Name, s.Capacity)
					put(signal.KVDemandTokens.Name, s.Demand)
					members = append(members, kv.PlanMember{Key: kv.PoolKey{Role: s.Role, Cluster: testCluster, Pool: "p1"},
						Name: ep.Name, Server: s})
				}
				e := exprTest{Expr: RecPoolDesiredServers, EvalTime: mins(m), ExpSamples: []expSample{}}
				for _, p := range kv.PlanPools(members, 0.9, target) {
					if !p.DesiredServers.Trusted() {
						absent++
						continue
					}
					l := map[string]string{signal.LabelRole: string(p.Role), signal.LabelCluster: testCluster, signal.LabelPool: "p1"}
					e.ExpSamples = append(e.ExpSamples, expSample{RecPoolDesiredServers + renderLabels(l), p.DesiredServers.V})
					compared++
					if p.DesiredServers.V > 2 {
						over++
					}
					t.Logf("%dm %s: %v servers (load %v of %v)", m, p.Name, p.DesiredServers.V, p.Drain.Load.V,
						p.Drain.Capacity.V+p.Drain.RestCapacity.V)
				}
				exps = append(exps, e)
			}
			var in []inputSeries
			for k, vs := range values {
				in = append(in, inputSeries{k, "stale " + strings.Join(vs, " ")})
			}
			file := ruleTestFile{RuleFiles: []string{"kvwatch-recording.yml"}, EvaluationInterval: mins(1),
				Tests: []ruleTest{{Interval: mins(1), InputSeries: in, PromqlExprTests: exps}}}
			b, err := marshalYAML(file)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("sim-%s.test.yml", c.scenario)
			if err := os.WriteFile(filepath.Join(dir, "rules", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, pv := range v {
				if out := run(t, filepath.Join(dir, "rules"), pv.promtool, "test", "rules", name); !strings.Contains(out, "SUCCESS") {
					t.Errorf("promtool %s: %s", pv.name, out)
				}
			}
		})
	}
	if over == 0 || absent == 0 {
		t.Errorf("compared %d answers, %d above 2 servers, %d absent: want some of each, or the scenarios prove little", compared, over, absent)
	}
}
