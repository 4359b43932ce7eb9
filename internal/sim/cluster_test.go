package sim

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// startMixed starts the built-in "mixed" scenario on a manual clock.
func startCluster(t *testing.T, name string) *Cluster {
	t.Helper()
	sc, err := BuiltinScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 7, ManualClock: true, Epoch: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func get(t *testing.T, url string) (int, []byte, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func parse(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse page: %v\n%.500s", err, body)
	}
	return fams
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return math.NaN()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// one returns the value of the single series of fam matching the labels (k, v pairs).
func one(t *testing.T, fams map[string]*dto.MetricFamily, fam string, kv ...string) float64 {
	t.Helper()
	f := fams[fam]
	if f == nil {
		t.Fatalf("family %s missing", fam)
	}
	var vals []float64
	for _, m := range f.Metric {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && label(m, kv[i]) == kv[i+1]
		}
		if ok {
			vals = append(vals, value(m))
		}
	}
	if len(vals) != 1 {
		t.Fatalf("%s%v: %d series, want 1", fam, kv, len(vals))
	}
	return vals[0]
}

// TestPagesShowTruth reads every engine's page over HTTP and checks, by hand-
// written formulas from the engine reference, that it shows Truth exactly.
func TestPagesShowTruth(t *testing.T) {
	c := startCluster(t, "mixed")
	c.Advance(3 * time.Minute)
	url := map[string]string{}
	for _, ep := range c.Endpoints() {
		url[ep.Name] = ep.URL
	}
	page := func(name string) map[string]*dto.MetricFamily {
		code, b, err := get(t, url[name]+"/metrics")
		if err != nil || code != 200 {
			t.Fatalf("GET %s/metrics = %d, %v", name, code, err)
		}
		return parse(t, b)
	}
	f := func(v int64) float64 { return float64(v) }

	for _, tc := range []struct{ name, pre string }{{"sglang", "sglang:"}, {"sglang-underscore", "sglang_"}} {
		tr := c.Truth(tc.name)
		if tr.Running == 0 || tr.UsedTokens == 0 || tr.EvictableTokens == 0 {
			t.Fatalf("%s: idle truth %+v; the test needs load", tc.name, tr)
		}
		p := page(tc.name)
		for tp := range 2 {
			r := []string{"tp_rank", string(rune('0' + tp))}
			if got := one(t, p, tc.pre+"kv_used_tokens", r...); got != f(tr.UsedTokens) {
				t.Errorf("%s kv_used_tokens tp%d = %g, want %d", tc.name, tp, got, tr.UsedTokens)
			}
		}
		r := []string{"tp_rank", "1"}
		checks := map[string]float64{
			"kv_evictable_tokens":          f(tr.EvictableTokens),
			"kv_available_tokens":          f(tr.CapacityTokens - tr.UsedTokens - tr.EvictableTokens),
			"max_total_num_tokens":         f(tr.CapacityTokens),
			"num_used_tokens":              f(tr.UsedTokens),
			"num_running_reqs":             float64(tr.Running),
			"num_queue_reqs":               float64(tr.Queued),
			"context_len":                  f(tr.ContextLength),
			"token_usage":                  math.Round(float64(tr.UsedTokens)/float64(tr.CapacityTokens)*100) / 100,
			"full_token_usage":             float64(tr.UsedTokens) / float64(tr.CapacityTokens),
			"num_retracted_requests_total": f(tr.Counters.Preemptions),
		}
		for fam, want := range checks {
			if got := one(t, p, tc.pre+fam, r...); got != want {
				t.Errorf("%s %s = %g, want %g", tc.name, fam, got, want)
			}
		}
		hit := one(t, p, tc.pre+"prefill_effective_tokens_total", "tp_rank", "0", "mode", "device_hit")
		in := one(t, p, tc.pre+"prefill_effective_tokens_total", "tp_rank", "0", "mode", "input")
		if hit != f(tr.Counters.PrefixHitTokens) || hit+in != f(tr.Counters.PrefixQueriedTokens) {
			t.Errorf("%s prefill_effective hit=%g input=%g, want %d of %d", tc.name, hit, in, tr.Counters.PrefixHitTokens, tr.Counters.PrefixQueriedTokens)
		}
		if got := one(t, p, tc.pre+"prompt_tokens_total"); got != f(tr.Counters.PromptTokens) {
			t.Errorf("%s prompt_tokens_total = %g, want %d", tc.name, got, tr.Counters.PromptTokens)
		}
	}

	// SGLang legacy: num_used_tokens and token_usage only.
	{
		tr := c.Truth("sglang-legacy")
		p := page("sglang-legacy")
		if p["sglang:kv_used_tokens"] != nil {
			t.Error("sglang-legacy page has sglang:kv_used_tokens")
		}
		if got := one(t, p, "sglang:num_used_tokens"); got != f(tr.UsedTokens) {
			t.Errorf("legacy num_used_tokens = %g, want %d", got, tr.UsedTokens)
		}
		if got := one(t, p, "sglang:cache_config_info", "page_size", "1", "num_pages", "524288"); got != 1 {
			t.Errorf("legacy cache_config_info = %g", got)
		}
	}

	// vLLM V1: per engine; used = usage × (num_gpu_blocks − 1) × block_size.
	{
		tr := c.Truth("vllm")
		p := page("vllm")
		for e, r := range tr.Ranks {
			eng := []string{"engine", string(rune('0' + e))}
			usage := one(t, p, "vllm:kv_cache_usage_perc", eng...)
			var blocks, bs, size float64
			for _, m := range p["vllm:cache_config_info"].Metric {
				if label(m, "engine") == eng[1] {
					blocks, _ = parseF(label(m, "num_gpu_blocks"))
					bs, _ = parseF(label(m, "block_size"))
					size, _ = parseF(label(m, "kv_cache_size_tokens"))
				}
			}
			capTok := (blocks - 1) * bs
			if capTok != f(r.CapacityTokens) || size != capTok {
				t.Errorf("vllm engine %d capacity from cache_config_info = %g (kv_cache_size_tokens %g), want %d", e, capTok, size, r.CapacityTokens)
			}
			if got := math.Round(usage * capTok); got != f(r.UsedTokens) {
				t.Errorf("vllm engine %d used = %g, want %d", e, got, r.UsedTokens)
			}
			if got := one(t, p, "vllm:num_requests_running", eng...); got != float64(r.Running) {
				t.Errorf("vllm engine %d running = %g, want %d", e, got, r.Running)
			}
			if got := one(t, p, "vllm:prefix_cache_hits_total", eng...); got != f(r.Counters.PrefixHitTokens) {
				t.Errorf("vllm engine %d hits = %g, want %d", e, got, r.Counters.PrefixHitTokens)
			}
			if got := one(t, p, "vllm:num_preemptions_total", eng...); got != f(r.Counters.Preemptions) {
				t.Errorf("vllm engine %d preemptions = %g, want %d", e, got, r.Counters.Preemptions)
			}
		}
	}
	// vLLM V0.
	{
		tr := c.Truth("vllm-v0")
		p := page("vllm-v0")
		m := p["vllm:cache_config_info"].Metric[0]
		blocks, _ := parseF(label(m, "num_gpu_blocks"))
		bs, _ := parseF(label(m, "block_size"))
		if blocks*bs != f(tr.CapacityTokens) || label(m, "engine") != "" {
			t.Errorf("vllm-v0 cache_config_info capacity %g×%g engine %q, want %d and no engine", blocks, bs, label(m, "engine"), tr.CapacityTokens)
		}
		if got := math.Round(one(t, p, "vllm:gpu_cache_usage_perc") * blocks * bs); got != f(tr.UsedTokens) {
			t.Errorf("vllm-v0 used = %g, want %d", got, tr.UsedTokens)
		}
	}
	// TGI: reservation.
	{
		tr := c.Truth("tgi")
		p := page("tgi")
		if !tr.Reserved || one(t, p, "tgi_batch_current_max_tokens") != f(tr.UsedTokens) || one(t, p, "tgi_batch_max_total_tokens") != f(tr.CapacityTokens) ||
			one(t, p, "tgi_queue_size") != float64(tr.Queued) || one(t, p, "tgi_batch_current_size") != float64(tr.Running) {
			t.Errorf("tgi page does not match truth %+v", tr)
		}
	}
	// Triton: blocks.
	{
		tr := c.Truth("triton")
		p := page("triton")
		tpb := one(t, p, "nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "tokens_per")
		used := one(t, p, "nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "used")
		mx := one(t, p, "nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", "max")
		if mx*tpb != f(tr.CapacityTokens) || used*tpb != f(tr.UsedTokens) || one(t, p, "nv_trt_llm_request_metrics", "request_type", "waiting") != float64(tr.Queued) {
			t.Errorf("triton used %g×%g max %g, want truth used %d cap %d", used, tpb, mx, tr.UsedTokens, tr.CapacityTokens)
		}
	}
	// llama.cpp: /slots and /props.
	{
		tr := c.Truth("llamacpp")
		p := page("llamacpp")
		if one(t, p, "llamacpp:requests_processing") != float64(tr.Running) || one(t, p, "llamacpp:requests_deferred") != float64(tr.Queued) {
			t.Errorf("llamacpp processing/deferred do not match truth %+v", tr)
		}
		_, sb, _ := get(t, url["llamacpp"]+"/slots")
		_, pb, _ := get(t, url["llamacpp"]+"/props")
		var slots []struct {
			NCtx   int64  `json:"n_ctx"`
			Tokens *int64 `json:"n_prompt_tokens"`
		}
		var props struct {
			DGS struct {
				NCtx int64 `json:"n_ctx"`
			} `json:"default_generation_settings"`
			TotalSlots int64 `json:"total_slots"`
		}
		if err := json.Unmarshal(sb, &slots); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(pb, &props); err != nil {
			t.Fatal(err)
		}
		var used int64
		for _, s := range slots {
			if s.Tokens != nil {
				used += *s.Tokens
			}
		}
		if used != tr.UsedTokens || props.DGS.NCtx*props.TotalSlots != tr.CapacityTokens {
			t.Errorf("llamacpp /slots Σ=%d, /props %d×%d; truth used %d capacity %d", used, props.DGS.NCtx, props.TotalSlots, tr.UsedTokens, tr.CapacityTokens)
		}
	}
	// Router: workers and in-flight.
	{
		tr := c.Truth("router")
		p := page("router")
		if one(t, p, "smg_worker_pool_size") != 2 || one(t, p, "smg_worker_requests_active", "worker", url["sglang"]) != float64(tr.Workers[0].Active) {
			t.Errorf("router page does not match %+v", tr.Workers)
		}
	}
}

func parseF(s string) (float64, error) {
	var v float64
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// TestLoadModelInvariants steps the default scenario through a load surge
// and checks the KV accounting at every step.
func TestLoadModelInvariants(t *testing.T) {
	sc, err := ParseScenario("surge.yaml", []byte(`
servers:
  - {name: router, engine: sglang-router, workers: [prefill, decode], load: {rate: 1, prompt_mean: 2000, output_mean: 1500, output_max: 8000}}
  - {name: prefill, engine: sglang, role: prefill, tp: 2, capacity_tokens: 400000}
  - {name: decode, engine: sglang, role: decode, tp: 2, capacity_tokens: 200000}
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(sc, Options{Seed: 1, ManualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	prev := map[string]Counters{}
	check := func(phase string) {
		for _, s := range sc.Servers {
			tr := c.Truth(s.Name)
			if tr.UsedTokens < 0 || tr.EvictableTokens < 0 || tr.AvailableTokens < 0 || tr.UsedTokens+tr.EvictableTokens+tr.AvailableTokens != tr.CapacityTokens {
				t.Fatalf("%s %s: used %d + evictable %d + available %d != capacity %d", phase, s.Name, tr.UsedTokens, tr.EvictableTokens, tr.AvailableTokens, tr.CapacityTokens)
			}
			p := prev[s.Name]
			if tr.Counters.PromptTokens < p.PromptTokens || tr.Counters.GenerationTokens < p.GenerationTokens || tr.Counters.Preemptions < p.Preemptions || tr.Counters.PrefixHitTokens < p.PrefixHitTokens {
				t.Fatalf("%s %s: a counter went down: %+v after %+v", phase, s.Name, tr.Counters, p)
			}
			prev[s.Name] = tr.Counters
		}
		r, pf, d := c.Truth("router"), c.Truth("prefill"), c.Truth("decode")
		if got, want := r.Workers[0].Active, int64(pf.PrefillBootstrap+pf.Queued+pf.Running+pf.PrefillInflight); got != want {
			t.Fatalf("%s: router active on prefill = %d, want bootstrap+queued+running+inflight = %d", phase, got, want)
		}
		if got, want := r.Workers[1].Active, int64(d.DecodePrealloc+d.DecodeTransfer+d.Running+d.Queued); got != want {
			t.Fatalf("%s: router active on decode = %d, want prealloc+transfer+running = %d", phase, got, want)
		}
		if d.Counters.ComputedTokens != 0 || d.Counters.PrefixQueriedTokens != 0 || d.EvictableTokens != 0 {
			t.Fatalf("%s: decode computed %d prompt tokens, queried %d, evictable %d; want 0 (KV comes from prefill)", phase, d.Counters.ComputedTokens, d.Counters.PrefixQueriedTokens, d.EvictableTokens)
		}
	}
	maxUsage := 0.0
	for range 60 {
		c.Advance(5 * time.Second)
		check("normal")
	}
	if err := c.SetLoad("router", 4); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		c.Advance(5 * time.Second)
		check("surge")
		d := c.Truth("decode")
		maxUsage = max(maxUsage, float64(d.UsedTokens)/float64(d.CapacityTokens))
	}
	d := c.Truth("decode")
	if maxUsage < 0.95 || d.Counters.Preemptions == 0 || d.DecodePrealloc == 0 {
		t.Errorf("surge: decode max usage %.3f, retractions %d, prealloc queue %d; want > 0.95, > 0, > 0", maxUsage, d.Counters.Preemptions, d.DecodePrealloc)
	}
	c.SetLoad("router", 0)
	for range 200 {
		c.Advance(5 * time.Second)
		check("drain")
	}
	d = c.Truth("decode")
	if d.UsedTokens != 0 || d.Running != 0 || d.DecodePrealloc != 0 || d.DecodeTransfer != 0 {
		t.Errorf("drained decode = used %d running %d prealloc %d transfer %d, want all 0", d.UsedTokens, d.Running, d.DecodePrealloc, d.DecodeTransfer)
	}
	p := c.Truth("prefill")
	if p.UsedTokens != 0 || p.EvictableTokens == 0 {
		t.Errorf("drained prefill = used %d evictable %d, want 0 and > 0 (prefix cache stays)", p.UsedTokens, p.EvictableTokens)
	}
}

func TestDeterministic(t *testing.T) {
	run := func(seed uint64) []byte {
		sc, _ := BuiltinScenario("mixed")
		c, _ := NewCluster(sc, Options{Seed: seed, ManualClock: true, Epoch: time.Unix(1700000000, 0)})
		c.Advance(2 * time.Minute)
		var all []byte
		for _, s := range c.servers {
			all = append(all, s.snap.Load().metrics()...)
		}
		return all
	}
	a, b, other := run(3), run(3), run(4)
	if string(a) != string(b) {
		t.Error("same seed, different pages")
	}
	if string(a) == string(other) {
		t.Error("different seeds, same pages")
	}
}

func TestFaults(t *testing.T) {
	c := startCluster(t, "mixed")
	c.Advance(time.Minute)
	url := map[string]string{}
	for _, ep := range c.Endpoints() {
		url[ep.Name] = ep.URL
	}
	set := func(name, q string) {
		resp, err := http.Post(url[name]+"/-/sim/fault?"+q, "", nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST fault %s %s: %v %v", name, q, resp, err)
		}
		resp.Body.Close()
	}
	// metrics off: engine-specific status and body.
	set("llamacpp", "kind=metrics-off")
	set("vllm", "kind=metrics-off")
	code, body, _ := get(t, url["llamacpp"]+"/metrics")
	if code != 501 || !strings.Contains(string(body), "This server does not support metrics endpoint. Start it with `--metrics`") {
		t.Errorf("llamacpp metrics-off = %d %s", code, body)
	}
	if code, body, _ = get(t, url["vllm"]+"/metrics"); code != 404 || string(body) != `{"detail":"Not Found"}` {
		t.Errorf("vllm metrics-off = %d %s", code, body)
	}
	// 500s.
	set("tgi", "kind=error")
	if code, _, _ = get(t, url["tgi"]+"/metrics"); code != 500 {
		t.Errorf("tgi error fault = %d, want 500", code)
	}
	// Connection dropped mid-body.
	set("triton", "kind=drop")
	if _, _, err := get(t, url["triton"]+"/metrics"); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("triton drop fault: err = %v, want unexpected EOF", err)
	}
	// Slow: the answer comes, after the delay (not timed here).
	set("sglang-legacy", "kind=slow&delay=20ms")
	if code, _, _ = get(t, url["sglang-legacy"]+"/metrics"); code != 200 {
		t.Errorf("slow fault = %d, want 200", code)
	}
	// Restart resets counters.
	before := c.Truth("sglang")
	set("sglang", "kind=restart")
	after := c.Truth("sglang")
	if before.Counters.PromptTokens == 0 || after.Counters != (Counters{}) || after.Restarts != 1 || after.UsedTokens != 0 || after.Fault.Kind != FaultNone {
		t.Errorf("restart: before %+v after %+v", before.Counters, after)
	}
	// Freeze: gauges stop, counters continue.
	set("sglang-underscore", "kind=freeze")
	frozen := c.Truth("sglang-underscore")
	c.Advance(time.Minute)
	live := c.Truth("sglang-underscore")
	_, b, _ := get(t, url["sglang-underscore"]+"/metrics")
	p := parse(t, b)
	if got := one(t, p, "sglang_num_used_tokens", "tp_rank", "0"); got != float64(frozen.UsedTokens) || live.UsedTokens == frozen.UsedTokens {
		t.Errorf("freeze: page used %g, frozen %d, live %d", got, frozen.UsedTokens, live.UsedTokens)
	}
	if got := one(t, p, "sglang_prompt_tokens_total"); got != float64(live.Counters.PromptTokens) {
		t.Errorf("freeze: counter %g, want live %d", got, live.Counters.PromptTokens)
	}
	// Leak: with no load, used stays at what finished requests held.
	c.SetFault("vllm-v0", Fault{Kind: FaultLeak})
	c.Advance(time.Minute)
	c.SetLoad("vllm-v0", 0)
	c.Advance(10 * time.Minute)
	if tr := c.Truth("vllm-v0"); tr.UsedTokens == 0 || tr.Running != 0 {
		t.Errorf("leak: idle server used %d running %d, want used > 0", tr.UsedTokens, tr.Running)
	}
	// Control endpoint errors say how to fix.
	resp, _ := http.Post(url["tgi"]+"/-/sim/load?factor=x", "", nil)
	eb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(eb), "use POST /-/sim/load?factor=2") {
		t.Errorf("bad load = %d %s", resp.StatusCode, eb)
	}
}

// TestPDSGLangDecodeDP checks the pd-sglang-dp scenario's decode server: DP
// attention with 2 DP ranks of TP=4, every (dp_rank, tp_rank) pair a series,
// 1,290,752 tokens per DP rank.
func TestPDSGLangDecodeDP(t *testing.T) {
	c := startCluster(t, "pd-sglang-dp")
	c.Advance(time.Minute)
	var url string
	for _, ep := range c.Endpoints() {
		if ep.Name == "decode" {
			url = ep.URL
		}
	}
	code, b, err := get(t, url+"/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET decode /metrics = %d, %v", code, err)
	}
	p := parse(t, b)
	if n := len(p["sglang:max_total_num_tokens"].GetMetric()); n != 8 {
		t.Errorf("sglang:max_total_num_tokens has %d series, want 8 (2 DP × 4 TP)", n)
	}
	for _, dp := range []string{"0", "1"} {
		for _, tp := range []string{"0", "1", "2", "3"} {
			if got := one(t, p, "sglang:max_total_num_tokens", "dp_rank", dp, "tp_rank", tp); got != 1290752 {
				t.Errorf("max_total_num_tokens dp%s tp%s = %g, want 1290752", dp, tp, got)
			}
		}
	}
}

// TestPagesServedCounts: /-/sim/pages on any server counts the metrics
// pages every server of the cluster served whole; its own requests, health
// checks and error answers are not pages.
func TestPagesServedCounts(t *testing.T) {
	c := startCluster(t, "mixed")
	eps := c.Endpoints()
	if len(eps) < 2 {
		t.Fatalf("scenario mixed has %d servers, want at least 2", len(eps))
	}
	count := func() string {
		code, b, err := get(t, eps[1].URL+"/-/sim/pages")
		if err != nil || code != 200 {
			t.Fatalf("GET /-/sim/pages = %d, %v", code, err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := count(); got != "0" {
		t.Fatalf("pages before any scrape: %s, want 0", got)
	}
	for _, ep := range eps[:2] {
		for range 3 {
			if code, _, err := get(t, ep.URL+ep.MetricsPath); err != nil || code != 200 {
				t.Fatalf("GET %s%s = %d, %v", ep.URL, ep.MetricsPath, code, err)
			}
		}
		get(t, ep.URL+"/health")
	}
	if got := count(); got != "6" {
		t.Errorf("pages after 3 scrapes of each of 2 servers: %s, want 6", got)
	}
	if c.PagesServed() != 6 {
		t.Errorf("PagesServed = %d, want 6", c.PagesServed())
	}
}
