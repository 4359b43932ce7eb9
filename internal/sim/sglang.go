package sim

import (
	"math"
	"strconv"
)

// Engine names of SGLang's metric generations.
const (
	EngineSGLang       = "sglang"        // SGLang, current metric generation (kv_*_tokens, tp_rank, ...)
	EngineSGLangLegacy = "sglang-legacy" // SGLang before kv_*_tokens (num_used_tokens, cache_config_info)
)

// Versions of the current SGLang generation (servers[].version): current
// (the bootstrap queue's name of sglang#24341, the text format whatever the
// scraper asks: the simulator's page before it had versions), 0.5.16 (the
// same names with prometheus_client 0.23 or later, whose answer to an
// OpenMetrics Accept escapes colon names to underscores unless the scraper
// asks for escaping=allow-utf-8: openmetrics.go), and the one before
// sglang#24341 (num_prefill_prealloc_queue_reqs, the text format).
const (
	VersionCurrent      = "current"
	VersionSGLang0516   = "0.5.16"
	VersionSGLangBefore = "before-24341"
)

// sglangEngine is SGLang: prefill and decode servers, DP attention, either
// metric prefix, HiCache and hybrid models; sglangLegacyEngine the older
// generation of its metrics.
var (
	sglangEngine = engine{name: EngineSGLang, render: renderSGLang, pd: true, dp: true,
		metricPrefixes: []string{"sglang:", "sglang_"}, tiers: tierKeys{hiCache: true, swa: true}, metricsOff: fastAPINotFound,
		versions: []string{VersionCurrent, VersionSGLang0516, VersionSGLangBefore}, client: sglangClient}
	sglangLegacyEngine = engine{name: EngineSGLangLegacy, render: renderSGLang, pd: true, dp: true,
		metricPrefixes: []string{"sglang:", "sglang_"}, metricsOff: fastAPINotFound}
)

// sglangClient is the prometheus_client a version of SGLang serves with.
func sglangClient(version string) pyClient {
	if version == VersionSGLang0516 {
		return pyClient023
	}
	return pyTextOnly
}

// renderSGLang writes an SGLang /metrics page: scheduler families once per
// (dp_rank, tp_rank) as with --enable-metrics-for-all-schedulers (TP
// duplicates carry identical values), tokenizer families once per server.
// Names, HELP and labels follow python/sglang/srt/observability/
// metrics_collector.py (current) and the older collector (legacy); see
// engine-metrics.md §1. prometheus_client runs in multiprocess mode, so
// label names are sorted and there are no _created series.
func renderSGLang(p *snapshot) []byte {
	s := p.srv
	spec := s.spec
	legacy := spec.Engine == EngineSGLangLegacy
	pre := spec.MetricPrefix
	g := p.gauges()
	live := &p.truth
	w := &page{style: pyNum, b: make([]byte, 0, 32<<10)}

	type series struct {
		lbl string
		dp  int
		kv  []string
	}
	var rankSeries []series
	for dp := range spec.DP {
		for tp := range spec.TP {
			kv := []string{"model_name", spec.ModelName, "engine_type", spec.Role, "tp_rank", strconv.Itoa(tp), "pp_rank", "0"}
			if !legacy {
				kv = append(kv, "moe_ep_rank", "0")
			}
			if spec.DP > 1 {
				kv = append(kv, "dp_rank", strconv.Itoa(dp))
			}
			rankSeries = append(rankSeries, series{labels(true, kv...), dp, kv})
		}
	}
	gauge := func(name, help string, v func(r *RankTruth) float64) {
		w.family(pre+name, help, "gauge")
		for _, rs := range rankSeries {
			w.sample(pre+name, rs.lbl, v(&g.Ranks[rs.dp]))
		}
	}
	counter := func(name, help string, v func(r *RankTruth) float64) {
		w.family(pre+name, help, "counter")
		for _, rs := range rankSeries {
			w.sample(pre+name, rs.lbl, v(&live.Ranks[rs.dp]))
		}
	}
	usage := func(r *RankTruth) float64 { return float64(r.UsedTokens) / float64(r.CapacityTokens) }
	pd := func(role string, v func(r *RankTruth) int) func(r *RankTruth) float64 {
		return func(r *RankTruth) float64 {
			if spec.Role != role {
				return 0
			}
			return float64(v(r))
		}
	}

	gauge("num_running_reqs", "The number of running requests.", func(r *RankTruth) float64 { return float64(r.Running) })
	gauge("num_used_tokens", "The number of used tokens.", func(r *RankTruth) float64 { return float64(r.UsedTokens) })
	// token_usage is the max over the full, SWA and Mamba pools.
	gauge("token_usage", "The token usage.", func(r *RankTruth) float64 { return math.Round(max(usage(r), r.swaUsage(), r.mambaUsage())*100) / 100 })
	if !legacy {
		gauge("full_token_usage", "The token usage for full attention layers.", usage)
		gauge("swa_token_usage", "The token usage for SWA layers.", func(r *RankTruth) float64 { return r.swaUsage() })
		gauge("mamba_usage", "The token usage for Mamba layers.", func(r *RankTruth) float64 { return r.mambaUsage() })
		renderHybridCounts(gauge)
		gauge("kv_available_tokens", "Number of free token slots in the KV cache pool.", func(r *RankTruth) float64 { return float64(r.AvailableTokens) })
		gauge("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool.", func(r *RankTruth) float64 { return float64(r.EvictableTokens) })
		gauge("kv_used_tokens", "Number of actively used token slots in the KV cache pool.", func(r *RankTruth) float64 { return float64(r.UsedTokens) })
	}
	gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", func(r *RankTruth) float64 { return float64(r.CapacityTokens) })
	if !legacy {
		gauge("page_size", "KV cache page size in tokens.", func(*RankTruth) float64 { return float64(spec.PageSize) })
		gauge("num_pages", "Number of KV cache pages.", func(r *RankTruth) float64 { return float64(r.CapacityTokens / spec.PageSize) })
	}
	gauge("context_len", "Maximum context length.", func(*RankTruth) float64 { return float64(spec.ContextLength) })
	if !legacy {
		// Newest collectors: each scheduler's resolved running-request cap
		// (per DP rank) and where it came from (docs/planning.md).
		w.family(pre+"max_running_requests", "Maximum running requests", "gauge")
		for _, rs := range rankSeries {
			w.sample(pre+"max_running_requests", labels(true, append(append([]string(nil), rs.kv...), "cap_source", "requested")...), float64(spec.MaxRunningRequests))
		}
	}
	gauge("gen_throughput", "The generation throughput (token/s).", func(r *RankTruth) float64 { return r.GenThroughput })
	gauge("num_queue_reqs", "The number of requests in the waiting queue.", func(r *RankTruth) float64 { return float64(r.Queued) })
	gauge("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", func(*RankTruth) float64 { return 0 })
	gauge("cache_hit_rate", "The prefix cache hit rate.", func(r *RankTruth) float64 {
		if spec.Role == RoleDecode {
			return 0
		}
		return r.LastBatchHitRate
	})
	gauge("decode_sum_seq_lens", "The sum of all sequence lengths in decode.", func(r *RankTruth) float64 { return float64(r.DecodeSumSeqLens) })
	gauge("new_token_ratio", "The new token ratio.", func(*RankTruth) float64 { return 0.3 })
	bootstrapName := "num_prefill_bootstrap_queue_reqs"
	bootstrapHelp := "The number of requests in the prefill bootstrap queue."
	if legacy || p.truth.Version == VersionSGLangBefore {
		bootstrapName = "num_prefill_prealloc_queue_reqs"
		bootstrapHelp = "The number of requests in the prefill prealloc queue."
	}
	gauge(bootstrapName, bootstrapHelp, pd(RolePrefill, func(r *RankTruth) int { return r.PrefillBootstrap }))
	gauge("num_prefill_inflight_queue_reqs", "The number of requests in the prefill inflight queue.", pd(RolePrefill, func(r *RankTruth) int { return r.PrefillInflight }))
	gauge("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue.", pd(RoleDecode, func(r *RankTruth) int { return r.DecodePrealloc }))
	gauge("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue.", pd(RoleDecode, func(r *RankTruth) int { return r.DecodeTransfer }))
	if !legacy {
		gauge("pending_prealloc_token_usage", "The token usage for pending preallocated tokens (not preallocated yet).", func(r *RankTruth) float64 {
			return float64(r.PendingPreallocTokens) / float64(r.CapacityTokens)
		})
		gauge("utilization", "The utilization.", func(*RankTruth) float64 {
			if spec.Role == RolePrefill {
				return -1
			}
			return 0
		})
	}
	// num_retracted_reqs has no multiprocess_mode: prometheus_client adds pid.
	w.family(pre+"num_retracted_reqs", "The number of retracted requests.", "gauge")
	for i, rs := range rankSeries {
		kv := append(append([]string(nil), rs.kv...), "pid", strconv.Itoa(4100+i))
		w.sample(pre+"num_retracted_reqs", labels(true, kv...), float64(g.Ranks[rs.dp].RetractedLastStep))
	}
	if legacy {
		w.family(pre+"cache_config_info", "Information of the cache config", "gauge")
		w.sample(pre+"cache_config_info", labels(true, "page_size", strconv.FormatInt(spec.PageSize, 10), "num_pages", strconv.FormatInt(spec.CapacityTokens/spec.PageSize, 10)), 1)
	} else {
		counter("num_retracted_requests_total", "Total number of retracted requests.", func(r *RankTruth) float64 { return float64(r.Counters.Preemptions) })
		counter("num_retracted_input_tokens_total", "Total number of retracted input tokens.", func(r *RankTruth) float64 { return float64(r.Counters.RetractedInput) })
		counter("num_retracted_output_tokens_total", "Total number of retracted output tokens.", func(r *RankTruth) float64 { return float64(r.Counters.RetractedOutput) })
		counter("evicted_tokens_total", "The number of device KV token slots freed by eviction, regardless of whether the data was backed up to host", func(r *RankTruth) float64 { return float64(r.Counters.EvictedTokens) })
		modes := func(name, help string, kv []string, vals []func(r *RankTruth) float64) {
			w.family(pre+name, help, "counter")
			for i, m := range kv {
				for _, rs := range rankSeries {
					w.sample(pre+name, join(rs.lbl, `mode="`+m+`"`), vals[i](&live.Ranks[rs.dp]))
				}
			}
		}
		modes("realtime_tokens_total", "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
			[]string{"prefill_compute", "prefill_cache", "decode"},
			[]func(r *RankTruth) float64{
				func(r *RankTruth) float64 { return float64(r.Counters.ComputedTokens) },
				func(r *RankTruth) float64 { return float64(r.Counters.PrefixHitTokens) },
				func(r *RankTruth) float64 { return float64(r.Counters.GenerationTokens) },
			})
		modes("prefill_effective_tokens_total", "Effective prefill tokens with retracted-request re-counts excluded. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes)",
			[]string{"device_hit", "host_hit", "storage_hit", "input"},
			[]func(r *RankTruth) float64{
				func(r *RankTruth) float64 { return float64(r.Counters.PrefixHitTokens) },
				func(r *RankTruth) float64 { return float64(r.hostHits()) },
				func(*RankTruth) float64 { return 0 },
				func(r *RankTruth) float64 {
					return float64(r.Counters.PrefixQueriedTokens - r.Counters.PrefixHitTokens - r.hostHits())
				},
			})
		if spec.HiCacheTokens > 0 {
			renderHiCache(gauge, counter, func(name, help, pool string, v func(r *RankTruth) float64) {
				w.family(pre+name, help, "counter")
				for _, rs := range rankSeries {
					w.sample(pre+name, join(rs.lbl, `pool="`+pool+`"`), v(&live.Ranks[rs.dp]))
				}
			})
		}
	}
	w.family(pre+"queue_time_seconds", "Histogram of queueing time in seconds.", "histogram")
	for _, rs := range rankSeries {
		w.histogram(pre+"queue_time_seconds", rs.lbl, p.hists[rs.dp].queueTime, true, 0)
	}

	// Tokenizer manager: one series per server.
	tl := labels(true, "model_name", spec.ModelName, "engine_type", spec.Role)
	c := live.Counters
	w.family(pre+"prompt_tokens_total", "Number of prefill tokens processed.", "counter")
	w.sample(pre+"prompt_tokens_total", tl, float64(c.PromptTokens))
	w.family(pre+"generation_tokens_total", "Number of generation tokens processed.", "counter")
	w.sample(pre+"generation_tokens_total", tl, float64(c.GenerationTokens))
	if legacy {
		w.family(pre+"cached_tokens_total", "Number of cached prompt tokens.", "counter")
		w.sample(pre+"cached_tokens_total", tl, float64(c.PrefixHitTokens))
	} else {
		w.family(pre+"cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage)", "counter")
		w.sample(pre+"cached_tokens_total", join(tl, `cache_source="device"`), float64(c.PrefixHitTokens))
		if live.Host != nil {
			w.sample(pre+"cached_tokens_total", join(tl, `cache_source="host"`), float64(live.Host.HitTokens))
		}
	}
	w.family(pre+"num_requests_total", "Number of requests processed.", "counter")
	w.sample(pre+"num_requests_total", tl, float64(c.RequestsFinished))
	w.family(pre+"num_aborted_requests_total", "Number of requests aborted.", "counter")
	w.sample(pre+"num_aborted_requests_total", tl, 0)
	h := p.serverHists()
	for _, f := range []struct {
		name, help string
		h          *histogram
	}{
		{"time_to_first_token_seconds", "Histogram of time to first token in seconds.", h.ttft},
		{"inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", h.itl},
		{"e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", h.e2e},
		{"prompt_tokens_histogram", "Histogram of prompt token length.", h.prompt},
		{"generation_tokens_histogram", "Histogram of generation token length.", h.gen},
	} {
		w.family(pre+f.name, f.help, "histogram")
		w.histogram(pre+f.name, tl, f.h, true, 0)
	}
	return w.b
}
