package sim

// EngineTriton is Triton Inference Server with the TensorRT-LLM backend.
const EngineTriton = "triton"

// tritonEngine is Triton with TensorRT-LLM: blocks of 64 tokens.
var tritonEngine = engine{name: EngineTriton, render: renderTriton, defaults: serverDefaults{pageSize: 64}}

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
