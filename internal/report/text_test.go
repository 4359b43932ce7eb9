package report

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// TestText: each row's and pool's totals and text, scrape after scrape:
// the hit ratio since the engine started on the first scrape, over the
// window on the second, since the start again when the window saw no
// prefix-cache traffic; a down server of the pool makes its sums partial.
func TestText(t *testing.T) {
	tr := NewTracker([]int{8192, 4096})
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	dec := target("decode")
	down := target("decode-down")
	down.Role = kv.RoleDecode
	queued := func(s *kv.Server) *kv.Server {
		s.Running, s.Queued.Waiting, s.Queued.Prealloc = kv.Of(3), kv.Of(3), kv.Of(2)
		return s
	}
	// 2,581,504 − 12,034 = 2,569,470 free: 627 of 4,096 tokens; usage
	// 12,034 / 2,581,504 = 0.466 %.
	row := func(hit, window string) *ServerText {
		return &ServerText{UsageRatio: "0.5%", Used: "12.0k", Capacity: "2.58M", Headroom: "627×4k", Running: "3",
			QueuedTotal: "5", DemandRatio: "--", PrefixHitRatio: hit, PrefixHitWindow: window, State: "ok", Engine: "sglang"}
	}
	steps := []struct {
		at      time.Duration
		server  *kv.Server
		want    *ServerText
		hitOver float64 // Server.PrefixHit's window, 0 since the start
	}{
		// 100 of 400 queried tokens hit since the start.
		{0, queued(decode(1000, 100, 400, 2)), row("25.0%†", "since engine start"), 0},
		// (400 − 100) / (1,000 − 400) in 5 s.
		{5 * time.Second, queued(decode(3000, 400, 1000, 7)), row("50.0%", "over the last 5s"), 5},
		// Nothing queried in the window: 400 / 1,000 since the start.
		{10 * time.Second, queued(decode(3000, 400, 1000, 7)), row("40.0%†", "since engine start"), 0},
	}
	for _, st := range steps {
		at := t0.Add(st.at)
		r := tr.Update(at, []scrape.Result{
			{Target: dec, Time: at, Server: st.server},
			{Target: down, Time: at, Err: errors.New("connection refused"), Reason: "refused"},
		})
		got := r.Servers[0]
		if diff := cmp.Diff(st.want, got.Text); diff != "" {
			t.Errorf("at %s: text (-want +got):\n%s", st.at, diff)
		}
		if h := got.PrefixHit(); h.WindowSeconds != st.hitOver || h.SinceStart != (st.hitOver == 0) {
			t.Errorf("at %s: PrefixHit = %+v, want a window of %gs", st.at, h, st.hitOver)
		}
		if q := got.QueuedTotal; q.V != 5 || q.Prov != kv.Direct {
			t.Errorf("at %s: queued_total = %+v, want 5 (direct)", st.at, q)
		}
		if f := r.Servers[1]; f.Text != nil || f.QueuedTotal.OK() {
			t.Errorf("at %s: the failed row has text %+v, queued_total %+v; want none and unavailable", st.at, f.Text, f.QueuedTotal)
		}
		// The down server's sums are missing: a lower bound, marked.
		want := &PoolText{UsageRatio: "~0.5%?", Used: "~12.0k?", Capacity: "~2.58M?", Headroom: "~627?×4k",
			Running: "~3?", Queued: "~5?", DemandRatio: "--",
			State: "ok", StateEvidence: "decode: 0.466% of the KV cache used by 3 running requests; 5 wait"}
		if len(r.Pools) != 1 {
			t.Fatalf("pools = %+v, want decode", r.Pools)
		}
		if diff := cmp.Diff(want, r.Pools[0].Text); diff != "" {
			t.Errorf("at %s: pool text (-want +got):\n%s", st.at, diff)
		}
	}
}

// TestTextJSON: the text is added to the schema, the existing fields
// stay where they were (a pool's are still flat, not under "Pool").
func TestTextJSON(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	r := NewTracker([]int{8192}).Update(t0, []scrape.Result{{Target: target("decode"), Time: t0, Server: decode(0, 0, 0, 0)}})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"pools":[{"role":"decode","name":"decode","servers":1,"counted":1,"capacity_tokens":{"value":2581504,"provenance":"direct"}`,
		`"text":{"usage_ratio":"0.5%","used_tokens":"12.0k","capacity_tokens":"2.58M","headroom":"313×8k","running":"--","queued":"--","demand_ratio":"--","state":"ok","state_evidence":"decode: 0.466% of the KV cache used"}`,
		`"queued_total":{"value":null,"provenance":"unavailable"}`,
		// No prefix-cache traffic: no ratio, no window.
		`"prefix_hit_ratio":"--","state":"ok","engine":"sglang"}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestFirstHeadroom(t *testing.T) {
	for _, c := range []struct {
		name string
		hs   []Headroom
		want int // request tokens; 0 for none
	}{
		{"none", nil, 0},
		{"smallest configured", []Headroom{{Tokens: 4096}, {Tokens: 8192}, {Tokens: 131072, Context: true}}, 4096},
		{"context below the sizes", []Headroom{{Tokens: 2048, Context: true}, {Tokens: 8192}}, 8192},
		{"the context only", []Headroom{{Tokens: 8192, Context: true}}, 8192},
	} {
		s := Server{Headroom: c.hs}
		h, ok := s.FirstHeadroom()
		if ok != (c.want != 0) || h.Tokens != c.want {
			t.Errorf("%s: FirstHeadroom = %+v, %v; want %d", c.name, h, ok, c.want)
		}
	}
	p := Pool{Pool: kv.Pool{Headroom: []kv.PoolHeadroom{{Tokens: 8192}, {Tokens: 4096}}}}
	if h, ok := p.FirstHeadroom(); !ok || h.Tokens != 4096 {
		t.Errorf("pool FirstHeadroom = %+v, %v; want the smallest size, 4,096", h, ok)
	}
}
