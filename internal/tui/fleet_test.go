package tui

import (
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// t0 is the time of the first test scrape; the fleet is scraped every 2s.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

func stepTime(step int) time.Time { return t0.Add(time.Duration(step) * 2 * time.Second) }

func of(v float64) kv.Value { return kv.Of(v) }

// sglangRank is one SGLang scheduler (DP × TP) of the PD decode server.
func sglangRank(dp, tp string, capacity, used, running, prealloc, transfer, hit, query, prompt, gen float64) kv.Rank {
	return kv.Rank{RankID: kv.RankID{DP: dp, TP: tp}, Signals: kv.Signals{
		Capacity: of(capacity), Used: of(used), Evictable: of(20480), Running: of(running),
		Queued: kv.Queues{Waiting: of(0), Prealloc: of(prealloc), Transfer: of(transfer)},
		Counters: kv.Counters{PrefixHitTokens: of(hit), PrefixQueryTokens: of(query),
			Preemptions: of(0), PromptTokens: of(prompt), GenerationTokens: of(gen)},
	}}
}

// fleetAt is a PD SGLang deployment plus a vLLM, a TGI and a broken
// llama.cpp server, scraped at step (values by hand, as the engines report
// them; counters grow linearly per step).
func fleetAt(step int) []scrape.Result {
	st := float64(step)
	at := stepTime(step)
	var out []scrape.Result
	add := func(name, port string, role kv.Role, s *kv.Server) {
		u, _ := url.Parse("http://10.0.0." + port + "/metrics")
		out = append(out, scrape.Result{Target: &scrape.Target{Name: name, URL: u, Role: role},
			Time: at, Duration: 40 * time.Millisecond, BodyBytes: 18000, Server: s})
	}

	// decode-0: DP 2 × TP 2, 645,376 tokens per DP rank; TP ranks repeat.
	d0 := &kv.Server{Engine: "sglang", Generation: "current", Model: "deepseek-ai/DeepSeek-V3", Role: kv.RoleDecode,
		ContextLength: of(131072)}
	for _, tp := range []string{"0", "1"} {
		d0.Ranks = append(d0.Ranks,
			sglangRank("0", tp, 645376, 400000+6000*st, 24, 2, 1, 1500*st, 5000*st, 10000*st, 1500*st),
			sglangRank("1", tp, 645376, 390000+4000*st, 23, 1, 1, 1500*st, 5000*st, 10000*st, 1500*st))
	}
	d0.Rollup()
	add("decode-0", "11:30002", "", d0)

	// decode-1: one scheduler, nearly full.
	d1 := &kv.Server{Engine: "sglang", Generation: "current", Model: "deepseek-ai/DeepSeek-V3", Role: kv.RoleDecode,
		ContextLength: of(524288), Signals: kv.Signals{Capacity: of(2581504), Used: of(2516966), Running: of(212),
			Queued: kv.Queues{Waiting: of(31), Prealloc: of(0), Transfer: of(0)},
			Counters: kv.Counters{PrefixHitTokens: of(0), PrefixQueryTokens: of(0), Preemptions: of(3 * st),
				PromptTokens: of(0), GenerationTokens: of(9000 * st)}}}
	d1.Rollup()
	add("decode-1", "12:30002", "", d1)

	// prefill-0: PD prefill, bootstrap and inflight queues.
	p0 := &kv.Server{Engine: "sglang", Generation: "current", Model: "deepseek-ai/DeepSeek-V3", Role: kv.RolePrefill,
		ContextLength: of(131072), Signals: kv.Signals{Capacity: of(1048576), Used: of(12800), Running: of(4),
			Queued: kv.Queues{Waiting: of(0), Bootstrap: of(2), Inflight: of(1)},
			Counters: kv.Counters{PrefixHitTokens: of(60000 * st), PrefixQueryTokens: of(80000 * st),
				Preemptions: of(0), PromptTokens: of(80000 * st), GenerationTokens: of(4 * st)}}}
	p0.Rollup()
	add("prefill-0", "13:30001", "", p0)

	// router: workers only.
	add("router", "10:30000", "", &kv.Server{Engine: "sglang-router", Role: kv.RoleRouter,
		Signals: kv.Signals{Running: of(42)}, Router: &kv.Router{WorkersHealthy: of(3), WorkersTotal: of(4)}})

	// vllm-0: capacity from cache_config_info (blocks × block size), usage
	// ratio read directly, used derived; preempting.
	ratio := 0.90 + 0.01*st
	v0 := &kv.Server{Engine: "vllm", Generation: "v1", Model: "meta-llama/Llama-3.1-8B-Instruct", Role: kv.RoleUnified,
		ContextLength: of(32768), Signals: kv.Signals{Capacity: kv.DerivedOf(409600), UsageRatio: of(ratio),
			Used: kv.DerivedOf(ratio * 409600), Running: of(61), Queued: kv.Queues{Waiting: of(7)},
			Counters: kv.Counters{PrefixHitTokens: of(250 * st), PrefixQueryTokens: of(2000 * st),
				Preemptions: of(4 * st), PromptTokens: of(8000 * st), GenerationTokens: of(2400 * st)}}}
	add("vllm-0", "21:8000", "", v0)

	// tgi-0: a reservation, not written KV; no prompt-token counter.
	add("tgi-0", "31:3000", "", &kv.Server{Engine: "tgi", Generation: "current", Role: kv.RoleUnified,
		Signals: kv.Signals{Capacity: of(80000), Used: kv.ReservedOf(20480), UsageRatio: kv.ReservedOf(0.256),
			ReservedRatio: kv.ReservedOf(0.256), Running: of(3), Queued: kv.Queues{Waiting: of(0)},
			Counters: kv.Counters{GenerationTokens: of(300 * st)}}})

	// llama-0: down.
	u, _ := url.Parse("http://10.0.0.41:8080/metrics")
	out = append(out, scrape.Result{Target: &scrape.Target{Name: "llama-0", URL: u, Role: kv.RoleUnified},
		Time: at, Duration: time.Millisecond, Reason: signal.ReasonRefused,
		Err: errors.New("scrape http://10.0.0.41:8080/metrics: connection refused; is the server running and listening there?")})
	return out
}

// reports are the reports of steps 0..n-1, through report.Tracker.
func reports(n int) []report.Report {
	tr := report.NewTracker([]int{8192})
	out := make([]report.Report, n)
	for i := range out {
		out[i] = tr.Update(stepTime(i), fleetAt(i))
	}
	return out
}

// bigFleet is n unified SGLang servers with usage rising by server.
func bigFleet(n int) report.Report {
	var res []scrape.Result
	for i := range n {
		u, _ := url.Parse(fmt.Sprintf("http://10.0.1.%d:30000/metrics", i))
		s := &kv.Server{Engine: "sglang", Role: kv.RoleUnified, Signals: kv.Signals{
			Capacity: of(1000000), Used: of(float64(i) * 1000000 / float64(n)), Running: of(float64(i)), Queued: kv.Queues{Waiting: of(0)}}}
		s.Rollup()
		res = append(res, scrape.Result{Target: &scrape.Target{Name: fmt.Sprintf("unified-%02d", i), URL: u},
			Time: t0, Server: s})
	}
	return report.NewTracker([]int{8192}).Update(t0, res)
}

func TestFleetFixture(t *testing.T) {
	// Hand-worked values of step 2, the report the goldens show last.
	r := reports(3)[2]
	byName := map[string]report.Server{}
	for _, s := range r.Servers {
		byName[s.Name] = s
	}
	d0 := byName["decode-0"]
	// used 412,000 + 398,000 of 2 × 645,376.
	if got, want := d0.Server.Used.V, 810000.0; got != want {
		t.Errorf("decode-0 used = %v, want %v", got, want)
	}
	// Headroom per DP rank: floor(233,376/8,192) + floor(247,376/8,192) = 28 + 30.
	if got := headroomCell(d0, true); got != "58×8k 2×128k" {
		t.Errorf("headroomCell(decode-0) = %q, want %q", got, "58×8k 2×128k")
	}
	// 3,000 hit of 10,000 queried tokens in 2s; (20,000 + 3,000) tokens / 2s.
	if got := textfmt.Percent(d0.Rates.PrefixHitRatio); got != "30.0%" {
		t.Errorf("decode-0 hit = %q, want 30.0%%", got)
	}
	if got := textfmt.Rate(tokensPerSec(d0.Rates)); got != "11.5k" {
		t.Errorf("decode-0 tok/s = %q, want 11.5k", got)
	}
	// 4 preemptions per 2s.
	if got := textfmt.Rate(byName["vllm-0"].Rates.PreemptionsPerSec); got != "2.00" {
		t.Errorf("vllm-0 preemptions/s = %q, want 2.00", got)
	}
	// TGI has no prompt-token counter: tokens/s is unknown, not 300/2.
	if got := textfmt.Rate(tokensPerSec(byName["tgi-0"].Rates)); got != textfmt.NA {
		t.Errorf("tgi-0 tok/s = %q, want %q", got, textfmt.NA)
	}
	// Pools, never one blend: decode (810,000 + 2,516,966) / (1,290,752 +
	// 2,581,504) = 85.9%, the limit; unified (376,832 + 20,480) / (409,600 +
	// 80,000) = 81.2%, partial since llama-0 is down; prefill 12,800 / 1,048,576.
	pools := map[string]string{}
	for _, p := range r.Pools {
		pools[p.Name] = textfmt.Percent(p.UsageRatio)
	}
	want := map[string]string{"decode": "85.9%", "unified": "~81.2%?", "prefill": "1.2%"}
	if fmt.Sprint(pools) != fmt.Sprint(want) {
		t.Errorf("pool usage = %v, want %v", pools, want)
	}
	if r.Fleet.Limit != "decode" {
		t.Errorf("limit = %q, want decode", r.Fleet.Limit)
	}
	// decode queues only: waiting 0+31, prealloc 2+1+0, transfer 1+1+0.
	if q := r.Pools[1].Queued; r.Pools[1].Name != "decode" || q.V != 36 {
		t.Errorf("decode queued = %+v, want 36", q)
	}
}
