package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

func unified(capacity, used, running, waiting, preempt float64) *kv.Server {
	s := &kv.Server{Engine: "vllm", Role: kv.RoleDecode, Signals: kv.Signals{Capacity: kv.Of(capacity), Used: kv.Of(used),
		Running: kv.Of(running), Queued: kv.Queues{Waiting: kv.Of(waiting)}, Counters: kv.Counters{Preemptions: kv.Of(preempt)}}}
	s.Rollup()
	return s
}

func TestTrackerPlanning(t *testing.T) {
	tr := NewTracker(nil)
	tr.SetPlanning(PlanOptions{Warning: 0.9})
	a, b, c := target("a"), target("b"), target("c")
	a.MaxRunning = 64 // vLLM --max-num-seqs, from the config
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	scrapeAt := func(at time.Time, cPreempt float64) Report {
		return tr.Update(at, []scrape.Result{
			{Target: a, Time: at, Server: unified(100000, 40000, 64, 3, 0)},
			{Target: b, Time: at, Server: unified(100000, 95000, 20, 0, 0)},
			{Target: c, Time: at, Server: unified(100000, 10000, 5, 0, cPreempt)},
		})
	}
	r1 := scrapeAt(t0, 2)
	for i, want := range []kv.Factor{kv.FactorBatch, kv.FactorKV, kv.FactorNone} {
		if p := r1.Servers[i].Plan; p == nil || p.Limit != want {
			t.Errorf("%s: plan %+v, want limit %s", r1.Servers[i].Name, p, want)
		}
	}
	if p := r1.Servers[0].Plan; p.MaxRunningSource != kv.SourceConfig || p.MaxRunning.V != 64 {
		t.Errorf("a: max running %+v from %q, want 64 from the config", p.MaxRunning, p.MaxRunningSource)
	}
	// Load 40,000 + 95,000 + 10,000 = 145,000 onto 200,000 (a, the first
	// of three equal servers, drained): 0.725 < 0.9, margin 180,000 −
	// 145,000 = 35,000.
	if len(r1.Planning) != 1 {
		t.Fatalf("planning = %+v, want one pool", r1.Planning)
	}
	p := r1.Planning[0]
	if !p.N1Safe || p.Drain.Server != "a" || p.Drain.MarginTokens.V != 35000 || p.Drain.After.V != 0.725 {
		t.Errorf("drain = %+v, want a safe by 35,000 tokens at 0.725", p.Drain)
	}
	if len(p.Limiters) != 2 || p.Limiters[0] != (kv.Limiter{Server: "a", Factor: kv.FactorBatch}) ||
		p.Limiters[1] != (kv.Limiter{Server: "b", Factor: kv.FactorKV}) {
		t.Errorf("limiters = %+v, want a (batch) and b (kv)", p.Limiters)
	}
	// c retracts 5 requests in 10 s: 0.5/s, KV limits it.
	r2 := scrapeAt(t0.Add(10*time.Second), 7)
	if p := r2.Servers[2].Plan; p.Limit != kv.FactorKV || !strings.Contains(p.Why, "0.5 requests/s") {
		t.Errorf("c after retractions: %+v, want kv", p)
	}
	body, err := json.Marshal(r2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"limiting_factor":"batch"`, `"max_running_source":"config"`, `"drain_largest":{"server":"a"`,
		`"workload_headroom_requests":{"value":`, `"n1_safe":true`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

func TestTrackerFinishedSizesOverTheWindow(t *testing.T) {
	tr := NewTracker(nil)
	a := target("a")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(when time.Time, n, p, g float64) *kv.ServerPlan {
		s := unified(100000, 40000, 10, 0, 0)
		s.Finished = kv.RequestSizes{Requests: kv.Of(n), PromptTokens: kv.Of(p), GenerationTokens: kv.Of(g)}
		return tr.Update(when, []scrape.Result{{Target: a, Time: when, Server: s}}).Servers[0].Plan
	}
	// First scrape: since start, (90,000 + 10,000) / 50 = 2,000; 60,000
	// free: 30 more.
	if p := at(t0, 50, 90000, 10000); p.FinishedRequestTokens.V != 2000 || p.FinishedHeadroom.V != 30 {
		t.Errorf("first: %+v tokens, %+v fit; want 2,000 and 30", p.FinishedRequestTokens, p.FinishedHeadroom)
	}
	// 10 more finished with 40,000 + 8,000 tokens: 4,800 each over the
	// window; 60,000 / 4,800 = 12.5: 12.
	if p := at(t0.Add(10*time.Second), 60, 130000, 18000); p.FinishedRequestTokens.V != 4800 || p.FinishedHeadroom.V != 12 {
		t.Errorf("second: %+v tokens, %+v fit; want 4,800 and 12", p.FinishedRequestTokens, p.FinishedHeadroom)
	}
}
