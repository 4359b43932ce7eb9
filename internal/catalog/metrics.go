package catalog

import "strings"

// The tables below were written by reading each engine's sources through
// kvwatch's search tools (and ../shared/reference/engine-metrics.md, which
// cites them); each block names its file. Versions are the engine versions
// in which a name was seen; "" means not pinned down.

const (
	srcVLLMLoggers    = "vllm-project/vllm vllm/v1/metrics/loggers.py@005a810bc40f (and newer revisions: deprecations in 0.9.2/0.11)"
	srcVLLMSpec       = "vllm-project/vllm vllm/v1/spec_decode/metrics.py"
	srcVLLMNixl       = "vllm-project/vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"
	srcVLLMV0         = "vllm-project/vllm vllm/engine/metrics.py (V0); docs/design/metrics.md@f7e3a0879e63 \"Deprecated Metrics\""
	srcVLLMOffload    = "vllm-project/vllm vllm/v1/kv_offload/ (CPUOffloadingMetrics) and vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py (the load/store byte counters; engine-metrics.md corrections: #35669, #45737, #47666)"
	srcVLLMDocs       = "vllm-project/vllm docs/design/metrics.md@f7e3a0879e63, docs/usage/metrics.md@044a0565bc59"
	srcVLLM2026       = "vllm-project/vllm vllm/v1/metrics/loggers.py (a stored revision without commit id: engine_sleep_state, num_requests_waiting_by_reason); PRs #38435, #33290, #49984"
	srcSGLang         = "sgl-project/sglang python/sglang/srt/observability/metrics_collector.py@016d8605e458 (older: python/sglang/srt/metrics/collector.py@44cedc2b9c7d)"
	srcSGLangOld      = "sgl-project/sglang docs/references/production_metrics.md@00b08c497f07; examples/monitoring/grafana.json@f32b0841"
	srcSGLang2026     = "sgl-project/sglang python/sglang/srt/observability/metrics_collector.py (a stored revision newer than @44cedc2b9c7d, without commit id); PRs #22555 (token_usage = max over pools), #24341 (bootstrap rename), #19009 (kv_transfer_* histograms), #24197 (page_size, num_pages gauges), #31495 (prefill num_running_reqs)"
	srcSGLangRadix    = "sgl-project/sglang python/sglang/srt/observability/metrics_collector.py@016d8605e458 (RadixCacheMetricsCollector, storage collector)"
	srcSMG            = "sgl-project/sglang sgl-model-gateway/src/observability/metrics.rs@01b2d83a"
	srcSGLRouter      = "sgl-project/sglang sgl-router/src/metrics.rs@584506b4"
	srcLlamaCpp       = "ggml-org/llama.cpp tools/server/server-context.cpp@fb402660 (get_metrics)"
	srcLlamaCppBuilds = "ggml-org/llama.cpp engine-metrics.md §4 (names third-party scrapers read on recent builds; verify per build)"
	srcLlamaCppOld    = "ggml-org/llama.cpp examples/server/server.cpp (before PR #13660)"
	srcTGI            = "huggingface/text-generation-inference router/src/server.rs, backends/v3/src/{queue,backend,lib}.rs@db931fcf42da"
	srcTriton         = "NVIDIA/TensorRT-LLM triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/custom_metrics_reporter.cc@0d5352f5"
	srcTritonCore     = "triton-inference-server/tensorrtllm_backend README.md (Triton core metrics)@0b9d7d5a1958"
	srcTRTLLMServe    = "NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py@050f80def8df"
	srcTRTLLMOld      = "NVIDIA/TensorRT-LLM tensorrt_llm/metrics/collector.py@89fd9b74 (un-prefixed names)"
	srcLMDeploy       = "InternLM/lmdeploy lmdeploy/metrics/loggers.py@1263d5cd889b (history: 1e8ce56db v0.9.2, 6a4ede69f v0.12.1, 7fb77565e v0.12.3, fc9c904ed 0.14.0a1, 75f5ddc74 v0.14.0)"
	srcDynamo         = "ai-dynamo/dynamo lib/runtime/src/metrics/prometheus_names.rs@04070c75b52f (older @4415465e)"
	srcDynamoDocs     = "ai-dynamo/dynamo deploy/metrics/README.md, docs/observability/metrics_examples/fe.log"
	srcDynamoNames    = "ai-dynamo/dynamo lib/bindings/python/src/dynamo/prometheus_names.py@04277994ab15 (kvstats, frontend_service), components/src/dynamo/common/utils/prometheus.py (LLMBackendMetrics); PR #5704"
	srcLMCache        = "LMCache/LMCache lmcache/observability.py@dd022cce2cab"
	srcLMCacheMP      = "LMCache/LMCache docs/source/mp/observability/metrics.rst"
	srcPythonClient   = "prometheus/client_python prometheus_client/{gc_collector,platform_collector,process_collector}.py"
	srcInstrumentate  = "vllm-project/vllm docs/design/metrics.md@f7e3a0879e63 (prometheus_fastapi_instrumentator http_* families)"
	srcPrometheus     = "prometheus/prometheus scrape/scrape.go (synthetic series), rules/alerting.go (ALERTS, ALERTS_FOR_STATE)"
)

var (
	lVLLM     = []string{"model_name", "engine"}
	lVLLMV0   = []string{"model_name"}
	lSGLSched = []string{"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank", "priority"}
	lSGLTok   = []string{"model_name", "engine_type", "priority", "is_streaming"}
	lSGLOld   = []string{"name"}
	lTRT      = []string{"model", "version"}
	lTRTServe = []string{"model_name", "engine_type"}
	lLMDeploy = []string{"model_name", "engine"}
	lDynComp  = []string{"dynamo_namespace", "dynamo_component", "dynamo_endpoint", "model", "model_name", "worker_id", "dp_rank"}
	lDynFront = []string{"model", "dynamo_namespace"}
	lLMCache  = []string{"model_name", "worker_id"}
)

func engines() []Engine {
	return []Engine{
		{Name: "vllm", Display: "vLLM", Prefixes: []string{"vllm:"}, PythonClient: true, Source: srcVLLMLoggers},
		{Name: "sglang", Display: "SGLang", Prefixes: []string{"sglang:"}, PythonClient: true, Source: srcSGLang},
		{Name: "sglang-router", Display: "SGLang router / model gateway (SMG)", Prefixes: []string{"smg_", "sgl_router_"}, Source: srcSMG},
		{Name: "llamacpp", Display: "llama.cpp server", Prefixes: []string{"llamacpp:"}, Source: srcLlamaCpp},
		{Name: "tgi", Display: "TGI", Prefixes: []string{"tgi_"}, Source: srcTGI},
		{Name: "triton", Display: "Triton TensorRT-LLM backend", Prefixes: []string{"nv_trt_llm_", "nv_llm_", "nv_inference_", "nv_gpu_", "nv_energy_", "nv_cpu_", "nv_cache_", "nv_pinned_"}, Source: srcTriton},
		{Name: "trtllm-serve", Display: "trtllm-serve", Prefixes: []string{"trtllm_"}, PythonClient: true, Source: srcTRTLLMServe},
		{Name: "lmdeploy", Display: "LMDeploy", Prefixes: []string{"lmdeploy:"}, PythonClient: true, Source: srcLMDeploy},
		{Name: "dynamo", Display: "NVIDIA Dynamo", Prefixes: []string{"dynamo_component_", "dynamo_frontend_", "dynamo_router_", "kvbm_"}, Source: srcDynamo},
		{Name: "dynamo-planner", Display: "NVIDIA Dynamo planner", Prefixes: []string{"dynamo_planner_", "planner:"}, PythonClient: true, Source: srcDynamoPlanner},
		{Name: "lmcache", Display: "LMCache", Prefixes: []string{"lmcache:", "lmcache_mp_"}, PythonClient: true, Source: srcLMCache},
		{Name: "prometheus_client", Display: "Python prometheus_client default collectors", Prefixes: []string{"python_", "process_"}, Source: srcPythonClient},
		{Name: "prometheus", Display: "Prometheus (series it writes itself)", Source: srcPrometheus},
	}
}

// add appends one entry per name with the same engine, type, labels,
// version range and source.
type table []Metric

func (t *table) add(engine string, typ Type, labels []string, since, until, src string, names ...string) {
	for _, n := range names {
		*t = append(*t, Metric{Engine: engine, Name: n, Type: typ, Labels: labels, Since: since, Until: until, Source: src})
	}
}

// when marks the entries named names as conditional (see
// Metric.Conditional).
func (t table) when(cond string, names ...string) {
	for i := range t {
		for _, n := range names {
			if t[i].Name == n || strings.HasSuffix(n, "*") && strings.HasPrefix(t[i].Name, strings.TrimSuffix(n, "*")) {
				t[i].Conditional = cond
			}
		}
	}
}

func metrics() []Metric {
	var t table
	with := func(base []string, extra ...string) []string { return append(append([]string{}, base...), extra...) }

	// vLLM V1.
	t.add("vllm", Gauge, lVLLM, "0.8", "", srcVLLMLoggers, "vllm:num_requests_running", "vllm:num_requests_waiting")
	t.add("vllm", Gauge, with(lVLLM, "reason"), "0.12", "", srcVLLM2026, "vllm:num_requests_waiting_by_reason")
	t.add("vllm", Gauge, lVLLM, "0.9.2", "", srcVLLMLoggers, "vllm:kv_cache_usage_perc")
	t.add("vllm", Gauge, lVLLM, "", "0.11", srcVLLMLoggers, "vllm:gpu_cache_usage_perc")
	t.add("vllm", Counter, lVLLM, "0.9.2", "", srcVLLMLoggers, "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")
	t.add("vllm", Counter, lVLLM, "0.8", "0.11", srcVLLMLoggers, "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total")
	t.add("vllm", Counter, lVLLM, "0.10", "", srcVLLMLoggers, "vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_hits_total",
		"vllm:mm_cache_queries_total", "vllm:mm_cache_hits_total", "vllm:corrupted_requests_total", "vllm:prompt_tokens_cached_total", "vllm:prompt_tokens_recomputed_total")
	t.add("vllm", Counter, with(lVLLM, "source"), "0.11", "", srcVLLM2026, "vllm:prompt_tokens_by_source_total")
	t.add("vllm", Counter, with(lVLLM, "reason"), "", "", srcVLLMDocs, "vllm:admission_rejections_total")
	t.add("vllm", Counter, lVLLM, "", "", srcVLLMLoggers, "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total")
	t.add("vllm", Counter, with(lVLLM, "finished_reason"), "", "", srcVLLMLoggers, "vllm:request_success_total")
	t.add("vllm", Info, nil, "", "", srcVLLMLoggers, "vllm:cache_config_info")
	t.add("vllm", Info, []string{"max_lora", "waiting_lora_adapters", "running_lora_adapters"}, "", "", srcVLLMLoggers, "vllm:lora_requests_info")
	t.add("vllm", Gauge, with(lVLLM, "sleep_state"), "0.11", "", srcVLLM2026, "vllm:engine_sleep_state")
	t.add("vllm", Histogram, lVLLM, "", "", srcVLLMLoggers, "vllm:iteration_tokens_total", "vllm:request_prompt_tokens", "vllm:request_generation_tokens",
		"vllm:request_max_num_generation_tokens", "vllm:request_params_n", "vllm:request_params_max_tokens", "vllm:time_to_first_token_seconds",
		"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
		"vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds")
	t.add("vllm", Histogram, lVLLM, "0.10", "", srcVLLMLoggers, "vllm:time_per_prefill_token_request_seconds")
	t.add("vllm", Histogram, lVLLM, "0.11", "", srcVLLMLoggers, "vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds")
	t.add("vllm", Histogram, lVLLM, "", "0.11", srcVLLMLoggers, "vllm:time_per_output_token_seconds")
	t.add("vllm", Histogram, lVLLM, "", "", srcVLLM2026, "vllm:request_num_preemptions")
	t.add("vllm", Histogram, lVLLM, "0.11", "", srcVLLMDocs, "vllm:kv_block_lifetime_seconds", "vllm:kv_block_idle_before_evict_seconds", "vllm:kv_block_reuse_gap_seconds")
	t.add("vllm", Counter, lVLLM, "0.8", "", srcVLLMSpec, "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total")
	t.add("vllm", Counter, with(lVLLM, "position"), "0.8", "", srcVLLMSpec, "vllm:spec_decode_num_accepted_tokens_per_pos_total")
	t.add("vllm", Histogram, lVLLM, "0.10", "", srcVLLMNixl, "vllm:nixl_xfer_time_seconds", "vllm:nixl_post_time_seconds", "vllm:nixl_bytes_transferred", "vllm:nixl_num_descriptors")
	t.add("vllm", Counter, lVLLM, "0.11", "", srcVLLMNixl, "vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_notifications_total", "vllm:nixl_num_kv_expired_reqs_total")
	t.add("vllm", Gauge, lVLLM, "", "", srcVLLMNixl, "vllm:nixl_num_pending_sends")
	t.add("vllm", Counter, with(lVLLM, "transfer_type"), "", "deprecated by vllm #35669", srcVLLMOffload, "vllm:kv_offload_total_bytes_total", "vllm:kv_offload_total_time_total")
	t.add("vllm", Counter, lVLLM, "", "", srcVLLMOffload, "vllm:kv_offload_store_bytes_total", "vllm:kv_offload_load_bytes_total",
		"vllm:kv_offload_store_time_total", "vllm:kv_offload_load_time_total", "vllm:kv_offload_stores_skipped_total",
		"vllm:kv_offload_tiering_cascade_job_failures_total")
	t.add("vllm", Histogram, lVLLM, "", "", srcVLLMOffload, "vllm:kv_offload_store_size", "vllm:kv_offload_load_size",
		"vllm:kv_offload_lookup_sync_delay_seconds", "vllm:kv_offload_lookup_async_delay_seconds",
		"vllm:kv_offload_tiering_lookup_sync_delay_seconds", "vllm:kv_offload_tiering_lookup_async_delay_seconds")
	t.add("vllm", Gauge, lVLLM, "", "", srcVLLMOffload, "vllm:kv_offload_cpu_cache_usage_perc", "vllm:kv_offload_cpu_cache_write_usage_perc", "vllm:kv_offload_cpu_cache_read_usage_perc")
	// vLLM V0 (vllm/engine/metrics.py): only model_name.
	t.add("vllm", Gauge, lVLLMV0, "", "last V0 release", srcVLLMV0, "vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc",
		"vllm:gpu_prefix_cache_hit_rate", "vllm:cpu_prefix_cache_hit_rate", "vllm:avg_prompt_throughput_toks_per_s", "vllm:avg_generation_throughput_toks_per_s",
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc")
	t.add("vllm", Counter, lVLLMV0, "", "last V0 release", srcVLLMV0, "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total")
	t.add("vllm", Histogram, lVLLMV0, "", "last V0 release", srcVLLMV0, "vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
		"vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_queue_time_seconds", "vllm:model_forward_time_milliseconds", "vllm:model_execute_time_milliseconds")
	// vLLM's HTTP server (prometheus_fastapi_instrumentator).
	t.add("vllm", Counter, []string{"handler", "method", "status"}, "", "", srcInstrumentate, "http_requests_total")
	t.add("vllm", Histogram, []string{"handler", "method"}, "", "", srcInstrumentate, "http_request_duration_seconds", "http_request_duration_highr_seconds")
	t.add("vllm", Summary, []string{"handler"}, "", "", srcInstrumentate, "http_request_size_bytes", "http_response_size_bytes")

	// SGLang scheduler.
	t.add("sglang", Gauge, lSGLSched, "", "", srcSGLang, "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_grammar_queue_reqs",
		"sglang:gen_throughput", "sglang:cache_hit_rate", "sglang:token_usage", "sglang:num_used_tokens", "sglang:max_total_num_tokens", "sglang:utilization",
		"sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:decode_sum_seq_lens")
	// Created without multiprocess_mode: prometheus_client's default "all"
	// adds a pid label in multiprocess exposition.
	t.add("sglang", Gauge, with(lSGLSched, "pid"), "", "", srcSGLang, "sglang:num_retracted_reqs", "sglang:num_paused_reqs")
	t.add("sglang", Gauge, lSGLSched, "", "", srcSGLang, "sglang:full_token_usage", "sglang:swa_token_usage", "sglang:mamba_usage",
		"sglang:kv_available_tokens", "sglang:kv_evictable_tokens", "sglang:kv_used_tokens",
		"sglang:swa_available_tokens", "sglang:swa_evictable_tokens", "sglang:swa_used_tokens",
		"sglang:mamba_available_tokens", "sglang:mamba_evictable_tokens", "sglang:mamba_used_tokens",
		"sglang:max_total_num_tokens_swa", "sglang:page_size", "sglang:num_pages", "sglang:context_len",
		"sglang:kv_cache_memory_usage_gb", "sglang:weight_memory_usage_gb", "sglang:startup_available_gpu_memory_gb",
		"sglang:max_running_requests_under_SLO", "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs",
		"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs", "sglang:pending_prealloc_token_usage",
		"sglang:fwd_occupancy", "sglang:new_token_ratio", "sglang:is_cuda_graph", "sglang:spec_cap_length", "sglang:spec_block_accept_length",
		"sglang:spec_num_steps", "sglang:spec_num_draft_tokens", "sglang:num_unique_running_routing_keys",
		"sglang:lora_pool_slots_used", "sglang:lora_pool_slots_total", "sglang:lora_pool_utilization",
		"sglang:hicache_host_used_tokens", "sglang:hicache_host_total_tokens", "sglang:num_streaming_sessions", "sglang:streaming_session_held_tokens",
		"sglang:eplb_balancedness")
	t.add("sglang", Gauge, with(lSGLSched, "phase"), "", "", srcSGLang, "sglang:graph_memory_usage_gb")
	t.add("sglang", Gauge, lSGLSched, "", "@44cedc2b9c7d", srcSGLang, "sglang:num_prefill_prealloc_queue_reqs")
	t.add("sglang", Info, []string{"page_size", "num_pages"}, "", "@44cedc2b9c7d", srcSGLang, "sglang:cache_config_info")
	t.add("sglang", Counter, lSGLSched, "", "", srcSGLang, "sglang:num_retracted_requests_total", "sglang:num_retracted_input_tokens_total",
		"sglang:num_retracted_output_tokens_total", "sglang:num_bootstrap_failed_reqs_total", "sglang:num_transfer_failed_reqs_total",
		"sglang:num_prefill_retries_total")
	t.add("sglang", Counter, with(lSGLSched, "mode"), "", "", srcSGLang, "sglang:realtime_tokens_total", "sglang:prefill_effective_tokens_total", "sglang:cuda_graph_passes_total")
	t.add("sglang", Counter, with(lSGLSched, "category"), "", "", srcSGLang, "sglang:forward_execution_seconds_total")
	t.add("sglang", Counter, lSGLSched, "", "", srcSGLang, "sglang:estimated_flops_per_gpu_total", "sglang:estimated_read_bytes_per_gpu_total", "sglang:estimated_write_bytes_per_gpu_total")
	t.add("sglang", Histogram, lSGLSched, "", "", srcSGLang, "sglang:kv_transfer_speed_gb_s", "sglang:kv_transfer_latency_ms", "sglang:kv_transfer_bootstrap_ms",
		"sglang:kv_transfer_alloc_ms", "sglang:kv_transfer_total_mb", "sglang:queue_time_seconds", "sglang:routing_key_running_req_count", "sglang:routing_key_all_req_count")
	t.add("sglang", Histogram, with(lSGLSched, "stage"), "", "", srcSGLang, "sglang:per_stage_req_latency_seconds")
	t.add("sglang", Gauge, with(lSGLSched, "source"), "", "", srcSGLang, "sglang:weight_load_duration_seconds")
	// SGLang tokenizer manager.
	t.add("sglang", Counter, lSGLTok, "", "", srcSGLang, "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total",
		"sglang:num_so_requests_total", "sglang:num_aborted_requests_total", "sglang:spec_verify_calls_total")
	t.add("sglang", Counter, with(lSGLTok, "cache_source"), "", "", srcSGLang, "sglang:cached_tokens_total")
	t.add("sglang", Histogram, lSGLTok, "", "", srcSGLang, "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
		"sglang:e2e_request_latency_seconds", "sglang:prompt_tokens_histogram", "sglang:uncached_prompt_tokens_histogram",
		"sglang:generation_tokens_histogram", "sglang:get_loads_duration_seconds")
	t.add("sglang", Gauge, with(lSGLTok, "phase"), "", "", srcSGLang, "sglang:startup_time_seconds")
	// SGLang radix / HiCache / storage collectors.
	t.add("sglang", Counter, lSGLSched, "", "", srcSGLangRadix, "sglang:evicted_tokens_total", "sglang:load_back_bytes_total",
		"sglang:prefetched_tokens_total", "sglang:backuped_tokens_total", "sglang:hicache_backup_bytes_total")
	t.add("sglang", Counter, with(lSGLSched, "pool"), "", "", srcSGLangRadix, "sglang:load_back_tokens_total", "sglang:hicache_backup_tokens_total")
	t.add("sglang", Counter, with(lSGLSched, "reason", "pool"), "", "", srcSGLangRadix, "sglang:hicache_dropped_tokens_total")
	t.add("sglang", Counter, with(lSGLSched, "outcome"), "", "", srcSGLangRadix, "sglang:hicache_prefetch_outcomes_total")
	t.add("sglang", Histogram, lSGLSched, "", "", srcSGLangRadix, "sglang:eviction_duration_seconds", "sglang:load_back_duration_seconds",
		"sglang:hicache_backup_duration_seconds", "sglang:prefetch_pgs", "sglang:backup_pgs", "sglang:prefetch_bandwidth", "sglang:backup_bandwidth")
	// The running-request limit came back in newer collectors: a startup
	// constant per scheduler (so per DP rank), labelled cap_source with what
	// set it (SGLang's test of the startup constants; kvwatch's engine/
	// sglang.go reads it).
	t.add("sglang", Gauge, with(lSGLSched, "cap_source"), "", "", srcSGLang, "sglang:max_running_requests")
	// SGLang, late 2024 (docs sample, legacy dashboard): label model_name,
	// first version label name.
	t.add("sglang", Histogram, []string{"model_name", "name"}, "", "2025 (docs sample)", srcSGLangOld, "sglang:time_per_output_token_seconds", "sglang:func_latency_seconds", "sglang:num_retractions")
	t.add("sglang", Gauge, lSGLOld, "", "first Prometheus version (PR #1853)", srcSGLangOld, "sglang:max_running_requests", "sglang:max_prefill_tokens", "sglang:cached_token",
		"sglang:num_requests_running", "sglang:num_requests_waiting", "sglang:context_len")
	t.add("sglang", Histogram, lSGLOld, "", "first Prometheus version (PR #1853)", srcSGLangOld, "sglang:waiting_request_latency_seconds")

	// SGLang model gateway (smg_) and legacy router (sgl_router_), Rust
	// metrics crate: no _total added by the library, names carry it.
	// Histograms only for names ending in duration_seconds (the buckets
	// the gateway configures); metrics-exporter-prometheus renders every
	// other histogram as a summary.
	l := func(x ...string) []string { return x }
	router := l("router_type", "backend_type", "connection_mode", "model", "endpoint")
	infer := l("router_type", "backend_type", "model", "endpoint")
	t.add("sglang-router", Counter, l("method", "path"), "", "", srcSMG, "smg_http_requests_total")
	t.add("sglang-router", Histogram, l("method", "path"), "", "", srcSMG, "smg_http_request_duration_seconds")
	t.add("sglang-router", Gauge, l("gt", "le"), "", "", srcSMG, "smg_http_inflight_request_age_count")
	t.add("sglang-router", Counter, l("status_code", "error_code"), "", "", srcSMG, "smg_http_responses_total")
	t.add("sglang-router", Gauge, nil, "", "", srcSMG, "smg_http_connections_active", "smg_manual_policy_cache_entries", "smg_mcp_servers_active")
	t.add("sglang-router", Counter, l("result"), "", "", srcSMG, "smg_http_rate_limit_total")
	t.add("sglang-router", Counter, with(router, "streaming"), "", "", srcSMG, "smg_router_requests_total")
	t.add("sglang-router", Histogram, router, "", "", srcSMG, "smg_router_request_duration_seconds")
	t.add("sglang-router", Counter, with(router, "error_type"), "", "", srcSMG, "smg_router_request_errors_total")
	t.add("sglang-router", Histogram, l("router_type", "stage"), "", "", srcSMG, "smg_router_stage_duration_seconds")
	t.add("sglang-router", Counter, l("router_type", "status_code", "error_code"), "", "", srcSMG, "smg_router_upstream_responses_total")
	t.add("sglang-router", Summary, infer, "", "", srcSMG, "smg_router_ttft_seconds", "smg_router_tpot_seconds")
	t.add("sglang-router", Histogram, infer, "", "", srcSMG, "smg_router_generation_duration_seconds")
	t.add("sglang-router", Counter, with(infer, "token_type"), "", "", srcSMG, "smg_router_tokens_total")
	t.add("sglang-router", Gauge, l("worker_type", "connection_mode", "model"), "", "", srcSMG, "smg_worker_pool_size")
	t.add("sglang-router", Gauge, l("worker_type", "connection_mode"), "", "", srcSMG, "smg_worker_connections_active")
	t.add("sglang-router", Gauge, l("worker"), "", "", srcSMG, "smg_worker_requests_active", "smg_worker_routing_keys_active", "smg_worker_health", "smg_worker_http2",
		"smg_worker_cb_state", "smg_worker_cb_consecutive_failures", "smg_worker_cb_consecutive_successes")
	t.add("sglang-router", Counter, l("worker_type", "result"), "", "", srcSMG, "smg_worker_health_checks_total")
	t.add("sglang-router", Counter, l("worker_type", "connection_mode", "model", "policy"), "", "", srcSMG, "smg_worker_selection_total")
	t.add("sglang-router", Counter, l("worker_type", "connection_mode", "error_type"), "", "", srcSMG, "smg_worker_errors_total")
	t.add("sglang-router", Counter, l("branch"), "", "", srcSMG, "smg_manual_policy_branch_total", "smg_consistent_hashing_policy_branch_total", "smg_prefix_hash_policy_branch_total")
	t.add("sglang-router", Counter, l("worker", "from", "to"), "", "", srcSMG, "smg_worker_cb_transitions_total")
	t.add("sglang-router", Counter, l("worker", "outcome"), "", "", srcSMG, "smg_worker_cb_outcomes_total")
	t.add("sglang-router", Counter, l("worker_type", "endpoint"), "", "", srcSMG, "smg_worker_retries_total", "smg_worker_retries_exhausted_total")
	t.add("sglang-router", Summary, l("attempt"), "", "", srcSMG, "smg_worker_retry_backoff_seconds")
	t.add("sglang-router", Counter, l("source", "result"), "", "", srcSMG, "smg_discovery_registrations_total")
	t.add("sglang-router", Counter, l("source", "reason"), "", "", srcSMG, "smg_discovery_deregistrations_total")
	t.add("sglang-router", Histogram, l("source"), "", "", srcSMG, "smg_discovery_sync_duration_seconds")
	t.add("sglang-router", Gauge, l("source"), "", "", srcSMG, "smg_discovery_workers_discovered")
	t.add("sglang-router", Counter, l("model", "tool_name", "result"), "", "", srcSMG, "smg_mcp_tool_calls_total")
	t.add("sglang-router", Histogram, l("model", "tool_name"), "", "", srcSMG, "smg_mcp_tool_duration_seconds")
	t.add("sglang-router", Counter, l("model"), "", "", srcSMG, "smg_mcp_tool_iterations_total")
	t.add("sglang-router", Counter, l("storage_type", "operation", "result"), "", "", srcSMG, "smg_db_operations_total")
	t.add("sglang-router", Histogram, l("storage_type", "operation"), "", "", srcSMG, "smg_db_operation_duration_seconds")
	t.add("sglang-router", Gauge, l("storage_type"), "", "", srcSMG, "smg_db_connections_active")
	t.add("sglang-router", Counter, l("storage_type"), "", "", srcSMG, "smg_db_items_stored")
	t.add("sglang-router", Counter, []string{"route", "method", "status_code", "error_code", "worker", "policy", "worker_type"}, "", "sgl-model-gateway", srcSGLRouter,
		"sgl_router_requests_total", "sgl_router_request_errors_total", "sgl_router_retries_total", "sgl_router_processed_requests_total",
		"sgl_router_policy_decisions_total", "sgl_router_cache_hits_total", "sgl_router_cache_misses_total", "sgl_router_load_balancing_events_total",
		"sgl_router_pd_requests_total", "sgl_router_pd_errors_total", "sgl_router_pd_prefill_requests_total", "sgl_router_pd_decode_requests_total")
	t.add("sglang-router", Histogram, []string{"route", "method"}, "", "sgl-model-gateway", srcSGLRouter, "sgl_router_request_duration_seconds", "sgl_router_pd_request_duration_seconds")
	t.add("sglang-router", Gauge, []string{"worker", "worker_type"}, "", "sgl-model-gateway", srcSGLRouter, "sgl_router_active_workers", "sgl_router_worker_health",
		"sgl_router_worker_load", "sgl_router_tree_size", "sgl_router_max_load", "sgl_router_min_load", "sgl_router_running_requests")

	// llama.cpp server: no labels at all, hand-rolled exposition.
	t.add("llamacpp", Counter, nil, "", "", srcLlamaCpp, "llamacpp:prompt_tokens_total", "llamacpp:prompt_seconds_total",
		"llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total", "llamacpp:n_decode_total", "llamacpp:n_busy_slots_per_decode")
	t.add("llamacpp", Counter, nil, "", "", srcLlamaCpp, "llamacpp:n_tokens_max")
	t.add("llamacpp", Counter, nil, "", "PR #15361", srcLlamaCpp, "llamacpp:n_past_max")
	t.add("llamacpp", Gauge, nil, "", "", srcLlamaCpp, "llamacpp:prompt_tokens_seconds", "llamacpp:predicted_tokens_seconds",
		"llamacpp:requests_processing", "llamacpp:requests_deferred")
	// Exposed by some builds (forks and newer servers that third-party
	// scrapers read); not in the upstream revision above: build-dependent.
	t.add("llamacpp", Counter, nil, "", "", srcLlamaCppBuilds, "llamacpp:prompt_tokens_cached_total",
		"llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_accepted_tokens_total")
	t.add("llamacpp", Gauge, nil, "", "b5440", srcLlamaCppOld, "llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_tokens")
	t.add("llamacpp", Counter, []string{"position"}, "", "", srcLlamaCpp+"; a newer revision's get_metrics", "llamacpp:spec_decode_num_accepted_tokens_per_pos_total")

	// TGI: Rust metrics crate, counters without _total.
	t.add("tgi", Gauge, nil, "", "", srcTGI, "tgi_batch_current_size", "tgi_batch_current_max_tokens", "tgi_batch_max_total_tokens", "tgi_queue_size")
	t.add("tgi", Counter, []string{"reason"}, "", "", srcTGI, "tgi_batch_concat")
	t.add("tgi", Counter, []string{"method"}, "", "", srcTGI, "tgi_batch_inference_count", "tgi_batch_inference_success", "tgi_batch_inference_failure")
	t.add("tgi", Counter, nil, "", "", srcTGI, "tgi_request_count", "tgi_request_success")
	t.add("tgi", Counter, []string{"err"}, "", "", srcTGI, "tgi_request_failure")
	t.add("tgi", Histogram, []string{"method"}, "", "", srcTGI, "tgi_batch_forward_duration", "tgi_batch_decode_duration", "tgi_batch_filter_duration",
		"tgi_batch_inference_duration", "tgi_batch_concat_duration")
	t.add("tgi", Histogram, nil, "", "", srcTGI, "tgi_request_duration", "tgi_request_validation_duration", "tgi_request_queue_duration",
		"tgi_request_inference_duration", "tgi_request_mean_time_per_token_duration", "tgi_request_input_length", "tgi_request_generated_tokens",
		"tgi_request_max_new_tokens", "tgi_batch_next_size")
	t.add("tgi", Summary, nil, "", "", srcTGI, "tgi_request_skipped_tokens")

	// Triton TensorRT-LLM backend custom metrics and Triton core.
	t.add("triton", Gauge, with(lTRT, "request_type"), "23.11", "", srcTriton, "nv_trt_llm_request_metrics")
	t.add("triton", Gauge, with(lTRT, "memory_type"), "23.11", "", srcTriton, "nv_trt_llm_runtime_memory_metrics")
	t.add("triton", Gauge, with(lTRT, "kv_cache_block_type"), "23.11", "", srcTriton, "nv_trt_llm_kv_cache_block_metrics")
	t.add("triton", Counter, with(lTRT, "disaggregated_serving_type"), "", "", srcTriton, "nv_trt_llm_disaggregated_serving_metrics")
	t.add("triton", Gauge, with(lTRT, "inflight_batcher_specific_metric"), "23.11", "", srcTriton, "nv_trt_llm_inflight_batcher_metrics")
	t.add("triton", Gauge, with(lTRT, "v1_specific_metric"), "23.11", "", srcTriton, "nv_trt_llm_v1_metrics")
	t.add("triton", Gauge, with(lTRT, "general_type"), "23.11", "", srcTriton, "nv_trt_llm_general_metrics")
	t.add("triton", Histogram, with(lTRT, "response_metric_type"), "", "", srcTriton, "nv_llm_output_token_len", "nv_llm_input_token_len")
	t.add("triton", Counter, lTRT, "", "", srcTritonCore, "nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
		"nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_compute_input_duration_us",
		"nv_inference_compute_infer_duration_us", "nv_inference_compute_output_duration_us")
	t.add("triton", Gauge, lTRT, "", "", srcTritonCore, "nv_inference_pending_request_count")
	t.add("triton", Gauge, []string{"gpu_uuid"}, "", "", srcTritonCore, "nv_gpu_utilization", "nv_gpu_memory_total_bytes", "nv_gpu_memory_used_bytes",
		"nv_gpu_power_usage", "nv_gpu_power_limit", "nv_energy_consumption")
	t.add("triton", Gauge, nil, "", "", srcTritonCore, "nv_cpu_utilization", "nv_cpu_memory_total_bytes", "nv_cpu_memory_used_bytes", "nv_pinned_memory_pool_total_bytes", "nv_pinned_memory_pool_used_bytes")

	// trtllm-serve (prometheus_client, mounted at /prometheus/metrics).
	t.add("trtllm-serve", Counter, with(lTRTServe, "finished_reason"), "", "", srcTRTLLMServe, "trtllm_request_success_total")
	t.add("trtllm-serve", Histogram, lTRTServe, "", "", srcTRTLLMServe, "trtllm_e2e_request_latency_seconds", "trtllm_time_to_first_token_seconds",
		"trtllm_time_per_output_token_seconds", "trtllm_request_queue_time_seconds", "trtllm_request_prefill_time_seconds", "trtllm_request_decode_time_seconds",
		"trtllm_request_inference_time_seconds", "trtllm_prompt_cached_tokens_per_request", "trtllm_prefill_perplexity", "trtllm_generation_perplexity",
		"trtllm_iteration_latency_seconds", "trtllm_scheduled_batch_size")
	t.add("trtllm-serve", Counter, lTRTServe, "", "", srcTRTLLMServe, "trtllm_prompt_tokens_total", "trtllm_generation_tokens_total",
		"trtllm_prompt_cached_tokens_total", "trtllm_prompt_cache_hit_tokens_total", "trtllm_spec_decode_drafted_tokens_total", "trtllm_spec_decode_accepted_tokens_total",
		"trtllm_kv_cache_reused_blocks_total", "trtllm_kv_cache_missed_blocks_total", "trtllm_kv_cache_iter_reused_blocks_total",
		"trtllm_kv_cache_iter_full_reused_blocks_total", "trtllm_kv_cache_iter_partial_reused_blocks_total", "trtllm_kv_cache_iter_missed_blocks_total",
		"trtllm_kv_cache_gen_alloc_blocks_total", "trtllm_kv_cache_onboard_bytes_total", "trtllm_kv_cache_offload_bytes_total",
		"trtllm_kv_cache_disk_prefetch_blocks_total", "trtllm_kv_cache_intra_device_copy_bytes_total", "trtllm_num_requests_completed_total",
		"trtllm_spec_decode_num_draft_tokens_total", "trtllm_spec_decode_num_accepted_tokens_total")
	t.add("trtllm-serve", Counter, with(lTRTServe, "http_code"), "", "", srcTRTLLMServe, "trtllm_request_error_total")
	t.add("trtllm-serve", Gauge, lTRTServe, "", "", srcTRTLLMServe, "trtllm_kv_cache_hit_rate", "trtllm_kv_cache_utilization",
		"trtllm_kv_cache_host_utilization", "trtllm_kv_cache_iter_reuse_rate", "trtllm_num_requests_running", "trtllm_num_requests_waiting",
		"trtllm_max_num_active_requests", "trtllm_gpu_memory_usage_bytes", "trtllm_cpu_memory_usage_bytes", "trtllm_pinned_memory_usage_bytes",
		"trtllm_max_batch_size_static", "trtllm_max_batch_size_runtime", "trtllm_max_num_tokens_runtime", "trtllm_kv_cache_max_blocks",
		"trtllm_kv_cache_free_blocks", "trtllm_kv_cache_used_blocks", "trtllm_kv_cache_tokens_per_block", "trtllm_num_context_requests",
		"trtllm_num_generation_requests", "trtllm_num_paused_requests", "trtllm_num_scheduled_requests", "trtllm_total_context_tokens",
		"trtllm_avg_decoded_tokens_per_iter", "trtllm_spec_decode_acceptance_length", "trtllm_spec_decode_draft_overhead",
		"trtllm_prefill_batch_occupancy", "trtllm_prefill_batch_tokens")
	t.add("trtllm-serve", Info, nil, "", "", srcTRTLLMServe, "trtllm_model_config_info", "trtllm_parallel_config_info", "trtllm_speculative_config_info", "trtllm_kv_cache_config_info")
	t.add("trtllm-serve", Gauge, lTRTServe, "", "older collector.py revisions", srcTRTLLMServe, "trtllm_server_queue_length", "trtllm_num_active_requests", "trtllm_prefill_num_context_requests")
	t.add("trtllm-serve", Histogram, lTRTServe, "", "older collector.py revisions", srcTRTLLMServe, "trtllm_prompt_cached_tokens")

	// LMDeploy.
	t.add("lmdeploy", Info, lLMDeploy, "0.9.2", "", srcLMDeploy, "lmdeploy:backend_config")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.9.2", "", srcLMDeploy, "lmdeploy:num_requests_running", "lmdeploy:num_requests_waiting", "lmdeploy:gpu_cache_usage_perc")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.9.2", "0.12.0", srcLMDeploy, "lmdeploy:num_requests_finished", "lmdeploy:num_requests_unfinished")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.12.1", "0.12.2", srcLMDeploy, "lmdeploy:num_requests_completed")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.12.1", "", srcLMDeploy, "lmdeploy:num_api_requests_routed", "lmdeploy:num_api_requests_waiting")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.12.3", "", srcLMDeploy, "lmdeploy:num_requests_succeeded", "lmdeploy:num_requests_failed")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.14.0", "", srcLMDeploy, "lmdeploy:prefix_cache_hit_rate")
	t.add("lmdeploy", Counter, lLMDeploy, "0.9.2", "", srcLMDeploy, "lmdeploy:prompt_tokens_total", "lmdeploy:generation_tokens_total")
	t.add("lmdeploy", Counter, lLMDeploy, "0.14.0", "", srcLMDeploy, "lmdeploy:cached_tokens_total",
		"lmdeploy:spec_decode_num_drafts_total", "lmdeploy:spec_decode_num_draft_tokens_total", "lmdeploy:spec_decode_num_accepted_tokens_total")
	t.add("lmdeploy", Counter, with(lLMDeploy, "position"), "0.14.0", "", srcLMDeploy, "lmdeploy:spec_decode_num_accepted_tokens_per_pos_total")
	t.add("lmdeploy", Gauge, lLMDeploy, "0.14.0", "", srcLMDeploy, "lmdeploy:spec_decode_mean_accept_rate", "lmdeploy:spec_decode_mean_accept_length")
	t.add("lmdeploy", Gauge, with(lLMDeploy, "position"), "0.14.0", "", srcLMDeploy, "lmdeploy:spec_decode_per_position_accept_rate")
	t.add("lmdeploy", Counter, with(lLMDeploy, "finished_reason"), "0.9.2", "", srcLMDeploy, "lmdeploy:request_success_total")
	t.add("lmdeploy", Histogram, lLMDeploy, "0.9.2", "", srcLMDeploy, "lmdeploy:request_prompt_tokens", "lmdeploy:request_generation_tokens",
		"lmdeploy:iteration_tokens_total", "lmdeploy:time_to_first_token_seconds", "lmdeploy:time_per_output_token_seconds", "lmdeploy:iter_token_latency",
		"lmdeploy:e2e_request_latency_seconds", "lmdeploy:request_queue_time_seconds", "lmdeploy:request_inference_time_seconds",
		"lmdeploy:request_prefill_time_seconds", "lmdeploy:request_decode_time_seconds")
	t.add("lmdeploy", Histogram, lLMDeploy, "0.14.0", "", srcLMDeploy, "lmdeploy:request_cached_tokens", "lmdeploy:request_cache_hit_ratio")

	// NVIDIA Dynamo.
	t.add("dynamo", Gauge, lDynComp, "", "", srcDynamo, "dynamo_component_inflight_requests")
	t.add("dynamo", Gauge, lDynComp, "", kvstatsRemoval, srcDynamo, "dynamo_component_kvstats_active_blocks", "dynamo_component_kvstats_total_blocks",
		"dynamo_component_kvstats_gpu_cache_usage_percent", "dynamo_component_kvstats_gpu_prefix_cache_hit_rate")
	t.add("dynamo", Gauge, lDynComp, kvstatsRemoval, "", srcDynamoKVStats,
		"dynamo_component_total_blocks", "dynamo_component_gpu_cache_usage_percent")
	t.add("dynamo", Gauge, []string{"model", "dynamo_component"}, "", "", srcDynamoNames, "dynamo_component_model_load_time_seconds")
	t.add("dynamo", Counter, lDynComp, "", "", srcDynamo, "dynamo_component_requests_total", "dynamo_component_request_bytes_total",
		"dynamo_component_response_bytes_total")
	t.add("dynamo", Counter, with(lDynComp, "error_type"), "", "", srcDynamo, "dynamo_component_errors_total")
	t.add("dynamo", Histogram, lDynComp, "", "", srcDynamo, "dynamo_component_request_duration_seconds", "dynamo_component_network_transit_seconds",
		"dynamo_component_time_to_first_response_seconds")
	t.add("dynamo", Counter, with(lDynFront, "endpoint", "request_type", "status", "error_type"), "", "", srcDynamo, "dynamo_frontend_requests_total")
	t.add("dynamo", Gauge, lDynFront, "", "", srcDynamo, "dynamo_frontend_queued_requests", "dynamo_frontend_inflight_requests", "dynamo_frontend_disconnected_clients",
		"dynamo_frontend_model_total_kv_blocks", "dynamo_frontend_model_max_num_seqs", "dynamo_frontend_model_max_num_batched_tokens",
		"dynamo_frontend_model_context_length", "dynamo_frontend_model_kv_cache_block_size", "dynamo_frontend_model_migration_limit")
	t.add("dynamo", Gauge, with(lDynFront, "worker_id", "dp_rank", "worker_type"), "", "", srcDynamo, "dynamo_frontend_worker_active_decode_blocks",
		"dynamo_frontend_worker_active_prefill_tokens", "dynamo_frontend_worker_last_time_to_first_token_seconds",
		"dynamo_frontend_worker_last_input_sequence_tokens", "dynamo_frontend_worker_last_inter_token_latency_seconds",
		"dynamo_frontend_router_queue_pending_requests")
	t.add("dynamo", Histogram, lDynFront, "", "", srcDynamo, "dynamo_frontend_request_duration_seconds", "dynamo_frontend_input_sequence_tokens",
		"dynamo_frontend_output_sequence_tokens", "dynamo_frontend_time_to_first_token_seconds", "dynamo_frontend_inter_token_latency_seconds",
		"dynamo_frontend_cached_tokens", "dynamo_frontend_kv_hit_rate")
	t.add("dynamo", Histogram, with(lDynFront, "operation"), "", "", srcDynamo, "dynamo_frontend_tokenizer_latency_ms")
	t.add("dynamo", Counter, lDynFront, "", "", srcDynamo, "dynamo_frontend_output_tokens_total")
	t.add("dynamo", Counter, with(lDynFront, "migration_type"), "", "", srcDynamo, "dynamo_frontend_model_migration_total")
	t.add("dynamo", Gauge, []string{"router_id"}, "", "", srcDynamoDocs+"; dynamo #6507", "dynamo_component_router_kv_hit_rate")
	t.add("dynamo", Counter, lDynComp, "", "", srcDynamo, "dynamo_component_router_requests_total")
	t.add("dynamo", Histogram, lDynComp, "", "", srcDynamo, "dynamo_component_router_time_to_first_token_seconds",
		"dynamo_component_router_inter_token_latency_seconds", "dynamo_component_router_input_sequence_tokens", "dynamo_component_router_output_sequence_tokens")
	t.add("dynamo", Histogram, []string{"router_id"}, "", "", srcDynamo, "dynamo_router_overhead_block_hashing_ms", "dynamo_router_overhead_indexer_find_matches_ms",
		"dynamo_router_overhead_seq_hashing_ms", "dynamo_router_overhead_scheduling_ms", "dynamo_router_overhead_total_ms")
	t.add("dynamo", Histogram, with(lDynFront, "stage"), "", "", srcDynamo, "dynamo_frontend_stage_duration_seconds")
	t.add("dynamo", Histogram, lDynFront, "", "", srcDynamo, "dynamo_frontend_tokenize_seconds", "dynamo_frontend_template_seconds",
		"dynamo_frontend_detokenize_per_token_us", "dynamo_frontend_event_loop_delay_seconds")
	t.add("dynamo", Counter, lDynFront, "", "", srcDynamo, "dynamo_frontend_event_loop_stall_total")
	// KVBM (the kvbm_ names of prometheus_names.rs mod kvbm).
	t.add("dynamo", Counter, nil, "", "", srcDynamo, "kvbm_offload_blocks_d2h", "kvbm_offload_blocks_h2d", "kvbm_offload_blocks_d2d",
		"kvbm_onboard_blocks_h2d", "kvbm_onboard_blocks_d2d", "kvbm_matched_tokens", "kvbm_offload_blocks_d2o", "kvbm_onboard_blocks_o2d",
		"kvbm_offload_bytes_object", "kvbm_onboard_bytes_object", "kvbm_object_read_failures", "kvbm_object_write_failures")
	t.add("dynamo", Gauge, nil, "", "", srcDynamo, "kvbm_host_cache_hit_rate", "kvbm_disk_cache_hit_rate", "kvbm_object_cache_hit_rate")
	// NVIDIA Dynamo's SLA planner (its own process and /metrics).
	t.add("dynamo-planner", Gauge, nil, plannerRename, "", srcDynamoPlanner, "dynamo_planner_num_prefill_replicas", "dynamo_planner_num_decode_replicas",
		"dynamo_planner_observed_ttft_ms", "dynamo_planner_observed_itl_ms", "dynamo_planner_observed_requests_per_second",
		"dynamo_planner_observed_request_duration_seconds", "dynamo_planner_observed_input_sequence_tokens", "dynamo_planner_observed_output_sequence_tokens",
		"dynamo_planner_predicted_requests_per_second", "dynamo_planner_predicted_input_sequence_tokens", "dynamo_planner_predicted_output_sequence_tokens",
		"dynamo_planner_predicted_num_prefill_replicas", "dynamo_planner_predicted_num_decode_replicas", "dynamo_planner_gpu_hours",
		"dynamo_planner_estimated_ttft_ms", "dynamo_planner_estimated_itl_ms", "dynamo_planner_engine_prefill_capacity_requests_per_second",
		"dynamo_planner_engine_decode_capacity_requests_per_second")
	t.add("dynamo-planner", Gauge, []string{"worker_id", "dp_rank"}, plannerRename, "", srcDynamoPlanner, "dynamo_planner_engine_queued_prefill_tokens",
		"dynamo_planner_engine_queued_decode_kv_tokens", "dynamo_planner_engine_inflight_decode_kv_tokens")
	// prometheus_client's Enum: a gauge per state, the state in a label named as the metric.
	t.add("dynamo-planner", Gauge, []string{"dynamo_planner_load_scaling_decision"}, plannerRename, "", srcDynamoPlanner, "dynamo_planner_load_scaling_decision")
	t.add("dynamo-planner", Gauge, []string{"dynamo_planner_throughput_scaling_decision"}, plannerRename, "", srcDynamoPlanner, "dynamo_planner_throughput_scaling_decision")
	// Dynamo's TensorRT-LLM worker adds these to trtllm-serve's names.
	t.add("trtllm-serve", Counter, lTRTServe, "", "", srcDynamo+" (mod trtllm_additional)", "trtllm_num_aborted_requests_total",
		"trtllm_request_type_image_total", "trtllm_request_type_structured_output_total", "trtllm_kv_transfer_success_total")
	t.add("trtllm-serve", Histogram, lTRTServe, "", "", srcDynamo+" (mod trtllm_additional)", "trtllm_kv_transfer_latency_seconds",
		"trtllm_kv_transfer_bytes", "trtllm_kv_transfer_speed_gb_s")

	// LMCache: the in-process lmcache:* set (deprecated) and the
	// multi-process server's lmcache_mp_* set.
	t.add("lmcache", Counter, lLMCache, "", "", srcLMCache, "lmcache:num_retrieve_requests_total", "lmcache:num_store_requests_total",
		"lmcache:num_lookup_requests_total", "lmcache:num_requested_tokens_total", "lmcache:num_hit_tokens_total", "lmcache:num_lookup_tokens_total",
		"lmcache:num_lookup_hits_total", "lmcache:num_remote_read_requests_total", "lmcache:num_remote_read_bytes_total",
		"lmcache:num_remote_write_requests_total", "lmcache:num_remote_write_bytes_total", "lmcache:local_cpu_evict_count_total",
		"lmcache:local_cpu_evict_keys_count_total", "lmcache:local_cpu_evict_failed_count_total", "lmcache:remote_ping_errors_total",
		"lmcache:remote_ping_successes_total")
	t.add("lmcache", Gauge, lLMCache, "", "", srcLMCache, "lmcache:retrieve_hit_rate", "lmcache:lookup_hit_rate", "lmcache:local_cache_usage",
		"lmcache:remote_cache_usage", "lmcache:local_storage_usage", "lmcache:active_memory_objs_count", "lmcache:pinned_memory_objs_count",
		"lmcache:remote_ping_latency", "lmcache:remote_ping_error_code", "lmcache:local_cpu_hot_cache_count", "lmcache:local_cpu_keys_in_request_count",
		"lmcache:cache_controller_kv_pool_keys_count")
	t.add("lmcache", Histogram, lLMCache, "", "", srcLMCache, "lmcache:time_to_retrieve", "lmcache:time_to_store", "lmcache:retrieve_speed",
		"lmcache:store_speed", "lmcache:remote_time_to_get", "lmcache:remote_time_to_put", "lmcache:remote_time_to_get_sync")
	t.add("lmcache", Gauge, nil, "", "", srcLMCacheMP, "lmcache_mp_l1_usage_ratio", "lmcache_mp_l1_memory_usage_bytes")
	t.add("lmcache", Gauge, []string{"l2_name"}, "", "", srcLMCacheMP, "lmcache_mp_l2_usage_bytes")
	t.add("lmcache", Counter, nil, "", "", srcLMCacheMP, "lmcache_mp_lookup_hit_tokens_total", "lmcache_mp_lookup_requested_tokens_total",
		"lmcache_mp_lookup_hit_l1_tokens_total", "lmcache_mp_lookup_hit_l2_tokens_total")

	// prometheus_client's default collectors (vLLM, SGLang, LMDeploy,
	// trtllm-serve outside multiprocess mode).
	t.add("prometheus_client", Counter, []string{"generation"}, "", "", srcPythonClient, "python_gc_objects_collected_total",
		"python_gc_objects_uncollectable_total", "python_gc_collections_total")
	t.add("prometheus_client", Info, []string{"implementation", "major", "minor", "patchlevel", "version"}, "", "", srcPythonClient, "python_info")
	t.add("prometheus_client", Gauge, nil, "", "", srcPythonClient, "process_virtual_memory_bytes", "process_resident_memory_bytes",
		"process_start_time_seconds", "process_open_fds", "process_max_fds")
	t.add("prometheus_client", Counter, nil, "", "", srcPythonClient, "process_cpu_seconds_total")

	// Series a Prometheus server writes itself.
	t.add("prometheus", Gauge, nil, "", "", srcPrometheus, "up", "scrape_duration_seconds", "scrape_samples_scraped",
		"scrape_samples_post_metric_relabeling", "scrape_series_added")
	t.add("prometheus", Gauge, []string{"alertname", "alertstate"}, "", "", srcPrometheus, "ALERTS", "ALERTS_FOR_STATE")

	t.when("only while an alert is pending or firing", "ALERTS", "ALERTS_FOR_STATE")
	t.when("only with speculative decoding", "vllm:spec_decode_*", "sglang:spec_*", "lmdeploy:spec_decode_*", "trtllm_spec_decode_*", "llamacpp:spec_decode_*")
	t.when("only with LoRA adapters", "vllm:lora_requests_info", "sglang:lora_pool_*")
	t.when("only with the NIXL KV connector (PD disaggregation)", "vllm:nixl_*")
	t.when("only with KV offloading", "vllm:kv_offload_*")
	t.when("only with --kv-cache-metrics", "vllm:kv_block_*")
	t.when("only with hierarchical cache (--enable-hierarchical-cache)", "sglang:hicache_*", "sglang:load_back_*", "sglang:prefetch*", "sglang:backup*", "sglang:backuped_tokens_total")
	t.when("only on PD-disaggregated servers", "sglang:kv_transfer_*", "sglang:num_bootstrap_failed_reqs_total", "sglang:num_transfer_failed_reqs_total", "sglang:num_prefill_retries_total")
	t.when("only for hybrid SWA or Mamba models", "sglang:swa_*", "sglang:mamba_*", "sglang:max_total_num_tokens_swa")
	t.when("only with VLLM_COMPUTE_NANS_IN_LOGITS", "vllm:corrupted_requests_total")
	t.when("only with KVBM (KV block manager) enabled", "kvbm_*")
	t.when("only on PD-disaggregated TensorRT-LLM workers under Dynamo", "trtllm_kv_transfer_*")
	t.when("only with the gRPC router", "smg_router_ttft_seconds", "smg_router_tpot_seconds", "smg_router_tokens_total", "smg_router_generation_duration_seconds")
	return t
}
