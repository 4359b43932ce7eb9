package crosscheck

import (
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// poolOf returns the server's pool of full attention on tier (and name).
func poolOf(s *kv.Server, tier, name string) *kv.CachePool {
	for i := range s.CachePools {
		p := &s.CachePools[i]
		if p.Type == kv.PoolFull && p.Tier == tier && p.Name == name {
			return p
		}
	}
	return nil
}

// ratio1e6 scales a ratio so that check's ±0.5 tolerance is ±5e-7.
func ratio1e6(v kv.Value) kv.Value { return kv.Value{V: v.V * 1e6, Prov: v.Prov} }

// TestLMCacheReportsTruth: an LMCache server's L1 and L2 (bytes) and its
// lookups are read back from the simulator's state; it holds no GPU KV.
// Its vLLM server keeps its own device pool and shows no tier of its own.
func TestLMCacheReportsTruth(t *testing.T) {
	c := startCluster(t, "vllm-lmcache")
	var spilled, partial, hitL2 bool
	readBack(t, c, []time.Duration{time.Minute, 4 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
		switch ep.Engine {
		case sim.EngineVLLM:
			if s.Engine != "vllm" {
				t.Fatalf("%s read as %s", ep.Name, s.Engine)
			}
			check(t, ep.Name+" capacity", s.Capacity, float64(truth.CapacityTokens))
			check(t, ep.Name+" used", s.Used, float64(truth.UsedTokens))
			check(t, ep.Name+" prefix hit tokens", s.Counters.PrefixHitTokens, float64(truth.Counters.PrefixHitTokens))
			if len(s.CachePools) != 0 {
				t.Errorf("%s has pools %+v; its tiers are the LMCache server's", ep.Name, s.CachePools)
			}
		case sim.EngineLMCache:
			lt := truth.LMCache
			if lt == nil || s.Engine != "lmcache" {
				t.Fatalf("%s: truth %v, read as %q", ep.Name, lt, s.Engine)
			}
			check(t, ep.Name+" capacity", s.Capacity, -1)
			check(t, ep.Name+" used", s.Used, -1)
			check(t, ep.Name+" usage", s.UsageRatio, -1)
			check(t, ep.Name+" lookup hit tokens", s.Counters.PrefixHitTokens, float64(lt.HitTokens))
			check(t, ep.Name+" lookup requested tokens", s.Counters.PrefixQueryTokens, float64(lt.RequestedTokens))
			if s.Model != lt.ModelName {
				t.Errorf("%s model = %q, want %q", ep.Name, s.Model, lt.ModelName)
			}
			l1 := poolOf(s, kv.TierLMCacheL1, "")
			l2 := poolOf(s, kv.TierLMCacheL2, lt.L2Name)
			if l1 == nil || l2 == nil {
				t.Fatalf("%s: L1 %v, L2 %v among %+v", ep.Name, l1, l2, s.CachePools)
			}
			for _, p := range []*kv.CachePool{l1, l2} {
				if p.Unit != kv.UnitBytes {
					t.Errorf("%s %s unit = %q, want bytes", ep.Name, p.Tier, p.Unit)
				}
			}
			check(t, ep.Name+" L1 used", l1.Used, float64(lt.L1UsedBytes))
			check(t, ep.Name+" L1 usage ×1e6", ratio1e6(l1.UsageRatio), 1e6*float64(lt.L1UsedBytes)/float64(lt.L1CapacityBytes))
			if lt.L1UsedBytes > 0 {
				// used / usage: the capacity LMCache does not export.
				check(t, ep.Name+" L1 capacity", l1.Capacity, float64(lt.L1CapacityBytes))
			}
			check(t, ep.Name+" L1 hit tokens", l1.HitTokens, float64(lt.HitL1Tokens))
			check(t, ep.Name+" L2 used", l2.Used, float64(lt.L2UsedBytes))
			check(t, ep.Name+" L2 capacity", l2.Capacity, -1)
			check(t, ep.Name+" L2 hit tokens", l2.HitTokens, float64(lt.HitL2Tokens))
			t.Logf("%s: %+v", ep.Name, *lt)
			spilled = spilled || lt.L2UsedBytes > 0
			partial = partial || (lt.L1UsedBytes > 0 && lt.L1UsedBytes < lt.L1CapacityBytes)
			hitL2 = hitL2 || lt.HitL2Tokens > 0
		}
	})
	if !spilled || !partial || !hitL2 {
		t.Errorf("L1 never partly full (%v), never spilled to L2 (%v) or L2 never hit (%v): the comparison proved little", partial, spilled, hitL2)
	}
}

// TestTRTLLMServeReportsTruth: trtllm-serve's block gauges give capacity
// and used in tokens, its host pool's utilization and the tokens each
// level served are read back, and the prefix counters are the ones
// credited at completion. The collector before @050f80de
// (sim.VersionTRTLLMBefore) exports none of the block gauges, the host
// utilization, the per-level hits, the running-request limit or the
// generation counter: those are unknown on its page, never 0; its
// utilization, running, queued (under their old names) and prompt counters
// are read as the current ones.
func TestTRTLLMServeReportsTruth(t *testing.T) {
	for _, version := range versionsOf("trtllm-serve") {
		t.Run(version, func(t *testing.T) {
			c := startCluster(t, "trtllm-serve")
			before := version == sim.VersionTRTLLMBefore
			// known is want on the current collector's page, unknown (-1)
			// on the older one's.
			known := func(want float64) float64 {
				if before {
					return -1
				}
				return want
			}
			gen := "current"
			if before {
				gen = "legacy"
			}
			for _, ep := range c.Endpoints() {
				if err := c.SetVersion(ep.Name, version); err != nil {
					t.Fatal(err)
				}
			}
			busy, hostHit := false, false
			readBack(t, c, []time.Duration{2 * time.Minute, 6 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
				if truth.Version != version {
					t.Fatalf("%s runs version %q, want %q", ep.Name, truth.Version, version)
				}
				if ep.MetricsPath != "/prometheus/metrics" {
					t.Errorf("%s metrics path = %q, want /prometheus/metrics", ep.Name, ep.MetricsPath)
				}
				if s.Engine != "trtllm-serve" || s.Generation != gen {
					t.Fatalf("%s read as %s %s, want trtllm-serve %s", ep.Name, s.Engine, s.Generation, gen)
				}
				check(t, ep.Name+" capacity", s.Capacity, known(float64(truth.CapacityTokens)))
				check(t, ep.Name+" used", s.Used, known(float64(truth.UsedTokens)))
				check(t, ep.Name+" usage ×1e6", ratio1e6(s.UsageRatio), 1e6*float64(truth.UsedTokens)/float64(truth.CapacityTokens))
				check(t, ep.Name+" running", s.Running, float64(truth.Running))
				check(t, ep.Name+" queued", s.Queued.Waiting, float64(truth.Queued))
				// maxNumActiveRequests: the running-request limit.
				check(t, ep.Name+" running limit", s.MaxRunning, known(float64(truth.MaxRunningRequests)))
				check(t, ep.Name+" prompt tokens", s.Counters.PromptTokens, float64(truth.Counters.FinishedPromptTokens))
				check(t, ep.Name+" generation tokens", s.Counters.GenerationTokens, known(float64(truth.Counters.FinishedGenerationTokens)))
				check(t, ep.Name+" prefix hit tokens", s.Counters.PrefixHitTokens, float64(truth.Counters.FinishedHitTokens+truth.Host.HitTokens))
				check(t, ep.Name+" prefix query tokens", s.Counters.PrefixQueryTokens, float64(truth.Counters.FinishedPromptTokens))
				h := hostPool(s)
				switch {
				case before && h != nil:
					t.Errorf("%s has a host pool %+v; the older collector exports none", ep.Name, h)
				case !before && h == nil:
					t.Fatalf("%s: no host pool among %+v", ep.Name, s.CachePools)
				case !before:
					check(t, ep.Name+" host usage ×1e6", ratio1e6(h.UsageRatio), 1e6*float64(truth.Host.UsedTokens)/float64(truth.Host.CapacityTokens))
					check(t, ep.Name+" host capacity", h.Capacity, -1)
					check(t, ep.Name+" host hit tokens", h.HitTokens, float64(truth.Host.HitTokens))
					// The collector writes a transfer counter only once
					// it has counted: none before the first transfer.
					check(t, ep.Name+" host load bytes", h.LoadBytes, positive(truth.Host.LoadedBytes))
					check(t, ep.Name+" host store bytes", h.StoreBytes, positive(truth.Host.StoredBytes))
				}
				if d := poolOf(s, kv.TierDisk, ""); d != nil {
					t.Errorf("%s has a disk pool %+v; the scenario has none", ep.Name, d)
				}
				busy = busy || (truth.UsedTokens > 0 && truth.Running > 0 && truth.Host.UsedTokens > 0)
				hostHit = hostHit || truth.Host.HitTokens > 0
			})
			if !busy || !hostHit {
				t.Errorf("never busy with a filled host (%v) or never a host hit (%v): the comparison proved little", busy, hostHit)
			}
		})
	}
}

// positive is n, or unavailable (-1) while it is 0.
func positive(n int64) float64 {
	if n == 0 {
		return -1
	}
	return float64(n)
}

// TestKVBMReportsTruth: a Dynamo KVBM page's host (G2) and disk (G3) hit
// rates over KVBM's window are read back; it exports no fill, and no GPU KV.
func TestKVBMReportsTruth(t *testing.T) {
	c := startCluster(t, "dynamo-kvbm")
	hitHost, hitDisk := false, false
	readBack(t, c, []time.Duration{2 * time.Minute, 6 * time.Minute}, func(ep sim.Endpoint, truth sim.Truth, s *kv.Server) {
		kt := truth.KVBM
		if kt == nil || s.Engine != "dynamo" {
			t.Fatalf("%s: truth %v, read as %q", ep.Name, kt, s.Engine)
		}
		check(t, ep.Name+" capacity", s.Capacity, -1)
		check(t, ep.Name+" usage", s.UsageRatio, -1)
		host, disk := poolOf(s, kv.TierHost, ""), poolOf(s, kv.TierDisk, "")
		if host == nil || disk == nil {
			t.Fatalf("%s: host %v, disk %v among %+v", ep.Name, host, disk, s.CachePools)
		}
		check(t, ep.Name+" host hit rate ×1e6", ratio1e6(host.HitRate), 1e6*kt.HostHitRate)
		check(t, ep.Name+" disk hit rate ×1e6", ratio1e6(disk.HitRate), 1e6*kt.DiskHitRate)
		for _, p := range []*kv.CachePool{host, disk} {
			check(t, ep.Name+" "+p.Tier+" used", p.Used, -1)
			check(t, ep.Name+" "+p.Tier+" capacity", p.Capacity, -1)
		}
		t.Logf("%s: %+v", ep.Name, *kt)
		hitHost = hitHost || kt.HostHitRate > 0
		hitDisk = hitDisk || kt.DiskHitRate > 0
	})
	if !hitHost || !hitDisk {
		t.Errorf("host (%v) or disk (%v) never hit: the comparison proved little", hitHost, hitDisk)
	}
}

// TestTierPagesInCatalog: every family the simulator writes for the tier
// scenarios, in every version of their engines, is one the catalog knows
// (its engines' sources), so the simulator invents no name.
func TestTierPagesInCatalog(t *testing.T) {
	cat := catalog.Default()
	for _, scenario := range []string{"vllm-lmcache", "trtllm-serve", "dynamo-kvbm", "vllm-offload", "sglang-hicache", "sglang-hybrid"} {
		t.Run(scenario, func(t *testing.T) {
			c := startCluster(t, scenario)
			c.Advance(time.Minute)
			for _, ep := range c.Endpoints() {
				for _, version := range versionsOf(ep.Engine) { // every dialect
					if version != "" {
						if err := c.SetVersion(ep.Name, version); err != nil {
							t.Fatal(err)
						}
					}
					page := testenv.Page(t, ep)
					for _, n := range page.Names() {
						if n == "target_info" && ep.Engine == sim.EngineLMCache {
							continue // OpenTelemetry's resource series, not LMCache's (the catalog lists engines' own names)
						}
						if len(cat.Lookup(n)) == 0 && len(cat.RenamesOf(n)) == 0 {
							t.Errorf("%s (%s %s) writes %s, which the catalog does not know", ep.Name, ep.Engine, version, n)
						}
					}
				}
			}
		})
	}
}
