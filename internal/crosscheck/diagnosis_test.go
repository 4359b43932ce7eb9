package crosscheck

import (
	"context"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// watcher reads a cluster as status --watch does: one pipeline (the
// default config's thresholds), one tracker, every endpoint each round.
type watcher struct {
	c  *sim.Cluster
	p  *pipeline.Pipeline
	tr *report.Tracker
}

func newWatcher(t *testing.T, c *sim.Cluster) *watcher {
	t.Helper()
	cfg := config.Default()
	for _, ep := range c.Endpoints() {
		cfg.Targets = append(cfg.Targets, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath, KVUnified: ep.KVUnified})
	}
	p, err := pipeline.Load(config.Sources{Config: cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &watcher{c: c, p: p, tr: p.NewTracker()}
}

// round advances the cluster by step and reads every server once, with
// the simulated time as the scrape time (rates over simulated seconds).
func (w *watcher) round(t *testing.T, step time.Duration) map[string]*kv.ServerPlan {
	t.Helper()
	w.c.Advance(step)
	res := w.p.Scraper().ScrapeAll(context.Background(), w.p.Targets, 8)
	now := time.Unix(0, 0).Add(w.c.Now())
	for i := range res {
		res[i].Time = now
	}
	r := w.tr.Update(now, res)
	out := map[string]*kv.ServerPlan{}
	for _, s := range r.Servers {
		if !s.OK {
			t.Fatalf("%s at %s: %s", s.Name, w.c.Now(), s.Error)
		}
		out[s.Name] = s.Plan
	}
	return out
}

// The overload: the default PD cluster under router load ×8 is
// full and busy, never a leak; once its decode server leaks, the leak is
// named while requests queue (not "idle", not only "full").
func TestDiagnosisNamesALeakUnderLoad(t *testing.T) {
	c := startCluster(t, "pd-sglang")
	w := newWatcher(t, c)
	w.round(t, time.Minute)
	if err := c.SetLoad("router", 8); err != nil {
		t.Fatal(err)
	}
	busy := map[kv.State]int{}
	for range 12 { // 4 minutes of overload, a read every 20 s
		for name, p := range w.round(t, 20*time.Second) {
			if p == nil {
				continue
			}
			busy[p.State]++
			if p.State == kv.StateLeak || p.State == kv.StateIdle {
				t.Errorf("%s at %s under healthy overload: %s (%s)", name, c.Now(), p.State, p.Evidence)
			}
		}
	}
	t.Logf("states under overload: %v", busy)
	if err := c.SetFault("decode", sim.Fault{Kind: sim.FaultLeak}); err != nil {
		t.Fatal(err)
	}
	var last *kv.ServerPlan
	for range 15 { // 5 minutes of the leak
		last = w.round(t, 20*time.Second)["decode"]
	}
	truth := c.Truth("decode")
	if last == nil || last.State != kv.StateLeak {
		t.Fatalf("decode after 5 minutes of a leak under load (truth: %d used, %d running): %+v", truth.UsedTokens, truth.Running, last)
	}
	t.Logf("decode: %s: %s", last.State, last.Evidence)
}

// A long calm run and a heavy healthy load on every engine of the mixed
// scenario: never a leak.
func TestDiagnosisNoFalseLeaks(t *testing.T) {
	for _, c := range []struct {
		scenario string
		load     float64
		rounds   int
		step     time.Duration
	}{
		{"pd-sglang", 1, 120, 15 * time.Second}, // 30 calm minutes
		{"mixed", 1, 60, 15 * time.Second},
		{"mixed", 6, 60, 15 * time.Second}, // heavy, healthy
	} {
		cl := startCluster(t, c.scenario)
		for _, ep := range cl.Endpoints() {
			if err := cl.SetLoad(ep.Name, c.load); err != nil {
				t.Fatal(err)
			}
		}
		w := newWatcher(t, cl)
		states := map[kv.State]int{}
		for range c.rounds {
			for name, p := range w.round(t, c.step) {
				if p == nil {
					continue
				}
				states[p.State]++
				if p.State == kv.StateLeak || p.State == kv.StateStuck {
					t.Errorf("%s ×%g: %s at %s: %s (%s)", c.scenario, c.load, name, cl.Now(), p.State, p.Evidence)
				}
			}
		}
		t.Logf("%s ×%g: %v", c.scenario, c.load, states)
	}
}
