package stack

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestPoolForecastMatchesSimulator: the simulator's planning scenario,
// sampled once a minute for 20 minutes, is fed to promtool as the series
// kvwatch exports; the pool forecast the rules compute at 20m30s must be
// the one worked out here from the simulator's ground truth by an
// independent least-squares fit (samples 6m..20m, the 15m window).
func TestPoolForecastMatchesSimulator(t *testing.T) {
	promtool := testenv.Tool(t, "prometheus", "promtool")
	c := testenv.Builtin(t, "planning", sim.Options{Seed: 7, ManualClock: true})
	const minutes = 20
	names := []string{"fill", "drain", "batch"}
	used := map[string][]float64{}
	var capacity, demand float64 // at 20m; the input series hold demand at that value too (0: unified servers have none)
	for m := 0; m <= minutes; m++ {
		if m > 0 {
			c.Advance(time.Minute)
		}
		for _, n := range names {
			tr := c.Truth(n)
			used[n] = append(used[n], float64(tr.UsedTokens))
			if m == minutes {
				capacity += float64(tr.CapacityTokens)
				demand += float64(tr.PendingPreallocTokens)
			}
		}
	}
	// At each look E minutes + 30s: least squares over the samples of the
	// 15m window (minutes max(0, E−14)..E), x in seconds, summed over the
	// servers; the free KV after demand at E.
	type look struct {
		e           int
		slope, free float64
	}
	var looks []look
	filling, flat := 0, 0
	for _, e := range []int{2, 3, 4, 6, 10, 20} {
		l := look{e: e}
		for _, n := range names {
			var sx, sy, sxx, sxy, k float64
			for m := max(0, e-14); m <= e; m++ {
				x, y := float64(m*60), used[n][m]
				sx, sy, sxx, sxy, k = sx+x, sy+y, sxx+x*x, sxy+x*y, k+1
			}
			l.slope += (k*sxy - sx*sy) / (k*sxx - sx*sx)
			l.free -= used[n][e]
		}
		l.free += capacity - demand
		if l.slope > capacity*FillFloorPer15m/900 {
			filling++
		} else {
			flat++
		}
		looks = append(looks, l)
	}
	if filling == 0 || flat == 0 {
		t.Fatalf("looks %+v: want the ramp filling at some and the steady state not filling at others", looks)
	}
	var in []inputSeries
	for _, n := range names {
		s := srv{n, "unified", testCluster, "p1"}
		var vals []string
		for _, v := range used[n] {
			vals = append(vals, num(v))
		}
		tr := c.Truth(n)
		in = append(in,
			inputSeries{s.sel(signal.KVUsedTokens.Name), strings.Join(vals, " ")},
			inputSeries{s.sel(signal.KVCapacityTokens.Name), constant(float64(tr.CapacityTokens), minutes)},
			inputSeries{s.sel(signal.KVDemandTokens.Name), constant(float64(tr.PendingPreallocTokens), minutes)})
	}
	f := poolForecast()
	pool := renderLabels(map[string]string{signal.LabelCluster: testCluster, signal.LabelPool: "p1", signal.LabelRole: "unified"})
	var exprs []exprTest
	for _, l := range looks {
		at := model.Duration(time.Duration(l.e)*time.Minute + 30*time.Second)
		ttf := exprTest{Expr: "round(" + f.timeToFull("("+f.free+")", "("+f.rate+")") + ")", EvalTime: at, ExpSamples: []expSample{}}
		state := 0.0
		if l.slope > capacity*FillFloorPer15m/900 {
			ttf.ExpSamples = append(ttf.ExpSamples, expSample{pool, math.Round(l.free / l.slope)})
			state = 1
		}
		exprs = append(exprs, ttf,
			exprTest{Expr: "round(" + f.rate + ")", EvalTime: at, ExpSamples: []expSample{{pool, math.Round(l.slope)}}},
			exprTest{Expr: "(" + f.rate + ") > bool " + f.floor, EvalTime: at, ExpSamples: []expSample{{pool, state}}})
		t.Logf("at %s: fill %.2f tokens/s, %.0f free after demand", time.Duration(at), l.slope, l.free)
	}
	file := ruleTestFile{EvaluationInterval: mins(1), RuleFiles: []string{},
		Tests: []ruleTest{{Interval: mins(1), InputSeries: in, PromqlExprTests: exprs}}}
	b, err := marshalYAML(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sim.test.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, dir, promtool, "test", "rules", "sim.test.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool: %s", out)
	}
}
