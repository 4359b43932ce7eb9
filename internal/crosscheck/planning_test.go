package crosscheck

import (
	"math"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestPlanningReportsTruth: on the planning scenario (a ramp to a steady
// fill, a drain, a batch-limited server), kvwatch's workload headroom, KV
// per running request, running-request limit, limiting factor and the
// pool's N−1 answer are what the simulator's ground truth says, at every
// instant; and the scenario does what it claims (fill fills, drain drains,
// batch is batch-limited).
func TestPlanningReportsTruth(t *testing.T) {
	const warning = 0.9
	c := startCluster(t, "planning")
	used := map[string][]int64{}
	factors := map[string]map[string]bool{}
	at := time.Duration(0)
	finished := 0 // looks with finished requests
	for _, step := range []time.Duration{60 * time.Second, 90 * time.Second, 60 * time.Second, 60 * time.Second, 90 * time.Second} {
		c.Advance(step)
		at += step
		var members []kv.PlanMember
		var truths []sim.Truth
		for _, ep := range c.Endpoints() {
			truth := c.Truth(ep.Name)
			res := scrapeEndpoint(t, ep)
			if !res.OK() {
				t.Fatalf("%s at %s: %v", ep.Name, at, res.Err)
			}
			want := truth.Planning(warning)
			got := kv.PlanServer(res.Server, 0, kv.Value{}, warning)
			name := ep.Name + " at " + at.String()
			if want.PerRequestOK {
				check(t, name+" KV per running request", got.KVPerRequest, want.KVPerRequest)
			} else {
				check(t, name+" KV per running request", got.KVPerRequest, -1)
			}
			if want.HeadroomOK {
				check(t, name+" workload headroom", got.WorkloadHeadroom, float64(want.WorkloadHeadroom))
			} else {
				check(t, name+" workload headroom", got.WorkloadHeadroom, -1)
			}
			check(t, name+" max running", got.MaxRunning, float64(want.MaxRunning))
			got.WithFinished(res.Server, nil)
			if want.FinishedOK {
				check(t, name+" finished request tokens", got.FinishedRequestTokens, want.FinishedMean)
				check(t, name+" finished headroom", got.FinishedHeadroom, float64(want.FinishedHeadroom))
				finished++
			} else {
				check(t, name+" finished request tokens", got.FinishedRequestTokens, -1)
			}
			if string(got.Limit) != want.Limit {
				t.Errorf("%s limit = %s (%s), want %s", name, got.Limit, got.Why, want.Limit)
			}
			if factors[ep.Name] == nil {
				factors[ep.Name] = map[string]bool{}
			}
			factors[ep.Name][want.Limit] = true
			used[ep.Name] = append(used[ep.Name], truth.UsedTokens)
			p := got
			members = append(members, kv.PlanMember{Key: kv.PoolKey{Role: res.Server.Role}, Name: ep.Name, Server: res.Server, Plan: &p})
			truths = append(truths, truth)
		}
		pools := kv.PlanPools(members, warning, 0.8)
		if len(pools) != 1 || pools[0].Drain == nil {
			t.Fatalf("at %s: pools %+v, want one with a drain answer", at, pools)
		}
		want := sim.PoolDrain(truths, warning)
		d := pools[0].Drain
		if d.Server != want.Server || pools[0].N1Safe != want.Safe || math.Abs(d.MarginTokens.V-want.MarginTokens) > 1 ||
			d.Load.V != float64(want.Load) || d.RestCapacity.V != float64(want.RestCapacity) {
			t.Errorf("at %s: drain %s load %v rest %v margin %v safe %v, want %+v", at, d.Server, d.Load.V, d.RestCapacity.V,
				d.MarginTokens.V, pools[0].N1Safe, want)
		}
	}
	// The scenario's shapes: fill holds more at the end than at 60s and
	// ends KV-limited; drain holds less at the end than at 150s (arrivals
	// stopped at 151s); batch was batch-limited at some look.
	if u := used["fill"]; u[len(u)-1] <= u[0] {
		t.Errorf("fill: used %v, want it to grow with the ramp", u)
	}
	if u := used["drain"]; u[1] == 0 || u[len(u)-1] >= u[1] {
		t.Errorf("drain: used %v, want busy at 150s and less at the end", u)
	}
	if finished == 0 {
		t.Errorf("no server had finished a request at any look: the finished-size checks did not run")
	}
	if !factors["fill"][sim.FactorKV] {
		t.Errorf("fill: factors seen %v, want kv once the ramp has filled it", factors["fill"])
	}
	if !factors["batch"][sim.FactorBatch] {
		t.Errorf("batch: factors seen %v, want batch at least once", factors["batch"])
	}
}
