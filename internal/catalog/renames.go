package catalog

// The rename table and the table of meaning changes: what `kvwatch check
// queries` reports, with its fix, when a dashboard or rule still queries a
// name an engine renamed, removed or gave another meaning. Each entry cites
// the engine change (PR or commit) it was read from; docs/check-queries.md
// lists them for people.

const (
	srcDynamoKVStats = "ai-dynamo/dynamo lib/bindings/python/src/dynamo/prometheus_names.py@04277994ab15 (class kvstats: total_blocks, gpu_cache_usage_percent); docs PR #5704"
	srcDynamoPlanner = "ai-dynamo/dynamo components/src/dynamo/planner/monitoring/planner_metrics.py@0aa0682bfbdc (PREFIX dynamo_planner; before #8078: prefix planner:)"
	srcSGLangUsage   = "sgl-project/sglang python/sglang/srt/observability/metrics_collector.py (token_usage = max over pools since #22555; full_token_usage since #19982)"

	kvstatsRemoval = "#5704 (2026-01: the kvstats_ gauges removed)"
	plannerRename  = "#8078 (2026-04: planner metrics renamed dynamo_planner_*)"
)

// renames is the rename table (see Rename).
func renames() []Rename {
	return []Rename{
		{Engine: "vllm", Old: "vllm:gpu_cache_usage_perc", New: "vllm:kv_cache_usage_perc", Version: "0.9.2 (deprecated; hidden in 0.11, removed in 0.12)", Since: "0.9.2", Removed: "0.12.0", Source: srcVLLMLoggers},
		{Engine: "vllm", Old: "vllm:gpu_prefix_cache_queries_total", New: "vllm:prefix_cache_queries_total", Version: "0.9.2 (deprecated; removed in 0.12)", Since: "0.9.2", Removed: "0.12.0", Note: "counted blocks, not tokens, in 0.8.x", Source: srcVLLMLoggers},
		{Engine: "vllm", Old: "vllm:gpu_prefix_cache_hits_total", New: "vllm:prefix_cache_hits_total", Version: "0.9.2 (deprecated; removed in 0.12)", Note: "counted blocks, not tokens, in 0.8.x", Source: srcVLLMLoggers},
		{Engine: "vllm", Old: "vllm:gpu_prefix_cache_hit_rate", New: "", Version: "V1 engine (0.8+)", Note: "use rate(vllm:prefix_cache_hits_total[5m]) / rate(vllm:prefix_cache_queries_total[5m])", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:cpu_prefix_cache_hit_rate", New: "", Version: "V1 engine (0.8+)", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:cpu_cache_usage_perc", New: "", Version: "V1 engine (0.8+)", Note: "V1 has no CPU swap space", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:num_requests_swapped", New: "", Version: "V1 engine (0.8+)", Note: "V1 recomputes instead of swapping", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:avg_prompt_throughput_toks_per_s", New: "", Version: "V1 engine (0.8+)", Note: "use rate(vllm:prompt_tokens_total[1m])", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:avg_generation_throughput_toks_per_s", New: "", Version: "V1 engine (0.8+)", Note: "use rate(vllm:generation_tokens_total[1m])", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:time_per_output_token_seconds", New: "vllm:inter_token_latency_seconds", Version: "0.11 (deprecated; hidden in 0.12, removed in 0.13)", Source: srcVLLMLoggers},
		{Engine: "vllm", Old: "vllm:model_forward_time_milliseconds", New: "", Version: "V1 engine (0.8+)", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:model_execute_time_milliseconds", New: "", Version: "V1 engine (0.8+)", Source: srcVLLMV0},
		{Engine: "vllm", Old: "vllm:kv_offload_total_bytes_total", New: "", Version: "#35669", Deprecated: true, Note: "split into vllm:kv_offload_store_bytes_total (transfer_type GPU_to_CPU) and vllm:kv_offload_load_bytes_total (CPU_to_GPU)", Source: srcVLLMOffload},
		{Engine: "vllm", Old: "vllm:kv_offload_total_time_total", New: "", Version: "#35669", Deprecated: true, Note: "split into vllm:kv_offload_store_time_total (transfer_type GPU_to_CPU) and vllm:kv_offload_load_time_total (CPU_to_GPU)", Source: srcVLLMOffload},
		{Engine: "sglang", Old: "sglang:num_prefill_prealloc_queue_reqs", New: "sglang:num_prefill_bootstrap_queue_reqs", Version: "#24341 (collector @016d8605e458; the old name @44cedc2b9c7d)", Source: srcSGLang},
		{Engine: "sglang", Old: "sglang:cache_config_info", New: "", Version: "collector @016d8605e458", Note: "its labels page_size and num_pages became the gauges sglang:page_size and sglang:num_pages", Source: srcSGLang},
		{Engine: "sglang", Old: "sglang:num_requests_running", New: "sglang:num_running_reqs", Version: "after the first Prometheus version (PR #1853, label name)", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:num_requests_waiting", New: "sglang:num_queue_reqs", Version: "after the first Prometheus version (PR #1853, label name)", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:time_per_output_token_seconds", New: "sglang:inter_token_latency_seconds", Version: "after the late-2024 collector (docs sample @00b08c497f07)", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:func_latency_seconds", New: "", Version: "after the late-2024 collector (docs sample @00b08c497f07)", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:num_retractions", New: "", Version: "collector @016d8605e458", Note: "closest current: rate(sglang:num_retracted_requests_total[5m])", Source: srcSGLang},
		{Engine: "sglang", Old: "sglang:cached_token", New: "", Version: "after the first Prometheus version (PR #1853)", Note: "closest current: the counter sglang:cached_tokens_total", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:max_prefill_tokens", New: "", Version: "after the first Prometheus version (PR #1853)", Source: srcSGLangOld},
		{Engine: "sglang", Old: "sglang:waiting_request_latency_seconds", New: "", Version: "after the first Prometheus version (PR #1853)", Note: "closest current: the histogram sglang:queue_time_seconds", Source: srcSGLangOld},
		{Engine: "sglang-router", Old: "sgl_router_requests_total", New: "smg_router_requests_total", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_request_errors_total", New: "smg_router_request_errors_total", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_request_duration_seconds", New: "smg_router_request_duration_seconds", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_retries_total", New: "smg_worker_retries_total", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_worker_health", New: "smg_worker_health", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_active_workers", New: "", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Note: "closest in the gateway: smg_worker_pool_size", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_worker_load", New: "", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Note: "closest in the gateway: smg_worker_requests_active", Source: srcSMG},
		{Engine: "sglang-router", Old: "sgl_router_processed_requests_total", New: "", Version: "sgl-router → sgl-model-gateway (smg_ prefix)", Note: "closest in the gateway: smg_worker_selection_total", Source: srcSMG},
		{Engine: "llamacpp", Old: "llamacpp:kv_cache_usage_ratio", New: "", Version: "PR #13660 (after b5440)", Note: "llama.cpp's /metrics has no KV gauge since; read /slots", Source: srcLlamaCppOld},
		{Engine: "llamacpp", Old: "llamacpp:kv_cache_tokens", New: "", Version: "PR #13660 (after b5440)", Note: "llama.cpp's /metrics has no KV gauge since; read /slots", Source: srcLlamaCppOld},
		{Engine: "llamacpp", Old: "llamacpp:n_past_max", New: "llamacpp:n_tokens_max", Version: "PR #15361", Source: srcLlamaCpp},
		{Engine: "lmdeploy", Old: "lmdeploy:num_requests_finished", New: "lmdeploy:num_requests_completed", Version: "0.12.1", Source: srcLMDeploy},
		{Engine: "lmdeploy", Old: "lmdeploy:num_requests_unfinished", New: "", Version: "0.12.1", Note: "the same change added lmdeploy:num_api_requests_routed and lmdeploy:num_api_requests_waiting", Source: srcLMDeploy},
		{Engine: "lmdeploy", Old: "lmdeploy:num_requests_completed", New: "", Version: "0.12.3", Note: "split into lmdeploy:num_requests_succeeded and lmdeploy:num_requests_failed", Source: srcLMDeploy},
		{Engine: "dynamo", Old: "dynamo_component_kvstats_total_blocks", New: "dynamo_component_total_blocks", Version: kvstatsRemoval, Source: srcDynamoKVStats},
		{Engine: "dynamo", Old: "dynamo_component_kvstats_gpu_cache_usage_percent", New: "dynamo_component_gpu_cache_usage_percent", Version: kvstatsRemoval, Source: srcDynamoKVStats},
		{Engine: "dynamo", Old: "dynamo_component_kvstats_active_blocks", New: "dynamo_frontend_worker_active_decode_blocks", Version: kvstatsRemoval,
			Differs: "the frontend's count of the decode blocks it routed to each worker_id and dp_rank, not the worker's own count; or dynamo_component_gpu_cache_usage_percent × dynamo_component_total_blocks", Source: srcDynamoKVStats},
		{Engine: "dynamo", Old: "dynamo_component_kvstats_gpu_prefix_cache_hit_rate", New: "", Version: kvstatsRemoval,
			Note: "closest: the router's predicted hit rate dynamo_component_router_kv_hit_rate (dynamo #6507), or the engine's own prefix-cache counters", Source: srcDynamoKVStats},
		{Engine: "dynamo-planner", Old: "planner:num_p_workers", New: "dynamo_planner_num_prefill_replicas", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:num_d_workers", New: "dynamo_planner_num_decode_replicas", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_ttft", New: "dynamo_planner_observed_ttft_ms", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_itl", New: "dynamo_planner_observed_itl_ms", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_request_rate", New: "dynamo_planner_observed_requests_per_second", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_request_duration", New: "dynamo_planner_observed_request_duration_seconds", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_isl", New: "dynamo_planner_observed_input_sequence_tokens", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:observed_osl", New: "dynamo_planner_observed_output_sequence_tokens", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:predicted_request_rate", New: "dynamo_planner_predicted_requests_per_second", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:predicted_isl", New: "dynamo_planner_predicted_input_sequence_tokens", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:predicted_osl", New: "dynamo_planner_predicted_output_sequence_tokens", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:predicted_num_p", New: "dynamo_planner_predicted_num_prefill_replicas", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:predicted_num_d", New: "dynamo_planner_predicted_num_decode_replicas", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:gpu_hours", New: "dynamo_planner_gpu_hours", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:p_correction_factor", New: "", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "dynamo-planner", Old: "planner:d_correction_factor", New: "", Version: plannerRename, Source: srcDynamoPlanner},
		{Engine: "trtllm-serve", Old: "trtllm_server_queue_length", New: "trtllm_num_requests_waiting", Version: "collector.py@050f80def8df (older revisions: the old name)", Source: srcTRTLLMServe},
		{Engine: "trtllm-serve", Old: "trtllm_num_active_requests", New: "trtllm_num_requests_running", Version: "collector.py@050f80def8df (older revisions: the old name)", Source: srcTRTLLMServe},
		{Engine: "trtllm-serve", Old: "trtllm_prompt_cached_tokens", New: "trtllm_prompt_cached_tokens_per_request", Version: "collector.py@050f80def8df (older revisions: the old name)", Source: srcTRTLLMServe},
		{Engine: "trtllm-serve", Old: "request_success_total", New: "trtllm_request_success_total", Version: "collector.py after @89fd9b74 (metric_prefix trtllm_)", Source: srcTRTLLMOld},
		{Engine: "trtllm-serve", Old: "e2e_request_latency_seconds", New: "trtllm_e2e_request_latency_seconds", Version: "collector.py after @89fd9b74 (metric_prefix trtllm_)", Source: srcTRTLLMOld},
		{Engine: "trtllm-serve", Old: "time_to_first_token_seconds", New: "trtllm_time_to_first_token_seconds", Version: "collector.py after @89fd9b74 (metric_prefix trtllm_)", Source: srcTRTLLMOld},
		{Engine: "trtllm-serve", Old: "time_per_output_token_seconds", New: "trtllm_time_per_output_token_seconds", Version: "collector.py after @89fd9b74 (metric_prefix trtllm_)", Source: srcTRTLLMOld},
		{Engine: "trtllm-serve", Old: "request_queue_time_seconds", New: "trtllm_request_queue_time_seconds", Version: "collector.py after @89fd9b74 (metric_prefix trtllm_)", Source: srcTRTLLMOld},
	}
}

// changes are names an engine kept while their meaning changed: reported
// with what to query instead, never rewritten.
func changes() []Change {
	return []Change{
		{Engine: "sglang", Name: "sglang:token_usage", Version: "#22555", Use: "sglang:full_token_usage",
			Note:   "it is now the largest usage of the full-attention, SWA and Mamba pools, not the KV cache's on a hybrid model; sglang:full_token_usage is the full-attention KV pool alone (SGLang #19982 and later)",
			Source: srcSGLangUsage},
	}
}
