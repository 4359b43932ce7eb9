package sim

import (
	"encoding/json"
	"strconv"
	"strings"
)

// renderLlamaCpp writes a current llama.cpp /metrics page: no labels,
// integers without ".0", 6 significant digits (as in the real captures;
// engine-metrics.md §4 and llamacpp-real.md §6).
func renderLlamaCpp(p *snapshot) []byte {
	g, live := p.gauges(), &p.truth
	c := live.Counters
	w := &page{style: cppNum, b: make([]byte, 0, 4<<10)}
	one := func(name, help, typ string, v float64) {
		w.family("llamacpp:"+name, help, typ)
		w.sample("llamacpp:"+name, "", v)
	}
	rate := func(tok int64, sec float64) float64 {
		if sec == 0 {
			return 0
		}
		return float64(tok) / sec
	}
	busy := 0.0
	if c.DecodeSteps > 0 {
		busy = float64(g.Running)
	}
	one("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", "counter", float64(c.ComputedTokens))
	one("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", "counter", float64(c.PrefixHitTokens))
	one("prompt_seconds_total", "Total time spent processing prompts", "counter", c.PromptSeconds)
	one("tokens_predicted_total", "Number of generation tokens processed", "counter", float64(c.GenerationTokens))
	one("tokens_predicted_seconds_total", "Total time spent generating tokens", "counter", c.GenerationSeconds)
	one("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", "counter", float64(c.DecodeSteps))
	one("n_tokens_max", "Largest observed sequence length (prompt + generation)", "counter", float64(c.MaxSeqLen))
	one("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", "counter", 0)
	one("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", "counter", 0)
	one("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", "counter", 0)
	one("prompt_tokens_seconds", "Average prompt throughput in tokens/s", "gauge", rate(c.ComputedTokens, c.PromptSeconds))
	one("predicted_tokens_seconds", "Average generation throughput in tokens/s", "gauge", rate(c.GenerationTokens, c.GenerationSeconds))
	one("requests_processing", "Number of requests processing", "gauge", float64(g.Running))
	one("requests_deferred", "Number of requests deferred", "gauge", float64(g.Queued))
	one("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "gauge", busy)
	return w.b
}

// llamaParams is the fixed sampling-parameter object of a slot, in the key
// order of the real /slots capture.
const llamaParams = `{"seed":4294967295,"temperature":0.800000011920929,"dynatemp_range":0.0,"dynatemp_exponent":1.0,"top_k":40,"top_p":0.949999988079071,"min_p":0.05000000074505806,"top_n_sigma":-1.0,"xtc_probability":0.0,"xtc_threshold":0.10000000149011612,"typical_p":1.0,"repeat_last_n":64,"repeat_penalty":1.0,"presence_penalty":0.0,"frequency_penalty":0.0,"dry_multiplier":0.0,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":64,"mirostat":0,"mirostat_tau":5.0,"mirostat_eta":0.10000000149011612,"adaptive_target":-1.0,"adaptive_decay":0.8999999761581421,"max_tokens":MAXTOK,"n_predict":MAXTOK,"n_keep":0,"n_discard":0,"ignore_eos":false,"stream":false,"n_probs":0,"min_keep":0,"chat_format":"peg-native","reasoning_format":"deepseek","reasoning_in_content":false,"generation_prompt":"<|im_start|>assistant\n","samplers":["penalties","dry","top_n_sigma","top_k","typ_p","top_p","min_p","xtc","temperature"],"speculative.types":"none","timings_per_token":false,"post_sampling_probs":false,"backend_sampling":false,"lora":[]}`

// llamaSlots renders /slots like the current build: idle never-used slots
// have only id, n_ctx, speculative, is_processing.
func llamaSlots(p *snapshot) []byte {
	t := p.gauges()
	nctx := strconv.FormatInt(t.CapacityTokens/int64(max(len(t.Slots), 1)), 10)
	b := []byte{'['}
	for i, s := range t.Slots {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(s.ID), 10)
		b = append(b, `,"n_ctx":`...)
		b = append(b, nctx...)
		b = append(b, `,"speculative":false,"is_processing":`...)
		b = strconv.AppendBool(b, s.Processing)
		if s.Task >= 0 {
			b = append(b, `,"id_task":`...)
			b = strconv.AppendInt(b, s.Task, 10)
			b = append(b, `,"n_prompt_tokens":`...)
			b = strconv.AppendInt(b, s.Tokens, 10)
			b = append(b, `,"n_prompt_tokens_processed":`...)
			b = strconv.AppendInt(b, s.Processed, 10)
			b = append(b, `,"n_prompt_tokens_cache":`...)
			b = strconv.AppendInt(b, s.Cache, 10)
			b = append(b, `,"params":`...)
			b = append(b, strings.ReplaceAll(llamaParams, "MAXTOK", strconv.FormatInt(p.srv.spec.Load.OutputMax, 10))...)
			b = append(b, `,"next_token":[{"has_next_token":`...)
			b = strconv.AppendBool(b, s.HasNext)
			b = append(b, `,"has_new_line":false,"n_remain":`...)
			b = strconv.AppendInt(b, s.Remain, 10)
			b = append(b, `,"n_decoded":`...)
			b = strconv.AppendInt(b, s.Decoded, 10)
			b = append(b, "}]"...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// llamaProps renders /props with the keys of the real capture.
func llamaProps(p *snapshot) []byte {
	spec := p.srv.spec
	nslots := int64(spec.MaxRunningRequests)
	model := "/models/" + spec.ModelName + ".gguf"
	b := []byte(`{"default_generation_settings":{"params":`)
	b = append(b, strings.ReplaceAll(llamaParams, "MAXTOK", "-1")...)
	b = append(b, `,"n_ctx":`...)
	b = strconv.AppendInt(b, spec.CapacityTokens/nslots, 10)
	b = append(b, `},"total_slots":`...)
	b = strconv.AppendInt(b, nslots, 10)
	m, _ := json.Marshal(model)
	b = append(b, `,"model_alias":`...)
	b = append(b, m...)
	b = append(b, `,"model_ftype":"all F32","model_path":`...)
	b = append(b, m...)
	b = append(b, `,"modalities":{"vision":false,"video":false,"audio":false},"endpoint_slots":true,"endpoint_props":false,"endpoint_metrics":`...)
	b = strconv.AppendBool(b, p.truth.Fault.Kind != FaultMetricsOff)
	b = append(b, `,"ui":true,"ui_settings":{},"chat_template":"","bos_token":"<s>","eos_token":"</s>","build_info":"b10587-3f545be","is_sleeping":false,"cors_proxy_enabled":false}`...)
	return b
}

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

// renderTriton writes the Triton TensorRT-LLM backend's custom metrics
// (custom_metrics_reporter.cc; engine-metrics.md §6.1), labels model and
// version plus one category label, and the nv_llm token histograms.
func renderTriton(p *snapshot) []byte {
	spec := p.srv.spec
	g, live := p.gauges(), &p.truth
	w := &page{style: rustNum, b: make([]byte, 0, 8<<10)}
	base := func(k, v string) string { return labels(true, k, v, "model", "tensorrt_llm", "version", "1") }
	block := spec.PageSize
	maxBlocks := g.CapacityTokens / block
	used := (g.UsedTokens + block - 1) / block
	w.family("nv_trt_llm_request_metrics", "TRT LLM request metrics", "gauge")
	for _, kv := range []struct {
		k string
		v int
	}{{"waiting", g.Queued}, {"context", 0}, {"scheduled", g.Running}, {"max", spec.MaxRunningRequests}, {"active", g.Running}} {
		w.sample("nv_trt_llm_request_metrics", base("request_type", kv.k), float64(kv.v))
	}
	w.family("nv_trt_llm_runtime_memory_metrics", "TRT LLM runtime memory metrics", "gauge")
	for _, m := range []string{"pinned", "gpu", "cpu"} {
		v := 0.0
		if m == "gpu" {
			v = 1610236
		}
		w.sample("nv_trt_llm_runtime_memory_metrics", base("memory_type", m), v)
	}
	w.family("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", "gauge")
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "fraction"), float64(used)/float64(maxBlocks))
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "tokens_per"), float64(block))
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "used"), float64(used))
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "free"), float64(maxBlocks-used))
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "max"), float64(maxBlocks))
	w.sample("nv_trt_llm_kv_cache_block_metrics", base("kv_cache_block_type", "reused"), float64(live.Counters.PrefixHitTokens/block))
	w.family("nv_trt_llm_inflight_batcher_metrics", "TRT LLM inflight_batcher-specific metrics", "gauge")
	w.sample("nv_trt_llm_inflight_batcher_metrics", base("inflight_batcher_specific_metric", "micro_batch_id"), 0)
	w.sample("nv_trt_llm_inflight_batcher_metrics", base("inflight_batcher_specific_metric", "generation_requests"), float64(g.Running))
	w.sample("nv_trt_llm_inflight_batcher_metrics", base("inflight_batcher_specific_metric", "total_context_tokens"), 0)
	w.sample("nv_trt_llm_inflight_batcher_metrics", base("inflight_batcher_specific_metric", "paused_requests"), 0)
	w.family("nv_trt_llm_general_metrics", "General TRT LLM metrics", "gauge")
	w.sample("nv_trt_llm_general_metrics", base("general_type", "iteration_counter"), float64(live.Counters.DecodeSteps))
	w.sample("nv_trt_llm_general_metrics", base("general_type", "timestamp"), float64(p.wall.UnixMicro()))
	w.family("nv_trt_llm_disaggregated_serving_metrics", "TRT LLM disaggregated serving metrics", "counter")
	w.sample("nv_trt_llm_disaggregated_serving_metrics", base("disaggregated_serving_type", "kv_cache_transfer_ms"), 0)
	w.sample("nv_trt_llm_disaggregated_serving_metrics", base("disaggregated_serving_type", "request_count"), 0)
	h := p.hists[0]
	w.family("nv_llm_input_token_len", "TRT LLM response metrics", "histogram")
	w.histogram("nv_llm_input_token_len", base("response_metric_type", "total_input_tokens"), h.prompt, true, 0)
	w.family("nv_llm_output_token_len", "TRT LLM response metrics", "histogram")
	w.histogram("nv_llm_output_token_len", base("response_metric_type", "total_output_tokens"), h.gen, true, 0)
	return w.b
}

// renderRouter writes the SGLang model gateway's smg_* families
// (sgl-model-gateway/src/observability/metrics.rs; engine-metrics.md §2):
// worker health, pool size and in-flight requests; no KV.
func renderRouter(p *snapshot) []byte {
	t := p.gauges()
	live := &p.truth
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	typ := func(name, kind string) { w.b = append(w.b, "# TYPE "+name+" "+kind+"\n"...) }
	wl := func(wt WorkerTruth) string {
		kind := "regular"
		if wt.Role == RolePrefill || wt.Role == RoleDecode {
			kind = wt.Role
		}
		return labels(true, "worker", wt.URL, "worker_type", kind)
	}
	backend := "regular"
	if p.srv.pd {
		backend = "pd"
	}
	typ("smg_router_requests_total", "counter")
	w.sample("smg_router_requests_total", labels(true, "router_type", "http", "backend_type", backend, "endpoint", "/generate"), float64(live.Routed))
	typ("smg_router_request_errors_total", "counter")
	w.sample("smg_router_request_errors_total", labels(true, "router_type", "http", "backend_type", backend, "endpoint", "/generate", "error_type", "no_available_workers"), float64(live.RouteErrors))
	typ("smg_worker_pool_size", "gauge")
	w.sample("smg_worker_pool_size", labels(true, "worker_type", "all"), float64(len(t.Workers)))
	typ("smg_worker_health", "gauge")
	for _, wt := range t.Workers {
		w.sample("smg_worker_health", wl(wt), b2f(wt.Healthy))
	}
	w.b = append(w.b, "# HELP smg_worker_requests_active Currently running requests per worker\n"...)
	typ("smg_worker_requests_active", "gauge")
	for _, wt := range t.Workers {
		w.sample("smg_worker_requests_active", wl(wt), float64(wt.Active))
	}
	typ("smg_worker_selection_total", "counter")
	for _, wt := range live.Workers {
		w.sample("smg_worker_selection_total", join(wl(wt), `policy="cache_aware"`), float64(wt.Selected))
	}
	return w.b
}

// renderRouterLegacy writes the pre-gateway sgl_router_* families
// (sgl-router/src/metrics.rs).
func renderRouterLegacy(p *snapshot) []byte {
	t := p.gauges()
	live := &p.truth
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	typ := func(name, kind string) { w.b = append(w.b, "# TYPE "+name+" "+kind+"\n"...) }
	typ("sgl_router_requests_total", "counter")
	w.sample("sgl_router_requests_total", `route="/generate"`, float64(live.Routed))
	typ("sgl_router_active_workers", "gauge")
	n := 0
	for _, wt := range t.Workers {
		if wt.Healthy {
			n++
		}
	}
	w.sample("sgl_router_active_workers", "", float64(n))
	typ("sgl_router_worker_health", "gauge")
	for _, wt := range t.Workers {
		w.sample("sgl_router_worker_health", labels(true, "worker", wt.URL), b2f(wt.Healthy))
	}
	typ("sgl_router_worker_load", "gauge")
	for _, wt := range t.Workers {
		w.sample("sgl_router_worker_load", labels(true, "worker", wt.URL), float64(wt.Active))
	}
	typ("sgl_router_processed_requests_total", "counter")
	for _, wt := range live.Workers {
		w.sample("sgl_router_processed_requests_total", labels(true, "worker", wt.URL), float64(wt.Processed))
	}
	return w.b
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
