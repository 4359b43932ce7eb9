package report

import (
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

func target(name string) *scrape.Target {
	u, _ := url.Parse("http://" + name + "/metrics")
	return &scrape.Target{Name: name, URL: u}
}

// decode is an SGLang decode server as the adapter reports it: 2,581,504
// tokens, 12,034 used, context length 524,288.
func decode(prompt, hit, query, preempt float64) *kv.Server {
	s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, ContextLength: kv.Of(524288),
		Ranks: []kv.Rank{{RankID: kv.RankID{TP: "0"}, Signals: kv.Signals{
			Capacity: kv.Of(2581504), Used: kv.Of(12034),
			Counters: kv.Counters{PromptTokens: kv.Of(prompt), PrefixHitTokens: kv.Of(hit),
				PrefixQueryTokens: kv.Of(query), Preemptions: kv.Of(preempt)}}}}}
	s.Rollup()
	return s
}

func TestTrackerRatesAndHeadroom(t *testing.T) {
	tr := NewTracker([]int{8192, 8192, 4096})
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	dec, down := target("decode"), target("down")
	r1 := tr.Update(t0, []scrape.Result{
		{Target: dec, Time: t0, Server: decode(1000, 100, 400, 2)},
		{Target: down, Time: t0, Err: errors.New("connection refused"), Reason: "refused"},
	})
	if r1.Servers[0].Rates != nil {
		t.Errorf("first report has no rates")
	}
	// Sizes sorted and de-duplicated, the context length added and marked.
	hs := r1.Servers[0].Headroom
	want := []struct {
		tokens int
		ctx    bool
		fit    float64
	}{{4096, false, 627}, {8192, false, 313}, {524288, true, 4}}
	if len(hs) != len(want) {
		t.Fatalf("headroom = %+v", hs)
	}
	for i, w := range want {
		if hs[i].Tokens != w.tokens || hs[i].Context != w.ctx || hs[i].Requests.V != w.fit {
			t.Errorf("headroom[%d] = %+v, want %+v", i, hs[i], w)
		}
	}
	if r1.Servers[1].OK || r1.Servers[1].Error != "connection refused" || r1.Servers[1].Server != nil || r1.Servers[1].Role != "" {
		t.Errorf("failed row = %+v", r1.Servers[1])
	}
	// The failed target has no role: it is in no pool, but counted.
	if r1.Fleet.Servers != 2 || r1.Fleet.Failed != 1 || len(r1.Pools) != 1 || r1.Pools[0].Name != "decode" ||
		r1.Pools[0].Used.V != 12034 || r1.Fleet.Limit != "decode" {
		t.Errorf("fleet = %+v, pools = %+v", r1.Fleet, r1.Pools)
	}
	// The pool's headroom for each configured size: 313 of 8k, 627 of 4k.
	if ph := r1.Pools[0].Headroom; len(ph) != 3 || ph[0].Requests.V != 313 || ph[2].Tokens != 4096 || ph[2].Requests.V != 627 {
		t.Errorf("pool headroom = %+v", ph)
	}

	t1 := t0.Add(10 * time.Second)
	r2 := tr.Update(t1, []scrape.Result{{Target: dec, Time: t1, Server: decode(3000, 400, 1000, 7)}})
	r := r2.Servers[0].Rates
	// 300 of 600 more queried tokens hit; 5 retractions and 2,000 prompt tokens in 10 s.
	if r == nil || r.PrefixHitRatio.V != 0.5 || r.PreemptionsPerSec.V != 0.5 || r.PromptTokensPS.V != 200 || r.WindowSeconds != 10 || r.Reset {
		t.Fatalf("rates = %+v", r)
	}
	t2 := t1.Add(5 * time.Second)
	r3 := tr.Update(t2, []scrape.Result{{Target: dec, Time: t2, Server: decode(50, 0, 0, 0)}})
	r = r3.Servers[0].Rates
	if r == nil || !r.Reset || r.PromptTokensPS.OK() || r.PrefixHitRatio.OK() {
		t.Errorf("after a restart: %+v; want a reset, no token rate nor hit ratio over it", r)
	}
	// The window after the restart has rates again: 50 to 450 prompt tokens in 5 s.
	t3 := t2.Add(5 * time.Second)
	r = tr.Update(t3, []scrape.Result{{Target: dec, Time: t3, Server: decode(450, 0, 0, 0)}}).Servers[0].Rates
	if r == nil || r.Reset || r.PromptTokensPS.V != 80 {
		t.Errorf("after the restart's window: %+v; want 80 prompt tokens/s", r)
	}
}

func TestRouterHasNoHeadroom(t *testing.T) {
	s := &kv.Server{Role: kv.RoleRouter, Router: &kv.Router{}}
	if hs := Headrooms(s, []int{8192}); hs != nil {
		t.Errorf("router headroom = %+v", hs)
	}
}

// TestHeadroomsNeverOverflow: a capacity and context length of 1e30 are
// implausible; no size comes from them and no count overflows.
func TestHeadroomsNeverOverflow(t *testing.T) {
	s := &kv.Server{Role: kv.RoleUnified, ContextLength: kv.Of(1e30),
		Signals: kv.Signals{Capacity: kv.Of(1e30), Used: kv.Of(0)}}
	s.Check()
	hs := Headrooms(s, []int{8192})
	if len(hs) != 1 || hs[0].Tokens != 8192 || hs[0].Requests.OK() {
		t.Errorf("headroom = %+v, want only 8192 and unknown", hs)
	}
	if !s.Warned(kv.WarnTooLarge) {
		t.Errorf("no too_large warning: %+v", s.Warnings)
	}
	// Negative context length: no size either.
	s = &kv.Server{Role: kv.RoleUnified, ContextLength: kv.Of(-5), Signals: kv.Signals{Capacity: kv.Of(100), Used: kv.Of(0)}}
	s.Check()
	if hs := Headrooms(s, []int{10}); len(hs) != 1 || hs[0].Requests.V != 10 {
		t.Errorf("headroom = %+v, want 10 of 10 tokens", hs)
	}
}

// TestTrackerRowIsUpdatesRow: Row gives, scrape after scrape, the row that
// Update gives for the same result (rates across a restart, a failure in
// between, the plan) once summarized (its totals and text), so serve may
// keep rows without summarizing each.
func TestTrackerRowIsUpdatesRow(t *testing.T) {
	byRow, byUpdate := NewTracker([]int{4096}), NewTracker([]int{4096})
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	dec := target("decode")
	results := []scrape.Result{
		{Target: dec, Time: t0, Server: decode(1000, 100, 400, 2)},
		{Target: dec, Time: t0.Add(5 * time.Second), Server: decode(3000, 400, 1000, 7)},
		{Target: dec, Time: t0.Add(10 * time.Second), Err: errors.New("connection refused"), Reason: "refused"},
		{Target: dec, Time: t0.Add(15 * time.Second), Server: decode(50, 0, 0, 0)},
		{Target: dec, Time: t0.Add(20 * time.Second), Server: decode(450, 10, 40, 1)},
	}
	for i := range results {
		rep := Report{Servers: []Server{byRow.Row(&results[i])}}
		rep.Summarize([]int{4096})
		got := rep.Servers[0]
		want := byUpdate.Update(results[i].Time, results[i:i+1]).Servers[0]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("scrape %d: Row = %+v, Update's row = %+v", i, got, want)
		}
		if i == 1 && (got.Rates == nil || got.Rates.PromptTokensPS.V != 400) {
			t.Errorf("scrape %d: rates = %+v, want 2,000 prompt tokens in 5 s", i, got.Rates)
		}
	}
}

// TestHeadroomsSizes: sizes sorted, one entry each, zero and negative
// sizes dropped, a configured size equal to the context length marked as
// the context's, in one allocation.
func TestHeadroomsSizes(t *testing.T) {
	s := decode(0, 0, 0, 0)
	hs := Headrooms(s, []int{524288, 0, 4096, -1, 4096})
	if len(hs) != 2 || hs[0].Tokens != 4096 || hs[0].Context || hs[1].Tokens != 524288 || !hs[1].Context ||
		hs[0].Requests.V != 627 || hs[1].Requests.V != 4 {
		t.Errorf("headroom = %+v, want 4,096 (627 requests) and the context's 524,288 (4)", hs)
	}
	if n := testing.AllocsPerRun(100, func() { Headrooms(s, []int{8192, 4096}) }); n != 1 {
		t.Errorf("Headrooms allocates %.0f times, want 1", n)
	}
}

// A target read as another engine than its previous page (a proxy in
// front of two engines, an engine swapped under one address) gets no rates
// from the two pages: their counters are unrelated, and their difference
// would show as a plausible rate (issue 31: 497k tok/s).
func TestNoRatesAcrossAnEngineChange(t *testing.T) {
	tr := NewTracker([]int{8192})
	t0 := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	dec := target("decode")
	other := func(prompt float64) *kv.Server {
		s := decode(prompt, 0, 0, 0)
		s.Engine = "vllm"
		return s
	}
	steps := []struct {
		s         *kv.Server
		wantRates bool
	}{
		{decode(1000, 100, 400, 2), false},
		{other(5_000_000), false}, // another engine: no rates
		{other(5_002_000), true},  // its second page: rates again
		{decode(9000, 100, 400, 2), false},
	}
	for i, st := range steps {
		ts := t0.Add(time.Duration(i) * 10 * time.Second)
		r := tr.Update(ts, []scrape.Result{{Target: dec, Time: ts, Server: st.s}})
		if got := r.Servers[0].Rates != nil; got != st.wantRates {
			t.Errorf("page %d (%s): rates %+v, want rates %v", i, st.s.Engine, r.Servers[0].Rates, st.wantRates)
		}
	}
}
