package crosscheck

import (
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// hostPool returns the server's host-tier pool of full attention.
func hostPool(s *kv.Server) *kv.CachePool {
	for i := range s.CachePools {
		if s.CachePools[i].Type == kv.PoolFull && s.CachePools[i].Tier == kv.TierHost {
			return &s.CachePools[i]
		}
	}
	return nil
}

// TestTiersReportTruth: kvwatch reads the simulator's SGLang HiCache host
// tier back (capacity, fill, hits) and keeps the device pool apart.
func TestTiersReportTruth(t *testing.T) {
	c := startCluster(t, "sglang-hicache")
	filled, partial, hit := false, false, false
	readBack(t, c, []time.Duration{2 * time.Minute, 6 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
		if truth.Host == nil {
			t.Fatalf("%s: the scenario has no host tier", ep.Name)
		}
		h := hostPool(s)
		if h == nil {
			t.Fatalf("%s: no host pool among %+v", ep.Name, s.CachePools)
		}
		name := ep.Name + " host"
		if h.Unit != kv.UnitTokens {
			t.Errorf("%s unit = %q, want tokens", name, h.Unit)
		}
		check(t, name+" capacity", h.Capacity, float64(truth.Host.CapacityTokens))
		check(t, name+" used", h.Used, float64(truth.Host.UsedTokens))
		check(t, name+" usage", kv.Value{V: h.UsageRatio.V * 1e6, Prov: h.UsageRatio.Prov}, 1e6*float64(truth.Host.UsedTokens)/float64(truth.Host.CapacityTokens))
		check(t, name+" hit tokens", h.HitTokens, float64(truth.Host.HitTokens))
		// The device pool is the device's, not a blend with the host.
		check(t, ep.Name+" capacity", s.Capacity, float64(truth.CapacityTokens))
		check(t, ep.Name+" used", s.Used, float64(truth.UsedTokens))
		// Every tier's prefix hits: the device's and the host's.
		check(t, ep.Name+" prefix hit tokens", s.Counters.PrefixHitTokens, float64(truth.Counters.PrefixHitTokens+truth.Host.HitTokens))
		t.Logf("%s: host %+v, device used %d of %d", ep.Name, *truth.Host, truth.UsedTokens, truth.CapacityTokens)
		filled = filled || truth.Host.UsedTokens > 0
		hit = hit || truth.Host.HitTokens > 0
		partial = partial || (truth.Host.UsedTokens > 0 && truth.Host.UsedTokens < truth.Host.CapacityTokens)
	})
	if !filled || !partial || !hit {
		t.Errorf("host tier never filled (%v), never partly full (%v) or never hit (%v): the comparison proved little", filled, partial, hit)
	}
}

// TestOffloadReportsTruth: vLLM's native CPU offloading is a host pool whose
// fill and capacity stay unavailable (vLLM does not export them), whose
// hits are the simulator's loaded-back tokens and whose traffic its bytes
// loaded and stored, in each version: the connector's flat counters with
// the deprecated one beside them (never added), or the deprecated one
// alone. The server's prefix hits count the device's and the CPU tier's.
func TestOffloadReportsTruth(t *testing.T) {
	for _, version := range versionsOf("vllm") {
		t.Run(version, func(t *testing.T) {
			c := startCluster(t, "vllm-offload")
			for _, ep := range c.Endpoints() {
				if err := c.SetVersion(ep.Name, version); err != nil {
					t.Fatal(err)
				}
			}
			hit, stored := false, false
			readBack(t, c, []time.Duration{2 * time.Minute, 6 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
				h := hostPool(s)
				if h == nil || truth.Host == nil {
					t.Fatalf("%s: host pool %v, truth %v", ep.Name, h, truth.Host)
				}
				name := ep.Name + " host"
				check(t, name+" capacity", h.Capacity, -1)
				check(t, name+" used", h.Used, -1)
				check(t, name+" usage", h.UsageRatio, -1)
				check(t, name+" hit tokens", h.HitTokens, float64(truth.Host.HitTokens))
				check(t, name+" load bytes", h.LoadBytes, float64(truth.Host.LoadedBytes))
				check(t, name+" store bytes", h.StoreBytes, float64(truth.Host.StoredBytes))
				if h.Note == "" {
					t.Errorf("%s has no note saying why its fill is unavailable", name)
				}
				// Before vllm#42206 capacity is num_gpu_blocks × block_size,
				// the null block included (see TestAdaptersReportTruth).
				tol := 0.5
				if version == sim.VersionVLLMBefore {
					tol = float64(truth.PageSize * int64(truth.DP))
				}
				checkWithin(t, ep.Name+" capacity", s.Capacity, float64(truth.CapacityTokens), tol)
				check(t, ep.Name+" prefix hit tokens", s.Counters.PrefixHitTokens, float64(truth.Counters.PrefixHitTokens+truth.Host.HitTokens))
				check(t, ep.Name+" prefix query tokens", s.Counters.PrefixQueryTokens, float64(truth.Counters.PrefixQueriedTokens))
				hit = hit || truth.Host.HitTokens > 0
				stored = stored || truth.Host.StoredBytes > 0
			})
			if !hit || !stored {
				t.Errorf("the CPU tier was never hit (%v) or never stored to (%v): the comparison proved little", hit, stored)
			}
		})
	}
}

// TestHybridReportsTruth: a hybrid model's SWA pool is read back as its own
// pool, and the primary (full attention) pool is the full pool's, not the
// max over pools that SGLang's token_usage is.
func TestHybridReportsTruth(t *testing.T) {
	c := startCluster(t, "sglang-hybrid")
	busy := false
	readBack(t, c, []time.Duration{90 * time.Second, 4 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
		if truth.SWA == nil {
			t.Fatalf("%s: the scenario is not hybrid", ep.Name)
		}
		var swa *kv.CachePool
		for i := range s.CachePools {
			if s.CachePools[i].Type == kv.PoolSWA {
				swa = &s.CachePools[i]
			}
		}
		if truth.SWA.UsedTokens == 0 {
			return
		}
		busy = true
		if swa == nil {
			t.Fatalf("%s: no SWA pool among %+v", ep.Name, s.CachePools)
		}
		want := float64(truth.SWA.UsedTokens) / float64(truth.SWA.CapacityTokens)
		check(t, ep.Name+" swa usage ×1e6", kv.Value{V: swa.UsageRatio.V * 1e6, Prov: swa.UsageRatio.Prov}, want*1e6)
		check(t, ep.Name+" used", s.Used, float64(truth.UsedTokens))
		check(t, ep.Name+" usage ×1e6", kv.Value{V: s.UsageRatio.V * 1e6, Prov: s.UsageRatio.Prov}, 1e6*float64(truth.UsedTokens)/float64(truth.CapacityTokens))
	})
	if !busy {
		t.Error("the SWA pool was never used: the comparison proved little")
	}
}

// readBack advances c to each instant and calls f with each endpoint, the
// simulator's truth for it and what kvwatch read from its page.
func readBack(t *testing.T, c *sim.Cluster, ats []time.Duration, f func(ep sim.Endpoint, truth sim.Truth, s *kv.Server)) {
	t.Helper()
	for _, at := range ats {
		c.Advance(at)
		for _, ep := range c.Endpoints() {
			truth := c.Truth(ep.Name)
			res := scrapeEndpoint(t, ep)
			if !res.OK() {
				t.Fatalf("%s: %v", ep.Name, res.Err)
			}
			f(ep, truth, res.Server)
		}
	}
}
