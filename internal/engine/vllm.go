package engine

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// vllmSpec reads vLLM's metrics: V1 (kv_cache_usage_perc, an "engine" label per
// DP rank, cache_config_info labels giving capacity) and the older names
// (gpu_cache_usage_perc, gpu_prefix_cache_*; V0 by its own gauges, see
// vllmGeneration).
// vLLM exports no used-token gauge: used is usage × capacity (derived).
var vllmSpec = Spec{
	Name:         "vllm",
	DisabledHint: "vLLM serves /metrics on its API port by default; check the port and that the server is the OpenAI-compatible server",
	Detect:       []string{vlUsage, vlUsageOld, vlRunning, vlWaiting, vlCacheConfig},
	Reads: append([]string{vlHits, vlQueries, vlHitsOld, vlQueriesOld, vlPreemptions, vlPrompt, vlGeneration,
		vlSwapped, vlCPUUsage, vlGPUHitRate, vlAvgPrompt, vlAvgGeneration, vlBySource, vlOffloadCPU, vlWaitingByReason,
		vlSleepState, vlOffloadStore, vlOffloadLoad, vlOffloadTotalOld,
		lcLocalUsage, lcRemoteUsage, lcStorageUsage}, histogramNames(vlReqPrompt, vlReqGen)...),
	Normalize: normalizeVLLM,
}

const (
	vlUsage       = "vllm:kv_cache_usage_perc"
	vlUsageOld    = "vllm:gpu_cache_usage_perc"
	vlCacheConfig = "vllm:cache_config_info"
	vlRunning     = "vllm:num_requests_running"
	vlWaiting     = "vllm:num_requests_waiting"
	vlHits        = "vllm:prefix_cache_hits_total"
	vlQueries     = "vllm:prefix_cache_queries_total"
	vlHitsOld     = "vllm:gpu_prefix_cache_hits_total"
	vlQueriesOld  = "vllm:gpu_prefix_cache_queries_total"
	vlPreemptions = "vllm:num_preemptions_total"
	vlPrompt      = "vllm:prompt_tokens_total"
	vlGeneration  = "vllm:generation_tokens_total"
	// vlWaitingByReason splits num_requests_waiting (vllm #38435):
	// reason="capacity" (in the waiting queue, not yet attempted) and
	// "deferred" (attempted, held back by LoRA budget or async KV transfer);
	// the reasons sum to num_requests_waiting.
	vlWaitingByReason = "vllm:num_requests_waiting_by_reason"

	// Gauges only V0 (the legacy engine, vllm/engine/metrics.py) exported:
	// they tell a V0 page from a V1 one whatever else it lacks.
	vlSwapped       = "vllm:num_requests_swapped"
	vlCPUUsage      = "vllm:cpu_cache_usage_perc"
	vlGPUHitRate    = "vllm:gpu_prefix_cache_hit_rate"
	vlAvgPrompt     = "vllm:avg_prompt_throughput_toks_per_s"
	vlAvgGeneration = "vllm:avg_generation_throughput_toks_per_s"

	// KV offloading (V1, kv_offloading_backend) and the prompt tokens by
	// where their KV came from.
	vlOffloadCPU = "vllm:kv_offload_cpu_cache_usage_perc"
	vlBySource   = "vllm:prompt_tokens_by_source_total"
	// The offload traffic counters (vllm #35669) and the deprecated one
	// they replace (transfer_type label): kvwatch has no traffic signal,
	// so they only tell that the page's server offloads KV to the CPU.
	vlOffloadStore    = "vllm:kv_offload_store_bytes_total"
	vlOffloadLoad     = "vllm:kv_offload_load_bytes_total"
	vlOffloadTotalOld = "vllm:kv_offload_total_bytes_total"

	// vlSleepState is sleep mode's gauge, one series per engine and
	// sleep_state (vllm/v1/metrics/loggers.py): awake 1 while the engine
	// runs; weights_offloaded 1 at sleep level 1, discard_all 1 at level 2.
	// Both levels release the KV cache.
	vlSleepState = "vllm:engine_sleep_state"

	// LMCache's in-process connector metrics on a vLLM page (deprecated in
	// LMCache for its multi-process mode, still what its docs' vLLM page
	// shows): bytes held by its local CPU backend, its remote backend and
	// its local disk.
	lcLocalUsage   = "lmcache:local_cache_usage"
	lcRemoteUsage  = "lmcache:remote_cache_usage"
	lcStorageUsage = "lmcache:local_storage_usage"
)

// vlOffloadNote says why vLLM's CPU offload tier has no fill.
const vlOffloadNote = "vLLM exports no fill or capacity of its CPU offload tier: kv_offload_cpu_cache_usage_perc counts blocks pinned by in-flight transfers (vllm #45737, #47666); the capacity gauges are open PRs"

func vlRank(s expo.Sample) kv.RankID {
	return expo.Memoized(s, vlRankKey, func(l labels.Labels) kv.RankID { return kv.RankID{DP: l.Get("engine")} })
}

var vlRankKey = new(expo.MemoKey)

// labelNumber parses a cache_config_info label; "None", "" and junk are unknown.
func labelNumber(s expo.Sample, name string) (float64, bool) {
	v, err := strconv.ParseFloat(s.Labels.Get(name), 64)
	if err != nil || !expo.Finite(v) || v <= 0 {
		return 0, false
	}
	return v, true
}

// vllmGeneration names the page's generation: "v0" when any gauge only the
// V0 engine exported is present (whether or not it has a usage gauge or an
// engine label: early V1 pages lack the label too), "legacy" for V1 before
// the 0.9.2 rename (gpu_cache_usage_perc or gpu_prefix_cache_* without
// kv_cache_usage_perc or prefix_cache_queries_total), else "current".
func vllmGeneration(p *expo.Page) string {
	for _, n := range []string{vlSwapped, vlCPUUsage, vlGPUHitRate, vlAvgPrompt, vlAvgGeneration} {
		if p.Has(n) {
			return "v0"
		}
	}
	if !p.Has(vlUsage) && !p.Has(vlQueries) && (p.Has(vlUsageOld) || p.Has(vlQueriesOld)) {
		return "legacy"
	}
	return "current"
}

// normalizeVLLM is vllmSpec's Normalize.
func normalizeVLLM(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "vllm", Generation: vllmGeneration(p)}
	srv.Model = firstLabel(p, "model_name", vlRunning, vlUsage, vlUsageOld, vlWaiting)
	r := newRanks()
	gauge := func(name string, field func(*kv.Signals) *kv.Value) bool {
		return r.read(p, name, vlRank, nil, maxf, field, kv.Of)
	}
	counter := func(name string, field func(*kv.Signals) *kv.Value) bool {
		return r.read(p, name, vlRank, nil, sumf, field, kv.Of)
	}
	if !gauge(vlUsage, func(s *kv.Signals) *kv.Value { return &s.UsageRatio }) {
		gauge(vlUsageOld, func(s *kv.Signals) *kv.Value { return &s.UsageRatio })
	} else {
		mixedDialect(p, &srv, vlUsageOld, vlUsage, vlRank, nil, maxf)
	}
	gauge(vlRunning, func(s *kv.Signals) *kv.Value { return &s.Running })
	if !gauge(vlWaiting, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting }) {
		// A page without the total (a filtered scrape, a build that drops
		// it) still has the queue as the sum of its reasons.
		r.read(p, vlWaitingByReason, vlRank, nil, sumf, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting }, kv.DerivedOf)
	}
	counter(vlPreemptions, func(s *kv.Signals) *kv.Value { return &s.Counters.Preemptions })
	counter(vlPrompt, func(s *kv.Signals) *kv.Value { return &s.Counters.PromptTokens })
	counter(vlGeneration, func(s *kv.Signals) *kv.Value { return &s.Counters.GenerationTokens })
	hits, queries := vlHits, vlQueries
	if !p.Has(vlQueries) {
		hits, queries = vlHitsOld, vlQueriesOld
	}
	if p.Has(hits) && p.Has(queries) {
		counter(hits, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixHitTokens })
		counter(queries, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixQueryTokens })
	}
	if hits == vlHits {
		mixedDialect(p, &srv, vlHitsOld, vlHits, vlRank, nil, sumf)
		mixedDialect(p, &srv, vlQueriesOld, vlQueries, vlRank, nil, sumf)
	}

	// Capacity per engine from cache_config_info's string labels. A series
	// without an engine label (older versions) applies to every engine.
	caps := map[string]kv.Value{}
	for _, s := range p.Samples(vlCacheConfig) {
		var c kv.Value
		if t, ok := labelNumber(s, "kv_cache_size_tokens"); ok {
			c = kv.Of(t)
		} else if b, ok := labelNumber(s, "num_gpu_blocks"); ok {
			if bs, ok := labelNumber(s, "block_size"); ok {
				c = kv.DerivedOf(b * bs)
			}
		}
		if c.OK() {
			caps[s.Labels.Get("engine")] = c
		}
	}
	if len(caps) > 0 {
		if r.len() == 0 {
			r.get(kv.RankID{})
		}
		// vLLM 0.11 labels cache_config_info with its engine while a
		// single-engine page's other families carry no engine label: one
		// engine's capacity is the unlabelled rank's.
		var only kv.Value
		if len(caps) == 1 {
			for _, c := range caps {
				only = c
			}
		}
		r.each(func(id kv.RankID, s *kv.Signals) {
			c, ok := caps[id.DP]
			if !ok {
				c, ok = caps[""]
			}
			if !ok && id.DP == "" && only.OK() {
				c, ok = only, true
			}
			if ok {
				s.Capacity = c
			}
		})
	}
	vllmAsleep(p, r, &srv)
	r.rollup(&srv)
	srv.ContextLength = vllmContextLength(p)
	srv.CachePools = vllmPools(p)
	srv.Finished = finishedSizes(p, vlReqSizes)
	return srv, nil
}

// vllmContextLength is max_model_len out of cache_config_info (vllm
// #42206): kv_cache_max_concurrency is kv_cache_size_tokens over
// max_model_len, so their quotient, rounded to a token, is the context
// length (derived); the largest over engines. Unknown when either label is
// missing, "None" or not above 0.
func vllmContextLength(p *expo.Page) kv.Value {
	var out kv.Value
	for _, s := range p.Samples(vlCacheConfig) {
		size, ok := labelNumber(s, "kv_cache_size_tokens")
		conc, ok2 := labelNumber(s, "kv_cache_max_concurrency")
		if !ok || !ok2 {
			continue
		}
		if c := math.Round(size / conc); c >= 1 && expo.Finite(c) && (!out.OK() || c > out.V) {
			out = kv.DerivedOf(c)
		}
	}
	return out
}

// vllmPools reads vLLM's tiers below the GPU.
//
// V0's swap space (cache_config_info num_cpu_blocks × block_size, in
// tokens; cpu_cache_usage_perc, 0–1) holds the KV of preempted requests
// swapped out to host memory: a host pool.
//
// V1's KV offloading (cache_config_info kv_offloading_backend set, or any
// kv_offload family on the page) is a host pool whose fill and capacity
// stay unavailable (see vlOffloadNote); with the "native" backend the
// prompt tokens whose KV came from it are
// prompt_tokens_by_source{source="external_kv_transfer"} (with another
// backend or a PD connector that source is not a cache tier and is not
// read).
//
// LMCache in-process metrics: local_cache_usage is its L1 (local CPU
// backend), local_storage_usage and remote_cache_usage its L2 backends
// "local_disk" and "remote", all in bytes used; an L2 backend is listed
// only when it holds something (LMCache writes 0 for backends not
// configured). Their capacities are not exported.
func vllmPools(p *expo.Page) []kv.CachePool {
	ps := newPools()
	host := poolKey{kv.PoolFull, kv.TierHost, ""}
	backend := ""
	for _, s := range p.Samples(vlCacheConfig) {
		if b := s.Labels.Get("kv_offloading_backend"); b != "" && b != "None" {
			backend = b
		}
		if vllmGeneration(p) != "v0" {
			continue
		}
		if b, ok := labelNumber(s, "num_cpu_blocks"); ok {
			if bs, ok := labelNumber(s, "block_size"); ok {
				ps.set(host, kv.UnitTokens, pfCapacity, vlRank(s), kv.DerivedOf(b*bs), maxf)
			}
		}
	}
	if vllmGeneration(p) == "v0" {
		ps.read(p, vlCPUUsage, fixed(host.typ, host.tier, ""), kv.UnitTokens, pfRatio, vlRank, maxf, kv.Of)
		ps.setNote(host, "V0 swap space: the KV of preempted requests swapped out to host memory")
	} else if backend != "" || p.Has(vlOffloadCPU) || p.Has(vlOffloadStore) || p.Has(vlOffloadLoad) || p.Has(vlOffloadTotalOld) {
		ps.add(host, kv.UnitTokens)
		ps.setNote(host, vlOffloadNote)
		if backend == "native" {
			ps.read(p, vlBySource, func(s expo.Sample) (poolKey, bool) {
				return host, s.Labels.Get("source") == "external_kv_transfer"
			}, kv.UnitTokens, pfHits, vlRank, sumf, kv.Of)
		}
	}
	lmcacheInProcess(p, ps)
	return ps.list(nil)
}

// lmcacheInProcess adds LMCache's in-process pools (see vllmPools).
func lmcacheInProcess(p *expo.Page, ps *pools) {
	rank := func(s expo.Sample) kv.RankID { return kv.RankID{DP: s.Labels.Get("worker_id")} }
	ps.read(p, lcLocalUsage, fixed(kv.PoolFull, kv.TierLMCacheL1, ""), kv.UnitBytes, pfUsed, rank, maxf, kv.Of)
	for _, b := range []struct{ name, backend string }{{lcStorageUsage, "local_disk"}, {lcRemoteUsage, "remote"}} {
		for _, s := range p.Samples(b.name) {
			if expo.Finite(s.Value) && s.Value > 0 {
				ps.read(p, b.name, fixed(kv.PoolFull, kv.TierLMCacheL2, b.backend), kv.UnitBytes, pfUsed, rank, maxf, kv.Of)
				break
			}
		}
	}
}

// vllmAsleep makes the KV values of every asleep engine unavailable (sleep
// mode released its KV cache: it is not 0 % full, and its capacity holds
// nothing) and says so on srv. An engine is asleep when its awake series
// is 0 or its weights_offloaded or discard_all series is 1; a page
// without the gauge, or an engine without its series, is awake.
func vllmAsleep(p *expo.Page, r *ranks, srv *kv.Server) {
	asleep := map[string]string{}
	for _, s := range p.Samples(vlSleepState) {
		if !expo.Finite(s.Value) {
			continue
		}
		switch st := s.Labels.Get("sleep_state"); {
		case st == "awake" && s.Value == 0:
			if asleep[vlRank(s).DP] == "" {
				asleep[vlRank(s).DP] = "asleep"
			}
		case (st == "weights_offloaded" || st == "discard_all") && s.Value == 1:
			asleep[vlRank(s).DP] = st
		}
	}
	if len(asleep) == 0 {
		return
	}
	names := make([]string, 0, len(asleep))
	for dp, st := range asleep {
		if dp == "" {
			names = append(names, st)
		} else {
			names = append(names, "engine "+dp+" "+st)
		}
	}
	sort.Strings(names)
	r.each(func(id kv.RankID, s *kv.Signals) {
		if _, ok := asleep[id.DP]; ok {
			s.Capacity, s.Used, s.Evictable, s.UsageRatio = kv.Value{}, kv.Value{}, kv.Value{}, kv.Value{}
		}
	})
	srv.Explain(kv.UnknownAsleep, "KV unavailable: the engine is asleep (%s): vLLM's sleep mode released its KV cache (vllm:engine_sleep_state)", strings.Join(names, ", "))
}
