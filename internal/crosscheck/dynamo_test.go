package crosscheck

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestDynamoUnpublished: a Dynamo worker whose DP ranks have not recorded
// stats yet (at start, and again right after a restart) shows init_publish's
// total_blocks 0 and usage 0.0; kvwatch reads its usage as unknown, not
// as an empty cache, in both dialects, and as the truth once the ranks
// have published.
func TestDynamoUnpublished(t *testing.T) {
	c := startCluster(t, "dynamo")
	var ep sim.Endpoint
	for _, e := range c.Endpoints() {
		if e.Name == "worker-0" {
			ep = e
		}
	}
	for _, step := range []struct {
		name      string
		do        func()
		published bool
	}{
		{"at start", func() {}, false},
		{"under load", func() { c.Advance(30 * time.Second) }, true},
		{"after a restart", func() {
			if err := c.SetFault(ep.Name, sim.Fault{Kind: sim.FaultRestart}); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		step.do()
		for _, version := range sim.Versions(sim.EngineDynamo) {
			if err := c.SetVersion(ep.Name, version); err != nil {
				t.Fatal(err)
			}
			truth := c.Truth(ep.Name)
			for i, p := range truth.Dynamo.Published {
				if p != step.published {
					t.Fatalf("%s: rank %d published %v, want %v", step.name, i, p, step.published)
				}
			}
			res := scrapeEndpoint(t, ep)
			if !res.OK() {
				t.Fatalf("%s %s: %v", step.name, version, res.Err)
			}
			checkDynamoWorker(t, step.name+" "+version, res.Server, truth)
			if !step.published && res.Server.UsageRatio.OK() {
				t.Errorf("%s %s: usage %v, want unknown", step.name, version, res.Server.UsageRatio.V)
			}
		}
	}
}

// checkDynamoFrontend compares what kvwatch reads on a Dynamo frontend's
// page with the truth. kvwatch cannot tell a frontend from its page, so
// without a configured role it is role unified, whose KV is the KV router's
// prediction (docs/engines.md): a rank per worker and DP rank, used = the
// router's decode blocks × the block size, capacity = the model card's
// blocks × the block size (vLLM's null block included: the card's count).
// Running is inflight − queued, the queue the HTTP queue.
func checkDynamoFrontend(t *testing.T, name string, s *kv.Server, truth sim.Truth) {
	t.Helper()
	d := truth.DynamoFrontend
	if s.Role != kv.RoleUnified || len(s.Ranks) != len(d.Workers) {
		t.Errorf("%s read as role %s with %d ranks, want unified (no role configured) and %d", name, s.Role, len(s.Ranks), len(d.Workers))
	}
	var blocks int64
	for _, w := range d.Workers {
		blocks += w.DecodeBlocks
	}
	check(t, name+" capacity", s.Capacity, float64(int64(len(d.Workers))*d.TotalBlocks*d.BlockSize))
	check(t, name+" used", s.Used, float64(blocks*d.BlockSize))
	check(t, name+" running", s.Running, float64(d.Inflight-d.Queued))
	check(t, name+" queued", s.Queued.Waiting, float64(d.Queued))
	check(t, name+" context length", s.ContextLength, float64(d.ContextLength))
}

// checkDynamoWorker compares what kvwatch reads on a Dynamo worker's own
// page with the truth. The page has no block size (that is the frontend's
// model card), so capacity and used in tokens are unknown and the usage
// ratio is the reading: per dp_rank since Dynamo PR #5704, before it the
// kvstats gauges of DP rank 0 alone (the worker's own data_parallel_rank).
// A rank that has not published (total blocks 0) has no ratio. The
// handler's requests are the engine's running and waiting ones, which
// Dynamo does not split: kvwatch's running, and no queue.
func checkDynamoWorker(t *testing.T, name string, s *kv.Server, truth sim.Truth) {
	t.Helper()
	ranks, gen := truth.Ranks, "current"
	if truth.Version == sim.VersionDynamoBefore {
		ranks, gen = ranks[:1], "kvstats"
	}
	if s.Generation != gen {
		t.Errorf("%s read as generation %q, want %q", name, s.Generation, gen)
	}
	var sum float64
	n := 0
	for i, r := range ranks {
		if truth.Dynamo.Published[i] {
			sum += float64(r.UsedTokens) / float64(r.CapacityTokens)
			n++
		}
	}
	ratio := -1.0
	if n > 0 {
		ratio = sum / float64(n) // no capacities: the mean of the ranks' ratios
	}
	checkWithin(t, name+" usage ratio", s.UsageRatio, ratio, 1e-9)
	check(t, name+" capacity", s.Capacity, -1)
	check(t, name+" used", s.Used, -1)
	check(t, name+" running", s.Running, float64(truth.Dynamo.Inflight))
	check(t, name+" queued", s.Queued.Waiting, -1)
}

// TestDynamoUpgradeIsDrift: a worker upgraded in place across Dynamo PR
// #5704 (POST /-/sim/version) changes the names its page declares, so
// kvwatch's drift sentinel records a changed fingerprint and the server
// carries a dialect_changed warning; a page read again unchanged records
// nothing. The frontend has one dialect and refuses a version.
func TestDynamoUpgradeIsDrift(t *testing.T) {
	c := startCluster(t, "dynamo")
	c.Advance(time.Minute)
	urls := map[string]string{}
	var worker sim.Endpoint
	for _, ep := range c.Endpoints() {
		urls[ep.Name] = ep.URL
		if ep.Name == "worker-0" {
			worker = ep
		}
	}
	post := func(name, version string) int {
		t.Helper()
		resp, err := http.Post(urls[name]+"/-/sim/version?version="+version, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("frontend", sim.VersionDynamoBefore); code != http.StatusBadRequest {
		t.Errorf("frontend version: HTTP %d, want 400", code)
	}
	if code := post("worker-0", sim.VersionDynamoBefore); code != http.StatusOK {
		t.Fatalf("worker version: HTTP %d", code)
	}
	tg, err := scrape.NewTarget(&config.Target{Name: worker.Name, URL: worker.URL + worker.MetricsPath})
	if err != nil {
		t.Fatal(err)
	}
	s := scrape.New(engine.NewRegistry(), 64<<20)
	read := func() scrape.Result {
		t.Helper()
		res := s.Scrape(context.Background(), tg)
		if !res.OK() {
			t.Fatal(res.Err)
		}
		return res
	}
	old := read()
	if old.Server.Generation != "kvstats" || old.Changed != nil {
		t.Fatalf("first page: generation %q, changed %v; want kvstats and nothing to compare with", old.Server.Generation, old.Changed)
	}
	if code := post("worker-0", sim.VersionCurrent); code != http.StatusOK {
		t.Fatalf("worker version: HTTP %d", code)
	}
	now := read()
	if now.Server.Generation != "current" || !slices.Contains(now.Changed, signal.ChangeFingerprint) || !now.Server.Warned(kv.WarnDialect) {
		t.Errorf("after the upgrade: generation %q, changed %v, warnings %v; want current, a changed fingerprint and a %s warning",
			now.Server.Generation, now.Changed, now.Server.Warnings, kv.WarnDialect)
	}
	var warned string
	for _, w := range now.Server.Warnings {
		if w.Reason == kv.WarnDialect {
			warned = w.Detail
		}
	}
	if !strings.Contains(warned, "ai-dynamo/dynamo#5704") {
		t.Errorf("the warning %q does not name the change of meaning (ai-dynamo/dynamo#5704)", warned)
	}
	if again := read(); again.Changed != nil {
		t.Errorf("the same page again: changed %v, want nothing", again.Changed)
	}
}
