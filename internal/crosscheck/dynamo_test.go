package crosscheck

import (
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestDynamoUnpublished: a Dynamo worker whose DP ranks have not recorded
// stats yet (at start, and again right after a restart) shows init_publish's
// total_blocks 0 and usage 0.0; kvwatch reads its usage as unknown, not
// as an empty cache, in both dialects, and as the truth once the ranks
// have published.
func TestDynamoUnpublished(t *testing.T) {
	c := startCluster(t, "dynamo")
	ep := c.Endpoints()[0]
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
