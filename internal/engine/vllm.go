package engine

import (
	"strconv"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// VLLM reads vLLM's metrics: V1 (kv_cache_usage_perc, an "engine" label per
// DP rank, cache_config_info labels giving capacity) and the older names
// (gpu_cache_usage_perc, gpu_prefix_cache_*; V0 without the engine label).
// vLLM exports no used-token gauge: used is usage × capacity (derived).
type VLLM struct{}

const (
	vlUsage        = "vllm:kv_cache_usage_perc"
	vlUsageOld     = "vllm:gpu_cache_usage_perc"
	vlCacheConfig  = "vllm:cache_config_info"
	vlRunning      = "vllm:num_requests_running"
	vlWaiting      = "vllm:num_requests_waiting"
	vlHits         = "vllm:prefix_cache_hits_total"
	vlQueries      = "vllm:prefix_cache_queries_total"
	vlHitsOld      = "vllm:gpu_prefix_cache_hits_total"
	vlQueriesOld   = "vllm:gpu_prefix_cache_queries_total"
	vlPreemptions  = "vllm:num_preemptions_total"
	vlPrompt       = "vllm:prompt_tokens_total"
	vlGeneration   = "vllm:generation_tokens_total"
	vlModelContext = "vllm:max_model_len" // not exported by vLLM today; read if a build adds it
)

// Name implements Adapter.
func (VLLM) Name() string { return "vllm" }

// DisabledHint implements DisabledHint.
func (VLLM) DisabledHint() string {
	return "vLLM serves /metrics on its API port by default; check the port and that the server is the OpenAI-compatible server"
}

// MetricNames implements Adapter.
func (VLLM) MetricNames() []string {
	return append([]string{vlUsage, vlUsageOld, vlCacheConfig, vlRunning, vlWaiting, vlHits, vlQueries,
		vlHitsOld, vlQueriesOld, vlPreemptions, vlPrompt, vlGeneration}, histogramNames(vlReqPrompt, vlReqGen)...)
}

// Detect implements Adapter.
func (VLLM) Detect(p *expo.Page) bool {
	for _, n := range []string{vlUsage, vlUsageOld, vlRunning, vlWaiting, vlCacheConfig} {
		if p.Has(n) {
			return true
		}
	}
	return false
}

func vlRank(s expo.Sample) kv.RankID { return kv.RankID{DP: s.Labels.Get("engine")} }

// labelNumber parses a cache_config_info label; "None", "" and junk are unknown.
func labelNumber(s expo.Sample, name string) (float64, bool) {
	v, err := strconv.ParseFloat(s.Labels.Get(name), 64)
	if err != nil || !expo.Finite(v) || v <= 0 {
		return 0, false
	}
	return v, true
}

// Normalize implements Adapter.
func (VLLM) Normalize(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "vllm", Generation: "current"}
	if !p.Has(vlUsage) && p.Has(vlUsageOld) {
		srv.Generation = "legacy"
		if firstLabel(p, "engine", vlUsageOld, vlRunning) == "" {
			srv.Generation = "v0"
		}
	}
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
	}
	gauge(vlRunning, func(s *kv.Signals) *kv.Value { return &s.Running })
	gauge(vlWaiting, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting })
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
		if len(r.order) == 0 {
			r.get(kv.RankID{})
		}
		for _, id := range r.order {
			c, ok := caps[id.DP]
			if !ok {
				c, ok = caps[""]
			}
			if ok {
				r.get(id).Capacity = c
			}
		}
	}
	srv.Ranks = r.list()
	srv.Rollup()
	srv.Finished = finishedSizes(p, vlReqPrompt, vlReqGen)
	return srv, nil
}
