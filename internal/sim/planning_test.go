package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestScheduleFactor(t *testing.T) {
	l := LoadSpec{Schedule: []LoadStep{{10 * time.Second, 0.5}, {20 * time.Second, 2.5}, {30 * time.Second, 0}}}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{
		{0, 1},                  // before the first step: the scenario's rate
		{10 * time.Second, 0.5}, // at a step: its factor
		{15 * time.Second, 1.5}, // halfway from 0.5 to 2.5
		{25 * time.Second, 1.25},
		{time.Hour, 0}, // after the last: held
	} {
		if got := l.scheduleFactor(c.at); got != c.want {
			t.Errorf("factor at %s = %g, want %g", c.at, got, c.want)
		}
	}
	if got := (&LoadSpec{}).scheduleFactor(time.Minute); got != 1 {
		t.Errorf("no schedule: factor %g, want 1", got)
	}
}

func TestScheduleValidation(t *testing.T) {
	_, err := ParseScenario("s.yaml", []byte(`
servers:
  - name: a
    engine: sglang
    load:
      rate: 1
      schedule: [{at: 20s, factor: 1}, {at: 10s, factor: -1}]
`))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"servers[0].load.schedule[1].factor: must be 0 or more, got -1",
		"servers[0].load.schedule[1].at: 10s is not after the previous step's 20s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestPlanTruth(t *testing.T) {
	// Two DP ranks of 100,000: rank 0 holds 60,000 for 20 (3,000 each,
	// 40,000 free: 13), rank 1 is idle and is measured with the server's
	// 60,000 / 20 = 3,000 (100,000 free: 33). 46 more.
	tr := Truth{DP: 2, MaxRunningRequests: 10, CapacityTokens: 200000, UsedTokens: 60000, Running: 20, Queued: 0,
		Ranks: []RankTruth{{CapacityTokens: 100000, UsedTokens: 60000, Running: 20}, {CapacityTokens: 100000}}}
	p := tr.Planning(0.9)
	if !p.HeadroomOK || p.WorkloadHeadroom != 46 || p.KVPerRequest != 3000 || p.MaxRunning != 20 {
		t.Errorf("plan = %+v, want 46 more at 3,000 per request, limit 20", p)
	}
	// 20 running of 2 × 10 allowed at 30 % KV: batch.
	if p.Limit != FactorBatch {
		t.Errorf("limit = %s, want batch", p.Limit)
	}
	tr.Running, tr.Ranks[0].Running, tr.Queued = 5, 5, 3
	if p := tr.Planning(0.9); p.Limit != FactorQueue {
		t.Errorf("limit = %s, want queue", p.Limit)
	}
	tr.PendingPreallocTokens = 150000 // more than the 140,000 free
	if p := tr.Planning(0.9); p.Limit != FactorKV {
		t.Errorf("limit = %s, want kv", p.Limit)
	}
	// 4 finished with 5,000 prompt and 1,000 output tokens: 1,500 each;
	// 40,000 / 1,500 = 26 and 100,000 / 1,500 = 66: 92.
	tr.Counters = Counters{RequestsFinished: 4, FinishedPromptTokens: 5000, FinishedGenerationTokens: 1000}
	if p := tr.Planning(0.9); !p.FinishedOK || p.FinishedMean != 1500 || p.FinishedHeadroom != 92 {
		t.Errorf("finished: %+v, want 1,500 each and 92", p)
	}
	idle := Truth{DP: 1, MaxRunningRequests: 8, CapacityTokens: 1000, Ranks: []RankTruth{{CapacityTokens: 1000}}}
	if p := idle.Planning(0.9); p.HeadroomOK || p.PerRequestOK || p.Limit != FactorNone {
		t.Errorf("idle plan = %+v, want no headroom, limit none", p)
	}
	// 52,000 + 52,000 onto 100,000: 0.9 × 100,000 − 104,000 = −14,000.
	d := PoolDrain([]Truth{{Name: "a", CapacityTokens: 100000, UsedTokens: 52000}, {Name: "b", CapacityTokens: 100000, UsedTokens: 52000}}, 0.9)
	if d.Server != "a" || d.Load != 104000 || d.RestCapacity != 100000 || d.MarginTokens != -14000 || d.Safe {
		t.Errorf("drain = %+v", d)
	}
	if d := PoolDrain([]Truth{{Name: "a", CapacityTokens: 100000, UsedTokens: 1}}, 0.9); d.Safe {
		t.Errorf("a single server is never N−1 safe: %+v", d)
	}
}

func TestGrowthFactor(t *testing.T) {
	for _, c := range []struct {
		name string
		g    *GrowthSpec
		at   time.Duration
		want float64
	}{
		{"none", nil, time.Hour, 1},
		{"start", &GrowthSpec{PerDay: 0.05, Day: time.Minute}, 0, 1},
		{"one day", &GrowthSpec{PerDay: 0.05, Day: time.Minute}, time.Minute, 1.05},
		{"ten and a half days", &GrowthSpec{PerDay: 0.2, Day: time.Minute}, 630 * time.Second, 3.1},
		{"shrinking", &GrowthSpec{PerDay: -0.25, Day: time.Minute}, 2 * time.Minute, 0.5},
		{"shrunk to nothing", &GrowthSpec{PerDay: -0.25, Day: time.Minute}, 10 * time.Minute, 0},
	} {
		l := LoadSpec{Growth: c.g}
		if got := l.growthFactor(c.at); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: factor at %s = %g, want %g", c.name, c.at, got, c.want)
		}
	}
}

func TestGrowthParse(t *testing.T) {
	for _, c := range []struct {
		name, growth string
		want         *GrowthSpec
		err          string
	}{
		{"percent", "{per_day: 5%, day: 1m}", &GrowthSpec{PerDay: 0.05, Day: time.Minute}, ""},
		{"number", "{per_day: 0.05, day: 90s}", &GrowthSpec{PerDay: 0.05, Day: 90 * time.Second}, ""},
		{"no day", "{per_day: 5%}", nil, "servers[0].load.growth.day: must be a positive duration, the simulated time of one day (e.g. 1m), got 0s"},
		{"below -100%", "{per_day: -150%, day: 1m}", nil, "servers[0].load.growth.per_day: must be a share of the rate of -100% or more (e.g. 5% or 0.05), got -1.5"},
		{"not a share", "{per_day: fast, day: 1m}", nil, `s.yaml:7: "fast" is no share: write a number (0.05) or a percentage (5%)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := ParseScenario("s.yaml", []byte(`
servers:
  - name: a
    engine: vllm
    load:
      rate: 1
      growth: `+c.growth+"\n"))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v; want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Servers[0].Load.Growth; got == nil || *got != *c.want {
				t.Errorf("growth %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestGrowthPeak: a server whose load grows 25 % a day, a day being 10
// simulated minutes, run for 6 days: the daily mean and the daily peak (of
// 30-second means) of its used KV rise by 25 % of the first day's level a
// day, within 3 points (least squares through the 6 days). Requests of
// bounded sizes without shared prefixes (a shared prefix is held once,
// whatever the load) and a prefill fast enough for the last day's rate keep
// the used KV proportional to the load.
func TestGrowthPeak(t *testing.T) {
	sc, err := ParseScenario("growth.yaml", []byte(`
servers:
  - name: a
    engine: vllm
    capacity_tokens: 4000000
    max_running_requests: 1000
    load: {rate: 32, prefill_rate: 400000, prompt_mean: 1000, prompt_max: 2000, output_mean: 200, output_max: 400, prefix_share: 0.001, growth: {per_day: 25%, day: 10m}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	const days, perDay = 6, 0.25
	day := 10 * time.Minute
	var means, peaks []float64
	for range days {
		var sum, window, peak float64
		var n, w int
		for s := time.Second; s <= day; s += time.Second {
			c.Advance(time.Second)
			u := float64(c.Truth("a").UsedTokens)
			window += u
			if w++; w == 30 {
				peak, window, w = max(peak, window/30), 0, 0
			}
			sum += u
			n++
		}
		means, peaks = append(means, sum/float64(n)), append(peaks, peak)
	}
	for _, c := range []struct {
		name string
		y    []float64
		// at is where in its day a value stands: the mean in the middle,
		// the peak at the end, where the growing load is highest.
		at float64
	}{{"mean", means, 0.5}, {"peak", peaks, 1}} {
		// Least squares y = a + b·d: the growth per day as a share of the
		// level at the start, b / a.
		var sx, sy, sxx, sxy float64
		for d, y := range c.y {
			x := float64(d) + c.at
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		nn := float64(len(c.y))
		b := (nn*sxy - sx*sy) / (nn*sxx - sx*sx)
		a := (sy - b*sx) / nn
		t.Logf("daily %s of used KV: %.0f; growth %.1f%% a day", c.name, c.y, 100*b/a)
		if got := b / a; math.Abs(got-perDay) > 0.03 {
			t.Errorf("daily %s grows %.1f%% a day; want %.0f%% ± 3", c.name, 100*got, 100*perDay)
		}
	}
}
