package sim

// EngineTGI is HuggingFace text-generation-inference.
const EngineTGI = "tgi"

// tgiEngine is TGI: blocks of 16 tokens, no prefix cache by default, and
// admission that reserves each request's prompt and max_new_tokens.
var tgiEngine = engine{name: EngineTGI, render: renderTGI, reserves: true,
	defaults: serverDefaults{pageSize: 16, prefixCachingOff: true}}

// renderTGI writes a text-generation-inference page (router/src, Rust
// metrics-exporter-prometheus; engine-metrics.md §5): counters without
// _total, no labels except method, reservation semantics for
// tgi_batch_current_max_tokens.
func renderTGI(p *snapshot) []byte {
	g, live := p.gauges(), &p.truth
	c := live.Counters
	w := &page{style: rustNum, b: make([]byte, 0, 16<<10)}
	typ := func(name, t string) { w.b = append(w.b, "# TYPE "+name+" "+t+"\n"...) }
	one := func(name, t string, v float64) {
		typ(name, t)
		w.sample(name, "", v)
		w.b = append(w.b, '\n')
	}
	// HELP only where TGI describes the metric under the same name
	// (tgi_batch_max_total_tokens is described as tgi_batch_total_tokens).
	help := func(name, h string) { w.b = append(w.b, "# HELP "+name+" "+h+"\n"...) }
	help("tgi_batch_current_max_tokens", "Maximum tokens for the current batch")
	one("tgi_batch_current_max_tokens", "gauge", float64(g.UsedTokens))
	help("tgi_batch_current_size", "Current batch size")
	one("tgi_batch_current_size", "gauge", float64(g.Running))
	one("tgi_batch_max_total_tokens", "gauge", float64(g.CapacityTokens))
	help("tgi_queue_size", "Current queue size")
	one("tgi_queue_size", "gauge", float64(g.Queued))
	one("tgi_request_count", "counter", float64(c.RequestsFinished+int64(g.Running+g.Queued)))
	one("tgi_request_success", "counter", float64(c.RequestsFinished))
	typ("tgi_batch_inference_count", "counter")
	w.sample("tgi_batch_inference_count", `method="prefill"`, float64(c.RequestsFinished))
	w.sample("tgi_batch_inference_count", `method="decode"`, float64(c.DecodeSteps))
	w.b = append(w.b, '\n')
	typ("tgi_batch_inference_success", "counter")
	w.sample("tgi_batch_inference_success", `method="prefill"`, float64(c.RequestsFinished))
	w.sample("tgi_batch_inference_success", `method="decode"`, float64(c.DecodeSteps))
	w.b = append(w.b, '\n')
	h := p.hists[0]
	for _, f := range []struct {
		name string
		h    *histogram
	}{
		{"tgi_request_duration", h.e2e}, {"tgi_request_queue_duration", h.queueTime},
		{"tgi_request_input_length", h.prompt}, {"tgi_request_generated_tokens", h.gen},
		{"tgi_request_mean_time_per_token_duration", h.itl},
	} {
		typ(f.name, "histogram")
		w.histogram(f.name, "", f.h, true, 0)
		w.b = append(w.b, '\n')
	}
	return w.b
}
