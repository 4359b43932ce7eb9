package sim

import (
	"net/http"
	"strconv"
)

// EngineTRTLLMServe is TensorRT-LLM's OpenAI server (/prometheus/metrics).
const EngineTRTLLMServe = "trtllm-serve"

// VersionTRTLLMBefore is a tensorrt_llm/metrics/collector.py older than
// @050f80de (the revision read; engine-metrics.md §6.2): running and queued
// under trtllm_num_active_requests and trtllm_server_queue_length, and
// none of the block gauges (max, free, used, tokens per block), the
// block reuse counters, the host utilization, the per-level hits,
// trtllm_max_num_active_requests, trtllm_generation_tokens_total,
// trtllm_num_requests_completed_total or trtllm_kv_cache_config_info.
// VersionCurrent is @050f80de.
const VersionTRTLLMBefore = "before-050f80de"

// trtllmServeEngine is trtllm-serve: its Prometheus registry mounted at
// /prometheus/metrics, its /metrics JSON iteration stats, blocks of 32
// tokens and a host cache below the GPU pool.
var trtllmServeEngine = engine{
	name: EngineTRTLLMServe, render: renderTRTLLMServe, metricsPath: "/prometheus/metrics",
	defaults: serverDefaults{pageSize: 32}, tiers: tierKeys{host: true}, versions: []string{VersionCurrent, VersionTRTLLMBefore},
	routes: func(s *server, mux *http.ServeMux) {
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(trtllmIterStats(s.snap.Load()))
		})
	},
}

// trtllmLabels are the collector's labels (MetricsCollector(labels) in
// tensorrt_llm/serve/openai_server.py), in declaration order.
func trtllmLabels(spec ServerSpec) string {
	return labels(false, "model_name", spec.ModelName, "engine_type", "pytorch")
}

// renderTRTLLMServe writes trtllm-serve's /prometheus/metrics page
// (tensorrt_llm/metrics/collector.py, MetricsCollector @050f80de):
// prometheus_client in single-process mode, labels model_name and
// engine_type, counters with _total and _created.
//
// Iteration stats (enable_iter_perf_stats): running and waiting
// (numActiveRequests, numQueuedRequests), the block gauges (used blocks =
// the rank's used tokens / tokens per block, reusable cached blocks count
// as free), utilization = used / max, the host pool's utilization
// (secondaryUsed / secondaryMax), the per-iteration reuse rate, the reused
// and missed block counters, and the prompt tokens each cache level served
// (iterCachedTokensByLevel: level 0 the GPU, level 1 the host), the host
// tier's onboard and offload bytes (its hits and backups). Request
// stats (return_perf_metrics), credited when a request finishes: prompt,
// generation and cached prompt tokens (its device hit; a host hit is
// credited when it is loaded, a simplification). kv_cache_config_info is
// logged once at startup.
//
// VersionTRTLLMBefore writes the older collector's KV and request
// families only: the prompt and cached prompt counters, the cumulative hit
// rate, the utilization and running and queued under their old names
// (with the current HELP texts: the older ones were not read).
func renderTRTLLMServe(p *snapshot) []byte {
	spec := p.srv.spec
	g, live := p.gauges(), &p.truth
	w := &page{style: pyNum, b: make([]byte, 0, 8<<10)}
	l := trtllmLabels(spec)
	created := float64(p.created.UnixNano()) / 1e9
	r, lr := &g.Ranks[0], &live.Ranks[0]
	block := spec.PageSize
	gauge := func(name, help string, v float64) {
		w.family(name, help, "gauge")
		w.sample(name, l, v)
	}
	counter := func(name, help string, v float64) {
		w.family(name+"_total", help, "counter")
		w.sample(name+"_total", l, v)
		w.sample(name+"_created", l, created)
	}
	maxBlocks := r.CapacityTokens / block
	used := r.UsedTokens / block
	hitRate := cumulativeRate(lr.Counters.ReusedBlocks, lr.Counters.MissedBlocks)
	util := float64(used) / float64(maxBlocks)
	const cachedHelp = "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process restarts, not when the KV cache is flushed or evicted."
	cached := float64(lr.Counters.FinishedHitTokens + lr.hostHits())
	counter("trtllm_prompt_tokens", "Cumulative number of prompt (input) tokens processed.", float64(lr.Counters.FinishedPromptTokens))
	if p.truth.Version == VersionTRTLLMBefore {
		counter("trtllm_prompt_cached_tokens", cachedHelp, cached)
		gauge("trtllm_kv_cache_hit_rate", "KV cache hit rate", hitRate)
		gauge("trtllm_kv_cache_utilization", "KV cache utilization", util)
		gauge("trtllm_num_active_requests", "Number of active requests", float64(r.Running))
		gauge("trtllm_server_queue_length", "Number of queued requests", float64(r.Queued))
		return w.b
	}
	counter("trtllm_generation_tokens", "Cumulative number of generation (output) tokens produced.", float64(lr.Counters.FinishedGenerationTokens))
	gauge("trtllm_kv_cache_hit_rate", "KV cache hit rate", hitRate)
	counter("trtllm_kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)", float64(lr.Counters.ReusedBlocks))
	counter("trtllm_kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)", float64(lr.Counters.MissedBlocks))
	gauge("trtllm_kv_cache_utilization", "KV cache utilization", util)
	if r.Host != nil && r.Host.CapacityTokens > 0 {
		gauge("trtllm_kv_cache_host_utilization", "KV cache host (secondary) pool utilization",
			float64(r.Host.UsedTokens/block)/float64(r.Host.CapacityTokens/block))
	}
	gauge("trtllm_kv_cache_iter_reuse_rate", "Per-iteration KV cache block reuse rate", r.IterReuseRate)
	// The host tier's traffic: log_iteration_stats increments these only by
	// a positive sum, so a counter never incremented has no sample.
	if h := lr.Host; h != nil {
		for _, f := range []struct {
			name, help string
			n          int64
		}{
			{"trtllm_kv_cache_onboard_bytes", "Total bytes transferred from host to GPU (onboard)", h.LoadedBytes},
			{"trtllm_kv_cache_offload_bytes", "Total bytes transferred from GPU to host (offload)", h.StoredBytes},
		} {
			if f.n > 0 {
				counter(f.name, f.help, float64(f.n))
			}
		}
	}
	gauge("trtllm_num_requests_running", "Number of active requests", float64(r.Running))
	gauge("trtllm_num_requests_waiting", "Number of queued requests", float64(r.Queued))
	counter("trtllm_num_requests_completed", "Total number of completed requests across iterations", float64(lr.Counters.RequestsFinished))
	gauge("trtllm_max_num_active_requests", "Maximum number of active requests", float64(spec.MaxRunningRequests))
	gauge("trtllm_kv_cache_max_blocks", "Maximum number of KV cache blocks", float64(maxBlocks))
	gauge("trtllm_kv_cache_free_blocks", "Number of free KV cache blocks", float64(maxBlocks-used))
	gauge("trtllm_kv_cache_used_blocks", "Number of used KV cache blocks", float64(used))
	gauge("trtllm_kv_cache_tokens_per_block", "Number of tokens per KV cache block", float64(block))
	counter("trtllm_prompt_cached_tokens", cachedHelp, cached)
	name := "trtllm_prompt_cache_hit_tokens_total"
	w.family(name, "Process-lifetime total prompt tokens served from each KV cache level. Resets only when the serving process restarts, not when the KV cache is flushed or evicted. cache_level is the index into the configured tier list and cache_tier names the memory backing it, so a deployment with a hot and a cold GPU level reports them as two series sharing the gpu name. Pages already prefetched from disk to host count as host.", "counter")
	levels := []struct {
		tier string
		n    int64
	}{{"gpu", lr.Counters.PrefixHitTokens}}
	if lr.Host != nil {
		levels = append(levels, struct {
			tier string
			n    int64
		}{"host", lr.Host.HitTokens})
	}
	for i, lv := range levels {
		ll := join(l, labels(false, "cache_level", strconv.Itoa(i), "cache_tier", lv.tier))
		w.sample(name, ll, float64(lv.n))
		w.sample("trtllm_prompt_cache_hit_tokens_created", ll, created)
	}
	w.family("trtllm_kv_cache_config_info", "KV cache configuration info", "gauge")
	w.sample("trtllm_kv_cache_config_info", join(l, labels(false, "enable_block_reuse", pyBool(*spec.PrefixCaching),
		"enable_partial_reuse", "True", "free_gpu_memory_fraction", "0.9", "cache_dtype", "auto")), 1)
	return w.b
}

// cumulativeRate is reused / (reused + missed), 0 before any lookup.
func cumulativeRate(reused, missed int64) float64 {
	if reused+missed == 0 {
		return 0
	}
	return float64(reused) / float64(reused+missed)
}

// trtllmIterStats is trtllm-serve's /metrics: a JSON list of the latest
// iteration stats (the fields the collector reads).
func trtllmIterStats(p *snapshot) []byte {
	g := p.gauges()
	r := &g.Ranks[0]
	block := p.srv.spec.PageSize
	maxBlocks, used := r.CapacityTokens/block, r.UsedTokens/block
	b := []byte(`[{"iter":`)
	b = strconv.AppendInt(b, g.Counters.DecodeSteps, 10)
	b = append(b, `,"numActiveRequests":`...)
	b = strconv.AppendInt(b, int64(r.Running), 10)
	b = append(b, `,"numQueuedRequests":`...)
	b = strconv.AppendInt(b, int64(r.Queued), 10)
	b = append(b, `,"maxNumActiveRequests":`...)
	b = strconv.AppendInt(b, int64(p.srv.spec.MaxRunningRequests), 10)
	b = append(b, `,"kvCacheStats":{"maxNumBlocks":`...)
	b = strconv.AppendInt(b, maxBlocks, 10)
	b = append(b, `,"freeNumBlocks":`...)
	b = strconv.AppendInt(b, maxBlocks-used, 10)
	b = append(b, `,"usedNumBlocks":`...)
	b = strconv.AppendInt(b, used, 10)
	b = append(b, `,"tokensPerBlock":`...)
	b = strconv.AppendInt(b, block, 10)
	b = append(b, "}}]\n"...)
	return b
}

// stepReuse keeps trtllm-serve's block reuse stats after the rank's step:
// the prompt blocks found and not found in the device cache at the step's
// admissions, and the reuse rate of the last step that looked blocks up.
func (k *rank) stepReuse() {
	q, h := k.c.prefixQueried-k.lastQueried, k.c.prefixHit-k.lastHit
	k.lastQueried, k.lastHit = k.c.prefixQueried, k.c.prefixHit
	if q <= 0 || k.page <= 0 {
		return
	}
	reused := h / k.page
	missed := (q - h + k.page - 1) / k.page
	k.c.reusedBlocks += reused
	k.c.missedBlocks += missed
	if reused+missed > 0 {
		k.iterReuse = float64(reused) / float64(reused+missed)
	}
}
