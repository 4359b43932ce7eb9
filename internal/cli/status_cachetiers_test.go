package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestStatusCacheTiers: status -o wide, --ranks and -o json against the
// simulated SGLang HiCache server list its host tier with the simulator's
// own capacity, fill and hits (issue 13: status and JSON list the pools and
// tiers), and plain status keeps them off the one-line rows.
func TestStatusCacheTiers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "sglang-hicache", 13)
	defer c.Close()
	c.Advance(2 * time.Minute) // partly full (the tier scenarios in internal/sim/builtin.go)
	ep := c.Endpoints()[0]
	tr := c.Truth(ep.Name)
	if tr.Host == nil || tr.Host.UsedTokens == 0 || tr.Host.UsedTokens >= tr.Host.CapacityTokens || tr.Host.HitTokens == 0 {
		t.Fatalf("the host tier is not partly full with hits at 2m: %+v", tr.Host)
	}
	target := ep.URL + ep.MetricsPath
	// Worked out from the simulator's truth, in status's formats.
	line := fmt.Sprintf("host tier  KV %s / %s tok (%.1f%%)  hits %s tok",
		kmg(float64(tr.Host.UsedTokens)), kmg(float64(tr.Host.CapacityTokens)),
		100*float64(tr.Host.UsedTokens)/float64(tr.Host.CapacityTokens), kmg(float64(tr.Host.HitTokens)))
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, args := range [][]string{{"-o", "wide"}, {"--ranks"}} {
		code, out, errs := run(t, append(append([]string{"status"}, args...), target)...)
		if code != 0 {
			t.Fatalf("status %v: exit %d: %s", args, code, errs)
		}
		if !strings.Contains(squash(out), squash(line)) {
			t.Errorf("status %v lacks %q:\n%s", args, line, out)
		}
	}
	t.Logf("want %q", line)
	code, out, _ := run(t, "status", target)
	if code != 0 || strings.Contains(out, "host tier") {
		t.Errorf("plain status (exit %d) shows the tiers:\n%s", code, out)
	}
	code, out, errs := run(t, "status", "-o", "json", target)
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Servers) != 1 || rep.Servers[0].Server == nil {
		t.Fatalf("report %v: %s", err, out)
	}
	var host *kv.CachePool
	for i, p := range rep.Servers[0].Server.CachePools {
		if p.Type == kv.PoolFull && p.Tier == kv.TierHost {
			host = &rep.Servers[0].Server.CachePools[i]
		}
	}
	if host == nil || host.Capacity.V != float64(tr.Host.CapacityTokens) || host.Used.V != float64(tr.Host.UsedTokens) ||
		host.HitTokens.V != float64(tr.Host.HitTokens) || host.Unit != kv.UnitTokens || !strings.Contains(out, `"cache_pools"`) {
		t.Errorf("JSON host tier = %+v, want capacity %d, used %d, hits %d tokens", host, tr.Host.CapacityTokens, tr.Host.UsedTokens, tr.Host.HitTokens)
	}
}

// TestStatusCacheServer: status over vLLM and its LMCache server. The
// LMCache server is a cache server: its row shows its tiers (the L1 usage
// the JSON report holds, in status's format), it is in no pool, so the
// vLLM pool's sums are whole (no "~", no "1 of 2 report KV tokens") and
// the pool has its drain answer; the JSON fleet counts it apart.
func TestStatusCacheServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "vllm-lmcache", 13)
	defer c.Close()
	c.Advance(3 * time.Minute)
	var args []string
	lmcache := ""
	for _, ep := range c.Endpoints() {
		args = append(args, ep.URL+ep.MetricsPath)
		if ep.Role == sim.RoleCache {
			lmcache = strings.TrimPrefix(ep.URL, "http://")
		}
	}
	code, out, errs := run(t, append([]string{"status", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Fleet.CacheServers != 1 || rep.Fleet.Servers != 1 || len(rep.Pools) != 1 || rep.Pools[0].Counted != 1 {
		t.Fatalf("JSON fleet %+v, %d pools; want 1 cache server apart from 1 server in 1 whole pool", rep.Fleet, len(rep.Pools))
	}
	var l1 kv.Value
	for _, s := range rep.Servers {
		if s.Role == kv.RoleCache && s.Server != nil {
			for _, p := range s.Server.CachePools {
				if p.Tier == kv.TierLMCacheL1 {
					l1 = p.UsageRatio
				}
			}
		}
	}
	if !l1.OK() || l1.V <= 0 {
		t.Fatalf("the LMCache L1 usage is %v at 3m; want it partly full", l1)
	}
	t.Setenv("COLUMNS", "1000") // every column, no line wrapped
	code, out, errs = run(t, append([]string{"status"}, args...)...)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	want := fmt.Sprintf("cache %s lmcache tiers lmcache-l1 %.1f%%, lmcache-l2 fs", lmcache, 100*l1.V)
	if !strings.Contains(squash(out), want) {
		t.Errorf("status lacks the cache server's row %q:\n%s", want, out)
	}
	for _, bad := range []string{"report KV tokens", "~", "no drain answer"} {
		if strings.Contains(out, bad) {
			t.Errorf("status shows %q: the cache server is counted in the pool:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "fleet    1 server") || !strings.Contains(out, "+1 cache server (tiers only)") || !strings.Contains(out, "single server: draining") {
		t.Errorf("status lacks the whole one-server pool and its drain answer:\n%s", out)
	}
}
