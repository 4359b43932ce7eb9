package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Engine names of vLLM's engine generations.
const (
	EngineVLLM   = "vllm"    // vLLM V1 (kv_cache_usage_perc, engine label, _created)
	EngineVLLMV0 = "vllm-v0" // vLLM V0 (gpu_cache_usage_perc, gpu_prefix_cache_hit_rate)
)

// VersionVLLMBefore is the vLLM V1 before vllm#38435: no
// num_requests_waiting_by_reason, and cache_config_info without
// kv_cache_size_tokens and kv_cache_max_concurrency (vllm#42206, later);
// its offloading connector writes only the deprecated
// kv_offload_total_bytes (before vllm#35669). VersionCurrent has all.
const VersionVLLMBefore = "before-38435"

// VersionVLLMBefore48860 is vLLM 0.25.1, the last release before vllm#48860
// (a waiting request's prefix-cache lookup no longer counted again on each
// scheduling retry, first in 0.26.0): its page is VersionCurrent's, since
// the fix changed no name; only /version tells them apart. The simulator
// does not reproduce the double count (its waiting requests look nothing
// up).
const VersionVLLMBefore48860 = "before-48860"

// vllmReleases is what each dialect answers on /version. 0.25.1 and 0.26.0
// are the releases around vllm#48860; 0.18.0 stands for a release before
// vllm#38435 (merged 2026-03-28), which kvwatch acts on by name only.
var vllmReleases = map[string]string{VersionCurrent: "0.26.0", VersionVLLMBefore48860: "0.25.1", VersionVLLMBefore: "0.18.0"}

// vllmRoutes serves /version as vLLM's show_version does.
func vllmRoutes(s *server, mux *http.ServeMux) {
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"version": vllmReleases[s.snap.Load().truth.Version]})
	})
}

// vllmEngine is vLLM V1: DP engines, blocks of 16 tokens, native CPU
// offloading or an LMCache server next to it; vllmV0Engine is V0.
var (
	vllmEngine = engine{name: EngineVLLM, render: renderVLLM, dp: true, defaults: serverDefaults{pageSize: 16},
		tiers: tierKeys{host: true, lmcache: true}, metricsOff: fastAPINotFound, versions: []string{VersionCurrent, VersionVLLMBefore48860, VersionVLLMBefore},
		routes: vllmRoutes}
	vllmV0Engine = engine{name: EngineVLLMV0, render: renderVLLMV0, defaults: serverDefaults{pageSize: 16}, metricsOff: fastAPINotFound}
)

// vllmBlocks is num_gpu_blocks as vLLM reports it: the capacity in blocks
// plus the null block (newer BlockPool.get_usage divides by num_gpu_blocks−1).
func vllmBlocks(spec ServerSpec) int64 { return spec.CapacityTokens/spec.PageSize + 1 }

// renderVLLM writes a vLLM V1 /metrics page (vllm/v1/metrics/loggers.py;
// engine-metrics.md §3): labels model_name and engine (one per DP rank),
// counters with _total and _created (prometheus_client in single-process
// mode keeps declaration order and puts le last), cache_config_info with
// string labels.
func renderVLLM(p *snapshot) []byte {
	spec := p.srv.spec
	g, live := p.gauges(), &p.truth
	w := &page{style: pyNum, b: make([]byte, 0, 32<<10)}
	created := float64(p.created.UnixNano()) / 1e9
	// prometheus_client's process collector (the default registry of a
	// single API server) writes the process' start: a restart or an
	// upgrade moves it.
	w.family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge")
	w.sample("process_start_time_seconds", "", float64(p.started.UnixNano())/1e9)
	lbl := make([]string, spec.DP)
	for e := range spec.DP {
		lbl[e] = labels(false, "model_name", spec.ModelName, "engine", strconv.Itoa(e))
	}
	gauge := func(name, help string, v func(r *RankTruth) float64) {
		w.family(name, help, "gauge")
		for e := range spec.DP {
			w.sample(name, lbl[e], v(&g.Ranks[e]))
		}
	}
	counter := func(name, help string, v func(r *RankTruth) float64) {
		w.family(name+"_total", help, "counter")
		for e := range spec.DP {
			w.sample(name+"_total", lbl[e], v(&live.Ranks[e]))
			w.sample(name+"_created", lbl[e], created)
		}
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(r *RankTruth) float64 { return float64(r.Running) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(r *RankTruth) float64 { return float64(r.Queued) })
	// vllm #38435: the waiting queue by reason; the simulator has no LoRA
	// budget or async KV transfer, so nothing is deferred.
	before := p.truth.Version == VersionVLLMBefore
	if !before {
		w.family("vllm:num_requests_waiting_by_reason", "Number of requests waiting to be processed, by reason.", "gauge")
		for e := range spec.DP {
			for _, rs := range []struct {
				reason string
				n      int
			}{{"capacity", g.Ranks[e].Queued}, {"deferred", 0}} {
				w.sample("vllm:num_requests_waiting_by_reason", join(lbl[e], `reason="`+rs.reason+`"`), float64(rs.n))
			}
		}
	}
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func(r *RankTruth) float64 {
		return float64(r.UsedTokens) / float64(r.CapacityTokens)
	})
	counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", func(r *RankTruth) float64 { return float64(r.Counters.PrefixQueriedTokens) })
	counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", func(r *RankTruth) float64 { return float64(r.Counters.PrefixHitTokens) })
	counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", func(r *RankTruth) float64 { return float64(r.Counters.Preemptions) })
	counter("vllm:prompt_tokens", "Number of prefill tokens processed.", func(r *RankTruth) float64 { return float64(r.Counters.PromptTokens) })
	counter("vllm:generation_tokens", "Number of generation tokens processed.", func(r *RankTruth) float64 { return float64(r.Counters.GenerationTokens) })
	w.family("vllm:request_success_total", "Count of successfully processed requests.", "counter")
	for e := range spec.DP {
		c := live.Ranks[e].Counters
		for _, fr := range []struct {
			reason string
			n      int64
		}{{"stop", c.RequestsFinished - c.FinishedLength}, {"length", c.FinishedLength}, {"abort", 0}} {
			l := join(lbl[e], `finished_reason="`+fr.reason+`"`)
			w.sample("vllm:request_success_total", l, float64(fr.n))
			w.sample("vllm:request_success_created", l, created)
		}
	}
	// vllm/v1/metrics: prompt tokens by where their KV came from; the
	// tiers below the GPU (native CPU offloading, an LMCache server) are
	// external_kv_transfer.
	w.family("vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source.", "counter")
	for e := range spec.DP {
		r := &live.Ranks[e]
		for _, src := range []struct {
			name string
			n    int64
		}{{"local_compute", r.Counters.PrefixQueriedTokens - r.Counters.PrefixHitTokens - r.externalHits()},
			{"local_cache_hit", r.Counters.PrefixHitTokens}, {"external_kv_transfer", r.externalHits()}} {
			l := join(lbl[e], `source="`+src.name+`"`)
			w.sample("vllm:prompt_tokens_by_source_total", l, float64(src.n))
			w.sample("vllm:prompt_tokens_by_source_created", l, created)
		}
	}
	w.family("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", "gauge")
	for e := range spec.DP {
		w.sample("vllm:cache_config_info", vllmCacheConfig(spec, strconv.Itoa(e), !before), 1)
	}
	for _, f := range []struct {
		name, help string
		h          func(h hists) *histogram
	}{
		{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", func(h hists) *histogram { return h.ttft }},
		{"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", func(h hists) *histogram { return h.itl }},
		{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", func(h hists) *histogram { return h.e2e }},
		{"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", func(h hists) *histogram { return h.queueTime }},
		{"vllm:request_prompt_tokens", "Number of prefill tokens processed.", func(h hists) *histogram { return h.prompt }},
		{"vllm:request_generation_tokens", "Number of generation tokens processed.", func(h hists) *histogram { return h.gen }},
	} {
		w.family(f.name, f.help, "histogram")
		for e := range spec.DP {
			w.histogram(f.name, lbl[e], f.h(p.hists[e]), false, created)
		}
	}
	if spec.CPUOffloadTokens > 0 {
		renderVLLMOffload(w, live, lbl, created, !before)
	}
	return w.b
}

// renderVLLMOffload writes the native offloading connector's traffic per
// engine (vllm/distributed/kv_transfer/kv_connector/v1/offloading/
// metrics.py, OffloadPromMetrics): the host tier's hits loaded CPU → GPU
// and its backups stored GPU → CPU, in bytes. The deprecated
// total_bytes{transfer_type} is registered first and, after vllm #35669
// (flat), incremented beside kv_offload_{load,store}_bytes with the same
// values; before it, it is the only one.
func renderVLLMOffload(w *page, live *Truth, lbl []string, created float64, flat bool) {
	host := func(e int) *HostTruth {
		if h := live.Ranks[e].Host; h != nil {
			return h
		}
		return &HostTruth{}
	}
	const total = "vllm:kv_offload_total_bytes"
	w.family(total+"_total", "Number of bytes offloaded by KV connector", "counter")
	for e := range lbl {
		for _, t := range []struct {
			transfer string
			n        int64
		}{{"CPU_to_GPU", host(e).LoadedBytes}, {"GPU_to_CPU", host(e).StoredBytes}} {
			l := join(lbl[e], `transfer_type="`+t.transfer+`"`)
			w.sample(total+"_total", l, float64(t.n))
			w.sample(total+"_created", l, created)
		}
	}
	if !flat {
		return
	}
	for _, f := range []struct {
		name, help string
		n          func(h *HostTruth) int64
	}{
		{"vllm:kv_offload_load_bytes", "Total bytes loaded from offload storage to GPU.", func(h *HostTruth) int64 { return h.LoadedBytes }},
		{"vllm:kv_offload_store_bytes", "Total bytes stored from GPU to offload storage.", func(h *HostTruth) int64 { return h.StoredBytes }},
	} {
		w.family(f.name+"_total", f.help, "counter")
		for e := range lbl {
			w.sample(f.name+"_total", lbl[e], float64(f.n(host(e))))
			w.sample(f.name+"_created", lbl[e], created)
		}
	}
}

// vllmCacheConfig renders cache_config_info's labels: CacheConfig fields as
// strings, unset ones "None"; engine is "" for V0 (no engine label); size:
// kv_cache_size_tokens and kv_cache_max_concurrency (vllm#42206).
func vllmCacheConfig(spec ServerSpec, engine string, size bool) string {
	kv := []string{"block_size", strconv.FormatInt(spec.PageSize, 10), "cache_dtype", "auto", "calculate_kv_scales", "False",
		"cpu_offload_gb", "0", "enable_prefix_caching", pyBool(*spec.PrefixCaching), "gpu_memory_utilization", "0.9",
		"is_attention_free", "False", "num_cpu_blocks", "None", "num_gpu_blocks", strconv.FormatInt(vllmBlocks(spec), 10),
		"num_gpu_blocks_override", "None", "sliding_window", "None", "swap_space_bytes", "4294967296"}
	if engine != "" && spec.CPUOffloadTokens > 0 {
		kv = append(kv, "kv_offloading_backend", "native")
	}
	if engine != "" {
		kv = append(kv, "engine", engine)
		if size {
			kv = append(kv, "kv_cache_size_tokens", strconv.FormatInt(spec.CapacityTokens, 10),
				"kv_cache_max_concurrency", string(pyFloat(nil, float64(spec.CapacityTokens)/float64(spec.ContextLength))))
		}
		kv = append(kv, "prefix_caching_hash_algo", "sha256")
	} else {
		// V0: usage = 1 − free/num_gpu_blocks, no null block.
		set := func(k, v string) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					kv[i+1] = v
				}
			}
		}
		set("num_cpu_blocks", "9362")
		set("num_gpu_blocks", strconv.FormatInt(spec.CapacityTokens/spec.PageSize, 10))
	}
	return labels(true, kv...)
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// renderVLLMV0 writes a vLLM V0 page (vllm/engine/metrics.py, as in the
// aibrix capture): label model_name only, gpu_cache_usage_perc, prefix hit
// rate as a gauge (−1 when prefix caching is off), no _created series.
func renderVLLMV0(p *snapshot) []byte {
	spec := p.srv.spec
	g, live := p.gauges(), &p.truth
	w := &page{style: pyNum, b: make([]byte, 0, 16<<10)}
	l := labels(true, "model_name", spec.ModelName)
	r, lr := &g.Ranks[0], &live.Ranks[0]
	w.b = append(w.b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"...)
	w.sample("vllm:cache_config_info", vllmCacheConfig(spec, "", false), 1)
	one := func(name, help, typ string, v float64) {
		w.family(name, help, typ)
		w.sample(name, l, v)
	}
	hit := -1.0
	if *spec.PrefixCaching {
		hit = 0
		if q := lr.Counters.PrefixQueriedTokens; q > 0 {
			hit = float64(lr.Counters.PrefixHitTokens) / float64(q)
		}
	}
	one("vllm:num_requests_running", "Number of requests currently running on GPU.", "gauge", float64(r.Running))
	one("vllm:num_requests_swapped", "Number of requests swapped to CPU.", "gauge", 0)
	one("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge", float64(r.Queued))
	one("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", "gauge", float64(r.UsedTokens)/float64(r.CapacityTokens))
	one("vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", "gauge", 0)
	one("vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", "gauge", -1)
	one("vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", "gauge", hit)
	one("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", "counter", float64(lr.Counters.Preemptions))
	one("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "counter", float64(lr.Counters.PromptTokens))
	one("vllm:generation_tokens_total", "Number of generation tokens processed.", "counter", float64(lr.Counters.GenerationTokens))
	w.family("vllm:request_success_total", "Count of successfully processed requests.", "counter")
	w.sample("vllm:request_success_total", labels(true, "finished_reason", "stop", "model_name", spec.ModelName), float64(lr.Counters.RequestsFinished-lr.Counters.FinishedLength))
	w.sample("vllm:request_success_total", labels(true, "finished_reason", "length", "model_name", spec.ModelName), float64(lr.Counters.FinishedLength))
	h := p.hists[0]
	for _, f := range []struct {
		name, help string
		h          *histogram
	}{
		{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", h.ttft},
		{"vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", h.itl},
		{"vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", h.e2e},
		{"vllm:request_prompt_tokens", "Number of prefill tokens processed.", h.prompt},
		{"vllm:request_generation_tokens", "Number of generation tokens processed.", h.gen},
	} {
		w.family(f.name, f.help, "histogram")
		w.histogram(f.name, l, f.h, true, 0)
	}
	return w.b
}
