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
	// The offloading connector's traffic counters (vllm #35669): bytes
	// stored GPU → CPU and loaded CPU → GPU. The deprecated one they
	// replace, total_bytes{transfer_type="GPU_to_CPU"|"CPU_to_GPU"}, is
	// still written with the same increments beside them during the
	// migration: it is read only on a page without the new names.
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
	vllmSourceHits(p, r, !(p.Has(hits) && p.Has(queries)))

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

// Prompt tokens by where their KV came from (vllm #33290,
// vllm/v1/metrics/stats.py PromptTokenStats): local_compute (computed),
// local_cache_hit (found in the GPU prefix cache: the tokens
// prefix_cache_hits_total counts) and external_kv_transfer (loaded by the
// KV connector).
const (
	vlSourceLocal    = "local_cache_hit"
	vlSourceExternal = "external_kv_transfer"
)

// vllmSourceHits reads prompt_tokens_by_source into the prefix-hit
// counters. Without prefix_cache_{hits,queries}_total (fallback) the hits
// are local_cache_hit and the queries every source summed (derived). Where
// the external source is the server's own CPU offload tier
// (vllmOwnOffload), its tokens are hits of that tier and are added to the
// hits, as SGLang's hit counter counts every tier: derived. Any other
// connector's transfers (a PD hand-off, LMCache's server) are no hit of
// this server's cache. prompt_tokens_cached_total is local + external
// (less the one token vLLM recomputes when a prompt is cached whole): the
// same tokens as the two sources, never added to them.
func vllmSourceHits(p *expo.Page, r *ranks, fallback bool) {
	source := func(name string) func(expo.Sample) bool {
		return func(s expo.Sample) bool { return s.Labels.Get("source") == name }
	}
	hits := func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixHitTokens }
	if fallback && p.Has(vlBySource) {
		r.read(p, vlBySource, vlRank, source(vlSourceLocal), sumf, hits, kv.Of)
		r.read(p, vlBySource, vlRank, nil, sumf, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixQueryTokens }, kv.DerivedOf)
		r.each(func(_ kv.RankID, s *kv.Signals) { // no hits, no hit ratio
			if !s.Counters.PrefixHitTokens.OK() {
				s.Counters.PrefixQueryTokens = kv.Value{}
			}
		})
	}
	if !vllmOwnOffload(p) {
		return
	}
	// Per engine, onto hits that engine knows: an engine without its
	// local hits gets no partial sum.
	external := map[kv.RankID]float64{}
	for _, s := range p.Samples(vlBySource) {
		if source(vlSourceExternal)(s) && expo.Finite(s.Value) {
			external[vlRank(s)] += s.Value
		}
	}
	r.each(func(id kv.RankID, s *kv.Signals) {
		if e, ok := external[id]; ok && s.Counters.PrefixHitTokens.OK() {
			s.Counters.PrefixHitTokens = kv.DerivedOf(s.Counters.PrefixHitTokens.V + e)
		}
	})
}

// vllmOwnOffload reports whether the page's external KV comes from the
// server's own CPU offload tier: cache_config_info's kv_offloading_backend
// is "native" (vLLM's OffloadingConnector, the connector whose counters
// are kv_offload_*).
func vllmOwnOffload(p *expo.Page) bool { return vllmOffloadBackend(p) == "native" }

// vllmOffloadBackend is cache_config_info's kv_offloading_backend, "" when
// unset ("None") or absent.
func vllmOffloadBackend(p *expo.Page) string {
	backend := ""
	for _, s := range p.Samples(vlCacheConfig) {
		if b := s.Labels.Get("kv_offloading_backend"); b != "" && b != "None" {
			backend = b
		}
	}
	return backend
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
// read). Its traffic: kv_offload_load_bytes_total (CPU → GPU) and
// kv_offload_store_bytes_total (GPU → CPU), else the deprecated
// kv_offload_total_bytes_total by transfer_type (see vllmOffloadTraffic).
//
// LMCache in-process metrics: local_cache_usage is its L1 (local CPU
// backend), local_storage_usage and remote_cache_usage its L2 backends
// "local_disk" and "remote", all in bytes used; an L2 backend is listed
// only when it holds something (LMCache writes 0 for backends not
// configured). Their capacities are not exported.
func vllmPools(p *expo.Page) []kv.CachePool {
	ps := newPools()
	host := poolKey{kv.PoolFull, kv.TierHost, ""}
	v0 := vllmGeneration(p) == "v0"
	for _, s := range p.Samples(vlCacheConfig) {
		if !v0 {
			continue
		}
		if b, ok := labelNumber(s, "num_cpu_blocks"); ok {
			if bs, ok := labelNumber(s, "block_size"); ok {
				ps.set(host, kv.UnitTokens, pfCapacity, vlRank(s), kv.DerivedOf(b*bs), maxf)
			}
		}
	}
	if v0 {
		ps.read(p, vlCPUUsage, fixed(host.typ, host.tier, ""), kv.UnitTokens, pfRatio, vlRank, maxf, kv.Of)
		ps.setNote(host, "V0 swap space: the KV of preempted requests swapped out to host memory")
	} else if vllmOffloadBackend(p) != "" || p.Has(vlOffloadCPU) || p.Has(vlOffloadStore) || p.Has(vlOffloadLoad) || p.Has(vlOffloadTotalOld) {
		ps.add(host, kv.UnitTokens)
		ps.setNote(host, vlOffloadNote)
		if vllmOwnOffload(p) {
			ps.read(p, vlBySource, func(s expo.Sample) (poolKey, bool) {
				return host, s.Labels.Get("source") == vlSourceExternal
			}, kv.UnitTokens, pfHits, vlRank, sumf, kv.Of)
		}
		vllmOffloadTraffic(p, ps, host)
	}
	lmcacheInProcess(p, ps)
	return ps.list(nil)
}

// vllmOffloadTraffic reads the offloading connector's bytes into the host
// pool (vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py):
// kv_offload_load_bytes_total ("Total bytes loaded from offload storage to
// GPU") and kv_offload_store_bytes_total ("Total bytes stored from GPU to
// offload storage"), per engine. A page without either (before vllm
// #35669) has only kv_offload_total_bytes_total{transfer_type}, src_to_dst
// of the offloading mediums: CPU_to_GPU is a load, GPU_to_CPU a store,
// any other pair no traffic of the CPU tier. The newer connector writes the
// deprecated counter beside the new ones with the same increments, so it is
// never added to them.
func vllmOffloadTraffic(p *expo.Page, ps *pools, host poolKey) {
	if p.Has(vlOffloadLoad) || p.Has(vlOffloadStore) {
		ps.read(p, vlOffloadLoad, fixed(host.typ, host.tier, host.name), kv.UnitTokens, pfLoadBytes, vlRank, sumf, kv.Of)
		ps.read(p, vlOffloadStore, fixed(host.typ, host.tier, host.name), kv.UnitTokens, pfStoreBytes, vlRank, sumf, kv.Of)
		return
	}
	for _, t := range []struct {
		transfer string
		field    int
	}{{"CPU_to_GPU", pfLoadBytes}, {"GPU_to_CPU", pfStoreBytes}} {
		ps.read(p, vlOffloadTotalOld, func(s expo.Sample) (poolKey, bool) {
			return host, s.Labels.Get("transfer_type") == t.transfer
		}, kv.UnitTokens, t.field, vlRank, sumf, kv.Of)
	}
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
