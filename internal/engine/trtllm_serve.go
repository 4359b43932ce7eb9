package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// trtllmServeSpec reads trtllm-serve (TensorRT-LLM's OpenAI server, PyTorch
// backend), whose Prometheus registry is mounted at /prometheus/metrics
// (its /metrics is JSON iteration stats). The usage ratio is
// trtllm_kv_cache_utilization (used / max blocks, direct; needs
// enable_iter_perf_stats); capacity and used in tokens on versions that
// also export trtllm_kv_cache_{max,used}_blocks (or free_blocks) and
// trtllm_kv_cache_tokens_per_block (derived: blocks × tokens per block;
// tensorrt_llm/metrics/collector.py sets them from kvCacheStats
// maxNumBlocks, usedNumBlocks, freeNumBlocks, tokensPerBlock). Further
// pools: see trtllmPools. Names differ between versions: running is
// trtllm_num_active_requests or trtllm_num_requests_running, queued
// trtllm_server_queue_length or trtllm_num_requests_waiting. Prefix hit
// comes from trtllm_prompt_cached_tokens_total over
// trtllm_prompt_tokens_total (per request; needs return_perf_metrics),
// else from the block counters of the iteration stats (PR #12413):
// trtllm_kv_cache_reused_blocks_total over reused + missed blocks, each ×
// tokens per block (derived; a partly reused block counts whole), never
// the lifetime trtllm_kv_cache_hit_rate gauge. The tier traffic counters
// trtllm_kv_cache_{onboard,offload}_bytes_total are the host pool's (see
// trtllmPools); intra_device_copy_bytes_total is not read. No preemption
// counter exists.
var trtllmServeSpec = Spec{
	Name:         "trtllm-serve",
	MetricsPath:  tsMetricsPath,
	DisabledHint: "trtllm-serve serves Prometheus metrics at /prometheus/metrics; KV utilization needs enable_iter_perf_stats: true and prompt counters return_perf_metrics: true in --extra_llm_api_options",
	Detect:       []string{tsUtil, tsMaxBlocks, tsActive, tsRunning, tsQueue, tsWaiting, tsPrompt, tsHitRate},
	Reads:        []string{tsTokensPer, tsPromptCached, tsUsedBlocks, tsFreeBlocks, tsHostUtil, tsTierHits, tsGeneration, tsMaxActive, tsReused, tsMissed, tsOnboard, tsOffload},
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
	tsUsedBlocks   = "trtllm_kv_cache_used_blocks"
	tsFreeBlocks   = "trtllm_kv_cache_free_blocks"
	tsHostUtil     = "trtllm_kv_cache_host_utilization"
	tsTierHits     = "trtllm_prompt_cache_hit_tokens_total"
	tsGeneration   = "trtllm_generation_tokens_total"
	// The KV cache manager's cumulative block reuse counters (kvCacheStats
	// reusedBlocks, missedBlocks, warm-up excluded since PR #12132).
	tsReused = "trtllm_kv_cache_reused_blocks_total"
	tsMissed = "trtllm_kv_cache_missed_blocks_total"
	// The KV cache manager's tier traffic (PR #12413), summed by the
	// collector over window sizes (V1) or pool groups (V2): onboard "Total
	// bytes transferred from host to GPU", offload "from GPU to host".
	// intra_device_copy_bytes_total (blocks copied within the GPU, a
	// partly reused block's copy) crosses no tier and is not read.
	tsOnboard = "trtllm_kv_cache_onboard_bytes_total"
	tsOffload = "trtllm_kv_cache_offload_bytes_total"
	// tsMaxActive is the executor's maxNumActiveRequests: the most requests
	// it runs at once (max_batch_size), the running-request limit.
	tsMaxActive   = "trtllm_max_num_active_requests"
	tsMetricsPath = "/prometheus/metrics"
	// tsHostNote says what the host utilization does not tell.
	tsHostNote   = "trtllm_kv_cache_host_utilization is secondary used / max blocks; with the V2 KV cache manager used counts only blocks pinned during an onboard copy, not how full the host tier is (TensorRT-LLM PR #14544; its evictable-block gauges are iteration stats, not Prometheus names)"
	tsModelLabel = "model_name"
)

// normalizeTRTLLMServe is trtllmServeSpec's Normalize.
func normalizeTRTLLMServe(in Input) (kv.Server, error) {
	p := in.Page
	// "legacy": the older collector's names (num_active_requests,
	// server_queue_length) without any of the current collector's.
	srv := kv.Server{Engine: "trtllm-serve", Generation: "current"}
	if (p.Has(tsActive) || p.Has(tsQueue)) && !(p.Has(tsRunning) || p.Has(tsWaiting) || p.Has(tsMaxBlocks) || p.Has(tsUsedBlocks)) {
		srv.Generation = "legacy"
	}
	srv.Model = firstLabel(p, tsModelLabel, tsUtil, tsActive, tsRunning, tsQueue, tsWaiting, tsPrompt)
	s := &srv.Signals
	s.UsageRatio = single(p, tsUtil, nil, kv.Of)
	per := single(p, tsTokensPer, nil, kv.Of)
	if per.OK() && per.V > 0 {
		maxB := single(p, tsMaxBlocks, nil, kv.Of)
		s.Capacity = maxB.Mul(per)
		used := single(p, tsUsedBlocks, nil, kv.Of)
		if !used.OK() { // max − free, when only the free count is there
			used = maxB.Sub(single(p, tsFreeBlocks, nil, kv.Of))
		}
		s.Used = used.Mul(per)
	}
	s.Running = single(p, tsActive, nil, kv.Of).Or(single(p, tsRunning, nil, kv.Of))
	s.Queued.Waiting = single(p, tsQueue, nil, kv.Of).Or(single(p, tsWaiting, nil, kv.Of))
	s.Counters.PromptTokens = summed(p, tsPrompt, nil, kv.Of)
	s.Counters.GenerationTokens = summed(p, tsGeneration, nil, kv.Of)
	if cached := summed(p, tsPromptCached, nil, kv.Of); cached.OK() && s.Counters.PromptTokens.OK() {
		s.Counters.PrefixHitTokens = cached
		s.Counters.PrefixQueryTokens = s.Counters.PromptTokens
	} else if per.OK() && per.V > 0 {
		reused, missed := summed(p, tsReused, nil, kv.Of), summed(p, tsMissed, nil, kv.Of)
		if reused.OK() && missed.OK() {
			s.Counters.PrefixHitTokens = reused.Mul(per)
			s.Counters.PrefixQueryTokens = kv.DerivedOf(reused.V + missed.V).Mul(per)
		}
	}
	srv.Rollup()
	if m := single(p, tsMaxActive, nil, kv.Of); m.OK() && m.V >= 1 {
		srv.MaxRunning = m
	}
	srv.CachePools = trtllmPools(p)
	return srv, nil
}

// trtllmPools reads the cache tiers below the GPU: the host (secondary)
// pool's utilization, a ratio only (its block counts are not exported),
// and the prompt tokens each tier served from
// trtllm_prompt_cache_hit_tokens_total{cache_level, cache_tier}. The GPU
// levels' hits are in the server's prefix-hit counter with the others
// (trtllm_prompt_cached_tokens_total counts every tier), so they make no
// pool of their own; "Pages already prefetched from disk to host count as
// host" (the collector's help). The host utilization is secondary used /
// max blocks, and with the V2 KV cache manager the used count holds only
// the blocks pinned during an onboard copy (tsHostNote). The host pool's
// traffic: onboard bytes are loads (host → GPU), offload bytes stores
// (GPU → host).
func trtllmPools(p *expo.Page) []kv.CachePool {
	ps := newPools()
	host := poolKey{kv.PoolFull, kv.TierHost, ""}
	ps.read(p, tsHostUtil, fixed(host.typ, host.tier, ""), kv.UnitTokens, pfRatio, nil, maxf, kv.Of)
	ps.read(p, tsOnboard, fixed(host.typ, host.tier, ""), kv.UnitTokens, pfLoadBytes, nil, sumf, kv.Of)
	ps.read(p, tsOffload, fixed(host.typ, host.tier, ""), kv.UnitTokens, pfStoreBytes, nil, sumf, kv.Of)
	ps.setNote(host, tsHostNote)
	ps.read(p, tsTierHits, func(s expo.Sample) (poolKey, bool) {
		switch s.Labels.Get("cache_tier") {
		case "host", "cpu":
			return poolKey{kv.PoolFull, kv.TierHost, ""}, true
		case "disk":
			return poolKey{kv.PoolFull, kv.TierDisk, ""}, true
		}
		return poolKey{}, false
	}, kv.UnitTokens, pfHits, nil, sumf, kv.Of)
	return ps.list(nil)
}
