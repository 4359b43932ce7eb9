package crosscheck

import (
	"context"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestCacheServersInNoPool: an LMCache server and a KVBM listener hold
// cache tiers and no KV pool. Scraped with the role the simulator gives
// them (cache), with none, or with a configured role they cannot have
// (decode, unified), they are role cache: counted apart in the fleet, in
// no pool, so the vLLM pool beside LMCache is whole (1 of 1 reporting, a
// drain answer) and the KVBM-only fleet has no KV pool at all.
func TestCacheServersInNoPool(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		pools    int // KV pools, each of one server that reports KV
	}{
		{"vllm-lmcache", 1},
		{"dynamo-kvbm", 0},
	} {
		for _, configured := range []string{"", "as-simulated", "decode", "unified"} {
			t.Run(tc.scenario+"/"+configured, func(t *testing.T) {
				c := startCluster(t, tc.scenario)
				c.Advance(2 * time.Minute)
				s := scrape.New(engine.NewRegistry(), 64<<20)
				var results []scrape.Result
				caches := 0
				for _, ep := range c.Endpoints() {
					role := ""
					if ep.Role == sim.RoleCache {
						caches++
						role = configured
						if configured == "as-simulated" {
							role = ep.Role
						}
					}
					tg, err := scrape.NewTarget(&config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, Role: role})
					if err != nil {
						t.Fatal(err)
					}
					tg.Timeout = 5 * time.Second
					res := s.Scrape(context.Background(), tg)
					if !res.OK() {
						t.Fatalf("%s: %v", ep.Name, res.Err)
					}
					if want := ep.Role == sim.RoleCache; (res.Server.Role == kv.RoleCache) != want {
						t.Errorf("%s (%s, configured %q) has role %s", ep.Name, ep.Engine, role, res.Server.Role)
					}
					results = append(results, res)
				}
				if caches != 1 {
					t.Fatalf("%s simulates %d cache servers, want 1", tc.scenario, caches)
				}
				rep := report.NewTracker([]int{8192}).Update(time.Now(), results)
				if rep.Fleet.CacheServers != 1 || rep.Fleet.Servers != tc.pools {
					t.Errorf("fleet: %d cache servers, %d servers; want 1 and %d", rep.Fleet.CacheServers, rep.Fleet.Servers, tc.pools)
				}
				if len(rep.Pools) != tc.pools || len(rep.Planning) != tc.pools {
					t.Fatalf("%d pools, %d planned; want %d", len(rep.Pools), len(rep.Planning), tc.pools)
				}
				for i, p := range rep.Pools {
					if p.Servers != 1 || p.Counted != 1 || !p.Used.OK() || !p.Capacity.OK() {
						t.Errorf("pool %s: %d servers, %d counted, used %v, capacity %v; want a whole sum of one server", p.Name, p.Servers, p.Counted, p.Used, p.Capacity)
					}
					if pl := rep.Planning[i]; pl.Servers != 1 || pl.Drain == nil {
						t.Errorf("pool %s plan: %d servers, drain %+v; want the single server's drain answer", p.Name, pl.Servers, pl.Drain)
					}
				}
			})
		}
	}
}
