package engine

import (
	"github.com/kvwatch/kvwatch/internal/kv"
)

// trtllmServeSpec reads trtllm-serve (TensorRT-LLM's OpenAI server, PyTorch
// backend), whose Prometheus registry is mounted at /prometheus/metrics
// (its /metrics is JSON iteration stats). The usage ratio is
// trtllm_kv_cache_utilization (used / max blocks, direct; needs
// enable_iter_perf_stats); capacity only on versions that also export
// trtllm_kv_cache_max_blocks and trtllm_kv_cache_tokens_per_block (derived,
// used = ratio × capacity). Names differ between versions: running is
// trtllm_num_active_requests or trtllm_num_requests_running, queued
// trtllm_server_queue_length or trtllm_num_requests_waiting. Prefix hit
// comes from trtllm_prompt_cached_tokens_total over
// trtllm_prompt_tokens_total (never the lifetime trtllm_kv_cache_hit_rate
// gauge). No preemption and no generation-token counter exist.
var trtllmServeSpec = Spec{
	Name:         "trtllm-serve",
	MetricsPath:  tsMetricsPath,
	DisabledHint: "trtllm-serve serves Prometheus metrics at /prometheus/metrics; KV utilization needs enable_iter_perf_stats: true and prompt counters return_perf_metrics: true in --extra_llm_api_options",
	Detect:       []string{tsUtil, tsMaxBlocks, tsActive, tsRunning, tsQueue, tsWaiting, tsPrompt, tsHitRate},
	Reads:        []string{tsTokensPer, tsPromptCached},
	Normalize:    normalizeTRTLLMServe,
}

const (
	tsUtil         = "trtllm_kv_cache_utilization"
	tsMaxBlocks    = "trtllm_kv_cache_max_blocks"
	tsTokensPer    = "trtllm_kv_cache_tokens_per_block"
	tsActive       = "trtllm_num_active_requests"
	tsRunning      = "trtllm_num_requests_running"
	tsQueue        = "trtllm_server_queue_length"
	tsWaiting      = "trtllm_num_requests_waiting"
	tsPrompt       = "trtllm_prompt_tokens_total"
	tsPromptCached = "trtllm_prompt_cached_tokens_total"
	tsHitRate      = "trtllm_kv_cache_hit_rate"
	tsMetricsPath  = "/prometheus/metrics"
	tsModelLabel   = "model_name"
)

// normalizeTRTLLMServe is trtllmServeSpec's Normalize.
func normalizeTRTLLMServe(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "trtllm-serve", Generation: "current"}
	if p.Has(tsRunning) || p.Has(tsWaiting) || p.Has(tsMaxBlocks) {
		srv.Generation = "gie"
	}
	srv.Model = firstLabel(p, tsModelLabel, tsUtil, tsActive, tsRunning, tsQueue, tsWaiting, tsPrompt)
	s := &srv.Signals
	s.UsageRatio = single(p, tsUtil, nil, kv.Of)
	if per := single(p, tsTokensPer, nil, kv.Of); per.OK() && per.V > 0 {
		s.Capacity = single(p, tsMaxBlocks, nil, kv.Of).Mul(per)
	}
	s.Running = single(p, tsActive, nil, kv.Of).Or(single(p, tsRunning, nil, kv.Of))
	s.Queued.Waiting = single(p, tsQueue, nil, kv.Of).Or(single(p, tsWaiting, nil, kv.Of))
	s.Counters.PromptTokens = summed(p, tsPrompt, nil, kv.Of)
	if cached := summed(p, tsPromptCached, nil, kv.Of); cached.OK() && s.Counters.PromptTokens.OK() {
		s.Counters.PrefixHitTokens = cached
		s.Counters.PrefixQueryTokens = s.Counters.PromptTokens
	}
	srv.Rollup()
	return srv, nil
}
