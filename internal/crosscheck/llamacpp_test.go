package crosscheck

import (
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestLlamaCppKVModes: a llama.cpp server whose 4 slots share one KV cache
// (kv_unified, llama-server's default without -np: every slot reports the
// whole capacity as n_ctx) and one whose slots each hold a share are read
// at the simulator's true capacity when the target says which, never at 4
// times it; a target that does not say reads capacity, usage and headroom
// as unavailable (needs_config) and used tokens as they are.
func TestLlamaCppKVModes(t *testing.T) {
	sc, err := sim.ParseScenario("llamacpp-modes.yaml", []byte(`servers:
  - {name: shared, engine: llamacpp, kv_unified: true, capacity_tokens: 16384, context_length: 16384, max_running_requests: 4,
     load: {rate: 2, prompt_mean: 800, prompt_max: 1500, output_mean: 200, output_max: 400, prefix_tokens: 256}}
  - {name: split, engine: llamacpp, capacity_tokens: 16384, context_length: 16384, max_running_requests: 4,
     load: {rate: 2, prompt_mean: 800, prompt_max: 1500, output_mean: 200, output_max: 400, prefix_tokens: 256}}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Cluster(t, sc, sim.Options{Seed: 3, ManualClock: true})
	c.Advance(40 * time.Second)
	for _, ep := range c.Endpoints() {
		truth := c.Truth(ep.Name)
		var capacity, used int64
		for _, r := range truth.Ranks {
			capacity += r.CapacityTokens
			used += r.UsedTokens
		}
		if capacity != 16384 || used == 0 {
			t.Fatalf("%s: truth capacity %d, used %d; want 16384 and some use", ep.Name, capacity, used)
		}
		if ep.KVUnified == nil || *ep.KVUnified != (ep.Name == "shared") {
			t.Fatalf("%s: endpoint kv_unified %v", ep.Name, ep.KVUnified)
		}
		res := scrapeEndpoint(t, ep)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		s := res.Server.Signals
		check(t, ep.Name+" capacity", s.Capacity, float64(capacity))
		check(t, ep.Name+" used", s.Used, float64(used))
		checkWithin(t, ep.Name+" usage", s.UsageRatio, float64(used)/float64(capacity), 1e-9)

		ep.KVUnified = nil // the target does not say
		res = scrapeEndpoint(t, ep)
		s = res.Server.Signals
		check(t, ep.Name+" capacity without kv_unified", s.Capacity, -1)
		check(t, ep.Name+" usage without kv_unified", s.UsageRatio, -1)
		check(t, ep.Name+" headroom without kv_unified", res.Server.Headroom(1024), -1)
		check(t, ep.Name+" used without kv_unified", s.Used, float64(used))
		if !res.Server.Explained(kv.UnknownConfig) {
			t.Errorf("%s without kv_unified: unavailable %+v, want %s", ep.Name, res.Server.Unavailable, kv.UnknownConfig)
		}
	}
}
