package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/forecast"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// growthScenario is two SGLang servers under the same load, one of them
// growing 4 % of its rate a simulated day; a simulated day is 6 minutes.
const growthScenario = `
servers:
  - name: grow
    engine: sglang
    capacity_tokens: 262144
    context_length: 32768
    load: {rate: 2.5, prompt_mean: 3000, output_mean: 400, growth: {per_day: 4%%, day: %s}}
  - name: flat
    engine: sglang
    capacity_tokens: 262144
    context_length: 32768
    load: {rate: 2.5, prompt_mean: 3000, output_mean: 400}
`

// TestPlanSimulatedGrowth drives the simulator's growth scenario through
// serve for 14 simulated days, each written into serve's history as a
// day (the simulator on a manual clock, one simulated hour a step, as the
// screenshots do), and plans against serve's own query API: the growing
// pool's trend and its date for the warning threshold agree with the
// simulator's own KV (daily peaks of its ground truth, a straight line
// through the first and last days), and the flat pool has no date.
func TestPlanSimulatedGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
	testenv.StateDir(t)
	const (
		days  = 14
		hours = 24
		step  = 15 * time.Second // a simulated hour: a day is 6 minutes
	)
	sc, err := sim.ParseScenario("growth.yaml", []byte(fmt.Sprintf(growthScenario, hours*step)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Advance(10 * time.Minute) // the load reaches its level

	cfg := scrapingEvery(100 * time.Millisecond)
	cfg.Targets = nil
	for _, ep := range c.Endpoints() {
		cfg.Targets = append(cfg.Targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath,
			Labels: map[string]string{config.TargetLabelCluster: ep.Name}})
	}
	off := ""
	cfg.History.SnapshotFile = &off
	o := app.Options{Sources: config.Sources{Config: cfg}, ListenAddresses: []string{"127.0.0.1:0"},
		Logger: slog.New(slog.DiscardHandler)}
	if err := (&embeddedFlags{history: "16d"}).apply(&o); err != nil {
		t.Fatal(err)
	}
	srv, err := app.New(o)
	if err != nil {
		t.Fatal(err)
	}
	d := srv.Daemon()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	// Each simulated hour: advance, let serve scrape both servers, write
	// what it exports into its history at that hour of the past 14 days.
	end := time.Now().Truncate(time.Hour)
	start := end.Add(-days * hours * time.Hour)
	peaks := map[string][]float64{} // daily peak of the truth's KV usage
	for i := range days * hours {
		c.Advance(step)
		scrapedAgain(t, d, true)
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		srv.History().AppendFamilies(start.Add(time.Duration(i+1)*time.Hour), mfs)
		for _, name := range []string{"grow", "flat"} {
			tr := c.Truth(name)
			u := float64(tr.UsedTokens) / float64(tr.CapacityTokens)
			if i%hours == 0 {
				peaks[name] = append(peaks[name], u)
			} else if last := &peaks[name][len(peaks[name])-1]; u > *last {
				*last = u
			}
		}
	}

	// Exit 1: the growing pool needs servers within the horizon.
	rep := planJSON(t, 1, "--against", d.URL(), "--resolution", "1h", "--at", fmt.Sprint(end.Unix()))
	// The truth: a line through the mean daily peak of days 2–4 and of
	// days 12–14 (the first day is the ramp from idle).
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	early, late := mean(peaks["grow"][1:4]), mean(peaks["grow"][11:14])
	slope := (late - early) / 10 // share of capacity a day
	t.Logf("truth: daily peaks of grow %.3f → %.3f, %.4f a day; flat %.3f → %.3f", early, late, slope,
		mean(peaks["flat"][1:4]), mean(peaks["flat"][11:14]))
	if slope <= 0 {
		t.Fatalf("the simulator's growing pool did not grow: %.3f → %.3f", early, late)
	}
	grow := poolOf(t, rep, kv.PoolKey{Role: kv.RoleUnified, Cluster: "grow"}.String())
	if grow.State != forecast.Planned || grow.Growth == nil || grow.Warning == nil || grow.Warning.Date == nil {
		t.Fatalf("grow: %s (%s), trend %q, growth %+v, warning %+v; want a date for the warning threshold", grow.State, grow.Reason, grow.Trend, grow.Growth, grow.Warning)
	}
	if e := math.Abs(grow.Growth.RatioPerDay-slope) / slope; e > 0.3 {
		t.Errorf("grow: %.4f of capacity a day, the truth %.4f (%.0f%% off)", grow.Growth.RatioPerDay, slope, e*100)
	}
	// Days from the end of the history to 0.9 on the truth's line (its
	// value at day 13, the middle of days 12–14).
	truthDays := (0.9-late)/slope - 0.5
	if truthDays < 2 {
		t.Fatalf("the truth reaches 90%% %.1f days after the history: the scenario is too close to full to test a date", truthDays)
	}
	e := dateError(grow.Warning.Date, end, truthDays)
	t.Logf("grow reaches 90%%: truth %.1f days, plan %v (%.0f%% off)", truthDays, grow.Warning.Date, e*100)
	if e > 0.3 {
		t.Errorf("grow reaches 90%% on %v, %.1f days from the end of the history; the truth is %.1f days (%.0f%% off)",
			grow.Warning.Date, grow.Warning.Date.Sub(end).Hours()/24, truthDays, e*100)
	}
	flat := poolOf(t, rep, kv.PoolKey{Role: kv.RoleUnified, Cluster: "flat"}.String())
	if flat.State != forecast.Planned || flat.Warning == nil || flat.Warning.Date != nil {
		t.Errorf("flat: %s (%s), trend %q, warning %+v; want planned with no date", flat.State, flat.Reason, flat.Trend, flat.Warning)
	}
}
