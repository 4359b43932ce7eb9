package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// simClock is status --trend's clock on a simulator with a manual clock:
// Sleep advances the simulation, Now is its time. Now also records the
// simulator's ground truth of each server at that instant (what the round
// that starts then scrapes).
type simClock struct {
	c     *sim.Cluster
	epoch time.Time
	names []string

	mu    sync.Mutex
	truth []truthAt
}

type truthAt struct {
	at time.Duration
	by map[string]sim.Truth
}

func (k *simClock) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.c.Now()
	if n := len(k.truth); n == 0 || k.truth[n-1].at != now {
		by := map[string]sim.Truth{}
		for _, n := range k.names {
			by[n] = k.c.Truth(n)
		}
		k.truth = append(k.truth, truthAt{now, by})
	}
	return k.epoch.Add(now)
}

func (k *simClock) Sleep(ctx context.Context, d time.Duration) bool {
	k.c.Advance(d)
	return ctx.Err() == nil
}

// expected is the pool's time to full from the recorded truth, by a
// least-squares fit done here (x in seconds from the first instant): Σ of
// the servers' slopes, free after demand at the last instant, the floor 1 %
// of capacity per 900 s.
func (k *simClock) expected(t *testing.T) (state kv.FillState, seconds, rate float64) {
	t.Helper()
	last := k.truth[len(k.truth)-1].by
	var capacity, free float64
	for _, n := range k.names {
		var sx, sy, sxx, sxy, m float64
		for _, s := range k.truth {
			x, y := (s.at - k.truth[0].at).Seconds(), float64(s.by[n].UsedTokens)
			sx, sy, sxx, sxy, m = sx+x, sy+y, sxx+x*x, sxy+x*y, m+1
		}
		slope := (m*sxy - sx*sy) / (m*sxx - sx*sx)
		t.Logf("%s: used %d → %d over %d instants, %.2f tokens/s", n, k.truth[0].by[n].UsedTokens, last[n].UsedTokens, len(k.truth), slope)
		rate += slope
		capacity += float64(last[n].CapacityTokens)
		free += float64(last[n].CapacityTokens - last[n].UsedTokens - last[n].PendingPreallocTokens)
	}
	switch {
	case free <= 0:
		return kv.FillFull, 0, rate
	case rate > capacity*0.01/900:
		return kv.FillFilling, free / rate, rate
	}
	return kv.FillNotFilling, 0, rate
}

// runTrend runs kvwatch status --trend on the named servers of c.
func runTrend(t *testing.T, c *sim.Cluster, names []string, args ...string) (*simClock, string) {
	t.Helper()
	k := &simClock{c: c, epoch: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), names: names}
	old := statusTrendClock
	statusTrendClock = k
	defer func() { statusTrendClock = old }()
	urls := map[string]string{}
	for _, ep := range c.Endpoints() {
		urls[ep.Name] = ep.URL + ep.MetricsPath
	}
	cmd := []string{"status"}
	for _, n := range names {
		cmd = append(cmd, urls[n])
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := Run(ctx, append(cmd, args...), Streams{Stdout: &out, Stderr: &errOut}); code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	return k, out.String()
}

// TestStatusTrend: status --trend 30s over the planning scenario's ramp
// (fill ramps its load from 0.2× to 3× over 4 minutes) gives the pool's
// time to full of the simulator's own used tokens, fitted here; the pool of
// the drain server once drained (idle, used 0) is not filling.
func TestStatusTrend(t *testing.T) {
	t.Setenv("COLUMNS", "1000") // plan lines on one line each
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "planning", 7)
	defer c.Close()
	c.Advance(60 * time.Second)
	names := []string{"fill", "drain", "batch"}
	k, out := runTrend(t, c, names, "--trend", "30s", "-o", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	// Rounds at 60, 65, ..., 90 s of simulated time.
	if len(k.truth) != 7 || k.truth[0].at != 60*time.Second || k.truth[6].at != 90*time.Second {
		t.Fatalf("%d rounds, want 7 from 60s to 90s: %+v", len(k.truth), k.truth)
	}
	state, seconds, rate := k.expected(t)
	if state != kv.FillFilling {
		t.Fatalf("the ramp is not filling in the ground truth (%.2f tokens/s): the test's premise is wrong", rate)
	}
	if len(rep.Planning) != 1 || rep.Planning[0].FillForecast == nil {
		t.Fatalf("planning %+v, want one pool with a forecast", rep.Planning)
	}
	f := rep.Planning[0].FillForecast
	t.Logf("status: %s in %+v s at %+v tokens/s; truth %.1f s at %.2f tokens/s", f.TimeToFullState, f.TimeToFullSeconds, f.FillRate, seconds, rate)
	// The adapters read the simulator's used tokens exactly (crosscheck):
	// the two fits agree to rounding, 0.1 %.
	if f.TimeToFullState != kv.FillFilling || math.Abs(f.TimeToFullSeconds.V-seconds) > 0.001*seconds ||
		math.Abs(f.FillRate.V-rate) > 0.001*math.Abs(rate) || f.TrendSamples != 7 || f.TrendSeconds != 30 {
		t.Errorf("status: %s %+v s, %+v tokens/s over %d samples, %gs; want filling %.1f s, %.2f tokens/s over 7, 30s",
			f.TimeToFullState, f.TimeToFullSeconds, f.FillRate, f.TrendSamples, f.TrendSeconds, seconds, rate)
	}
	// The JSON names of the face.
	for _, key := range []string{`"time_to_full_seconds"`, `"time_to_full_state": "filling"`, `"fill_rate_tokens_per_second"`} {
		if !strings.Contains(out, key) {
			t.Errorf("json lacks %s", key)
		}
	}

	// Wide: the plan line says how (rate, floor, free after demand, samples).
	k, out = runTrend(t, c, names, "--trend", "30s", "-o", "wide")
	t.Logf("status -o wide --trend 30s at %s:\n%s", k.truth[len(k.truth)-1].at, out)
	state, _, _ = k.expected(t)
	want := map[kv.FillState]string{kv.FillFilling: "full in ", kv.FillNotFilling: "not filling (fill ", kv.FillFull: "full now"}[state]
	if !strings.Contains(out, want) || !strings.Contains(out, "7 samples over the last 30s") {
		t.Errorf("wide plan line: want %q (ground truth %s) and \"7 samples over the last 30s\":\n%s", want, state, out)
	}

	// The drain server stops taking traffic at 2m31s; by 10 minutes its KV
	// is empty and stays so.
	c.Advance(10*time.Minute - c.Now())
	k, out = runTrend(t, c, []string{"drain"}, "--trend", "30s")
	if state, _, rate := k.expected(t); state != kv.FillNotFilling || rate != 0 {
		t.Fatalf("drained server in the ground truth: %s at %.2f tokens/s, want flat", state, rate)
	}
	plan := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "plan") {
			plan = l
		}
	}
	if !strings.HasSuffix(strings.TrimRight(plan, " "), "not filling") {
		t.Errorf("plan line %q, want it to end in \"not filling\"\n%s", plan, out)
	}
}

// TestStatusWithoutTrend: a one-shot status says nothing about the time
// to full (no history, no forecast), in text and JSON.
func TestStatusWithoutTrend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "planning", 7)
	defer c.Close()
	c.Advance(60 * time.Second)
	var url string
	for _, ep := range c.Endpoints() {
		if ep.Name == "fill" {
			url = ep.URL + ep.MetricsPath
		}
	}
	for _, o := range []string{"text", "wide", "json"} {
		var out bytes.Buffer
		if code := Run(ctx, []string{"status", url, "-o", o}, Streams{Stdout: &out, Stderr: &bytes.Buffer{}}); code != 0 {
			t.Fatalf("-o %s: exit %d", o, code)
		}
		for _, bad := range []string{"full in", "not filling", "full now", "time_to_full", "trend"} {
			if strings.Contains(out.String(), bad) {
				t.Errorf("-o %s says %q without --trend:\n%s", o, bad, out.String())
			}
		}
	}
}

func TestStatusTrendUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--trend", "5s"}, "--trend 5s is too short for a trend: give at least 10s"},
		{[]string{"--trend", "30s", "--watch", "2s"}, "--trend and --watch cannot be combined"},
	} {
		code, _, stderr := run(t, append([]string{"status", "http://127.0.0.1:1/metrics"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, exitUsage, tt.want)
		}
	}
}
