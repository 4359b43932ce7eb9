package kv_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestPoolFillMatchesRecordingRules: the same used-token samples, capacity
// and demand, fed to kv.PoolFill and, as the series kvwatch exports, to
// promtool with the stack's real planning recording rules (in the
// aggregates group, after the pool sums they read), give the same
// fill rate, time to full and filling state for every pool (agreement
// across faces: status and top compute what Prometheus records).
func TestPoolFillMatchesRecordingRules(t *testing.T) {
	promtool := testenv.Tool(t, "prometheus", "promtool")
	type server struct {
		name          string
		used          func(m int) float64
		capacity      float64
		demand        float64
		reportsDemand bool
	}
	// Noise that is no line: the fit is not a round number.
	wobble := func(m int) float64 { return float64((m*7)%5) * 37 }
	pools := map[string][]server{
		// Two servers, one filling at about 16 tokens/s, both with demand.
		"fill": {
			{"fill-a", func(m int) float64 { return 10000 + 960*float64(m) + wobble(m) }, 100000, 20000, true},
			{"fill-b", func(m int) float64 { return 30000 + float64((m*3)%7)*53 }, 100000, 8000, true},
		},
		// Flat with noise under the floor (100,000 × 1 % / 900 s = 1.1/s).
		"flat": {{"flat-a", func(m int) float64 { return 50000 + wobble(m) }, 100000, 0, false}},
		// Flat, but the queue needs more than is free: full now.
		"queue": {{"queue-a", func(m int) float64 { return 60000 + wobble(m) }, 100000, 45000, true}},
		// Draining.
		"drain": {{"drain-a", func(m int) float64 { return 80000 - 600*float64(m) + wobble(m) }, 100000, 0, false}},
	}
	const minutes = 20
	t0 := time.Unix(0, 0).UTC()
	evalAt := 20*time.Minute + 30*time.Second // window (5m30s, 20m30s]: minutes 6..20 in promtool 2 and Prometheus 3 alike
	labels := func(s server, pool string) string {
		l := map[string]string{signal.LabelServer: s.name, signal.LabelRole: "unified", signal.LabelCluster: "c1",
			signal.LabelPool: pool, "job": "kvwatch", "instance": "127.0.0.1:9477"}
		return labels.FromMap(l).String() // sorted: the form promtool prints back
	}
	constant := func(v float64) string { return fmt.Sprintf("%gx%d", v, minutes) }
	var in []fillSeries
	var ttf, rate, filling []fillSample
	names := make([]string, 0, len(pools))
	for p := range pools {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		var fs []kv.FillServer
		for _, s := range pools[p] {
			var vals []string
			f := kv.FillServer{Name: s.name, Capacity: kv.Of(s.capacity)}
			for m := 0; m <= minutes; m++ {
				vals = append(vals, fmt.Sprintf("%g", s.used(m)))
				f.Samples = append(f.Samples, kv.UsedSample{T: t0.Add(time.Duration(m) * time.Minute), Used: s.used(m)})
			}
			in = append(in, fillSeries{signal.KVUsedTokens.Name + labels(s, p), strings.Join(vals, " ")},
				fillSeries{signal.KVCapacityTokens.Name + labels(s, p), constant(s.capacity)})
			if s.reportsDemand {
				f.Demand = kv.Of(s.demand)
				in = append(in, fillSeries{signal.KVDemandTokens.Name + labels(s, p), constant(s.demand)})
			}
			fs = append(fs, f)
		}
		got := kv.PoolFill(fs, t0.Add(evalAt), kv.FillWindow, kv.FillTrend{MinSamples: 2})
		pl := fmt.Sprintf("{kv_cluster=%q, pool=%q, role=\"unified\"}", "c1", p)
		t.Logf("pool %s: %s, %+v s, rate %+v tokens/s, free after demand %+v", p, got.TimeToFullState,
			got.TimeToFullSeconds, got.FillRate, got.FreeAfterDemand)
		rate = append(rate, fillSample{pl, math.Round(got.FillRate.V * 1e6)})
		on := 0.0
		switch got.TimeToFullState {
		case kv.FillFilling, kv.FillFull:
			ttf = append(ttf, fillSample{pl, math.Round(got.TimeToFullSeconds.V * 1000)})
			on = 1
		case kv.FillNotFilling:
		default:
			t.Fatalf("pool %s: %s (%s)", p, got.TimeToFullState, got.TrendNote)
		}
		filling = append(filling, fillSample{pl, on})
		// The cases this test is for: each state at least once.
		want := map[string]kv.FillState{"fill": kv.FillFilling, "flat": kv.FillNotFilling, "queue": kv.FillFull, "drain": kv.FillNotFilling}[p]
		if got.TimeToFullState != want {
			t.Errorf("pool %s: PoolFill says %s, the case is %s", p, got.TimeToFullState, want)
		}
	}
	// The stack's own aggregates group, as generated: the planning rules
	// and the pool sums they read.
	var group any
	for _, g := range stack.RecordingRules(stack.Options{Config: config.Default()}).Groups {
		if g.Name == stack.AggregatesGroup {
			group = g
		}
	}
	if group == nil {
		t.Fatalf("no %s group in stack.RecordingRules", stack.AggregatesGroup)
	}
	at := (time.Duration(evalAt)).String()
	test := map[string]any{
		"rule_files":          []string{"rules.yml"},
		"evaluation_interval": "30s",
		"tests": []map[string]any{{
			"interval":     "1m",
			"input_series": in,
			"promql_expr_test": []fillExprTest{
				{"round(" + stack.RecPoolTimeToFull + " * 1000)", at, ttf},
				{"round(" + stack.RecPoolFillRate + " * 1e6)", at, rate},
				{stack.RecPoolFilling, at, withName(stack.RecPoolFilling, filling)},
			},
		}},
	}
	dir := t.TempDir()
	write := func(name string, v any) {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rules.yml", map[string]any{"groups": []any{group}})
	write("fill.test.yml", test)
	cmd := exec.Command(promtool, "test", "rules", "fill.test.yml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

type fillSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type fillSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

type fillExprTest struct {
	Expr       string       `yaml:"expr"`
	EvalTime   string       `yaml:"eval_time"`
	ExpSamples []fillSample `yaml:"exp_samples"`
}

// withName puts the series name into each sample's labels (a recorded
// series queried as is keeps its name).
func withName(name string, ss []fillSample) []fillSample {
	out := make([]fillSample, len(ss))
	for i, s := range ss {
		out[i] = fillSample{name + s.Labels, s.Value}
	}
	return out
}
