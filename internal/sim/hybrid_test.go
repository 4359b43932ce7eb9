package sim

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestMambaPool: a hybrid Mamba model admits at most mamba_slots requests
// per rank whatever its running limit and KV allow, each holding one slot;
// its page shows the pool's counts and usage, token_usage the max over the
// pools, and its planning truth names the state pool at the warning.
func TestMambaPool(t *testing.T) {
	sc, err := BuiltinScenario("sglang-mamba")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{ManualClock: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Advance(2 * time.Minute)
	tr := c.Truth("mamba")
	// 20 requests/s of ~2,000 tokens keep more than 12 waiting: the slots
	// are the limit, not the 64 running or the KV (a slot freed this step
	// is taken on the next).
	if tr.Mamba == nil || tr.Mamba.CapacitySlots != 12 || tr.Running < 11 || tr.Running > 12 || tr.Mamba.UsedSlots != int64(tr.Running) || tr.Queued == 0 {
		t.Fatalf("truth: running %d, queued %d, mamba %+v; want 11 or 12 of 12 slots busy, one each, and a queue", tr.Running, tr.Queued, tr.Mamba)
	}
	if tr.UsedTokens*10 > tr.CapacityTokens*9 {
		t.Fatalf("KV %d of %d: the test needs KV below the warning", tr.UsedTokens, tr.CapacityTokens)
	}
	code, b, err := get(t, c.Endpoints()[0].URL+"/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics = %d, %v", code, err)
	}
	p := parse(t, b)
	r := []string{"tp_rank", "1"}
	run := float64(tr.Running)
	for name, want := range map[string]float64{
		"sglang:mamba_available_tokens": 12 - run,
		"sglang:mamba_evictable_tokens": 0,
		"sglang:mamba_used_tokens":      run,
		"sglang:mamba_usage":            run / 12,
		// max(full, swa, mamba), rounded to 0.01: the Mamba pool's.
		"sglang:token_usage":          math.Round(run/12*100) / 100,
		"sglang:swa_used_tokens":      0,
		"sglang:max_total_num_tokens": 262144,
	} {
		if got := one(t, p, name, r...); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	// 11 / 12 = 91.7 % or 12 / 12 of the slots, KV below 90 %.
	if got := tr.Planning(0.9).Limit; got != FactorState {
		t.Errorf("planning truth limit = %s, want %s (%d of 12 slots)", got, FactorState, tr.Running)
	}

	_, err = ParseScenario("bad.yaml", []byte("servers:\n  - name: v\n    engine: vllm\n    mamba_slots: 4\n  - name: s\n    engine: sglang\n    mamba_slots: -1\n"))
	want := "bad.yaml:4: servers[0].mamba_slots: hybrid models are simulated for engine sglang only, got vllm\n" +
		"bad.yaml:7: servers[1].mamba_slots: must not be negative, got -1"
	if err == nil || err.Error() != want {
		t.Errorf("ParseScenario error =\n%v\nwant\n%s", err, want)
	}
}
