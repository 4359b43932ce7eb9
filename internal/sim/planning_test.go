package sim

import (
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
