package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// lmdeploySpec reads LMDeploy's api_server metrics ("lmdeploy:" prefix, labels
// model_name and engine = DP rank), on by default since v0.11.0 (PR #4108;
// --disable-metrics turns them off). It exports a usage ratio only
// (lmdeploy:gpu_cache_usage_perc, 0–1): capacity and used tokens and
// preemptions are unavailable. The prefix hit comes from
// lmdeploy:cached_tokens_total (v0.14.0, PR #4670) over the prompt tokens of
// the same finished requests, lmdeploy:request_prompt_tokens' _sum: both are
// credited in PrometheusStatLogger.record_finish (prompt_tokens_total is
// credited at the first token, so it is not the denominator); the
// lmdeploy:prefix_cache_hit_rate gauge is not used. With several
// DP ranks and no capacities the server ratio is the plain mean of the
// ranks' ratios (derived); the spread shows the imbalance. The sizes of
// finished requests come from lmdeploy:request_prompt_tokens and
// lmdeploy:request_generation_tokens (histograms observed in
// PrometheusStatLogger.record_finish, lmdeploy/metrics/loggers.py
// @7c8d16f5), summed over the engine (DP) series; without KV tokens there
// is no headroom at that size, only the size.
var lmdeploySpec = Spec{
	Name:         "lmdeploy",
	DisabledHint: "start lmdeploy serve api_server without --disable-metrics (on by default since v0.11.0; older releases need --enable-metrics)",
	Answer:       fastAPINotFound,
	Detect:       []string{lmUsage, lmRunning, lmWaiting},
	Reads:        append([]string{lmPrompt, lmGeneration, lmCached}, histogramNames(lmReqPrompt, lmReqGen)...),
	Normalize:    normalizeLMDeploy,
}

const (
	lmUsage      = "lmdeploy:gpu_cache_usage_perc"
	lmRunning    = "lmdeploy:num_requests_running"
	lmWaiting    = "lmdeploy:num_requests_waiting"
	lmPrompt     = "lmdeploy:prompt_tokens_total"
	lmGeneration = "lmdeploy:generation_tokens_total"
	lmReqPrompt  = "lmdeploy:request_prompt_tokens"
	lmReqGen     = "lmdeploy:request_generation_tokens"
	lmCached     = "lmdeploy:cached_tokens_total"
)

var lmReqSizes = requestHistogramsOf(lmReqPrompt, lmReqGen)

func lmRank(s expo.Sample) kv.RankID { return kv.RankID{DP: s.Labels.Get("engine")} }

// normalizeLMDeploy is lmdeploySpec's Normalize.
func normalizeLMDeploy(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "lmdeploy", Generation: "current"}
	srv.Model = firstLabel(p, "model_name", lmRunning, lmUsage, lmWaiting, lmPrompt)
	r := newRanks()
	gauge := func(name string, field func(*kv.Signals) *kv.Value) {
		r.read(p, name, lmRank, nil, maxf, field, kv.Of)
	}
	counter := func(name string, field func(*kv.Signals) *kv.Value) {
		r.read(p, name, lmRank, nil, sumf, field, kv.Of)
	}
	gauge(lmUsage, func(s *kv.Signals) *kv.Value { return &s.UsageRatio })
	gauge(lmRunning, func(s *kv.Signals) *kv.Value { return &s.Running })
	gauge(lmWaiting, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting })
	counter(lmPrompt, func(s *kv.Signals) *kv.Value { return &s.Counters.PromptTokens })
	counter(lmGeneration, func(s *kv.Signals) *kv.Value { return &s.Counters.GenerationTokens })
	if p.Has(lmCached) && p.Has(lmReqPrompt+"_sum") { // a hit count needs its query count
		counter(lmCached, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixHitTokens })
		counter(lmReqPrompt+"_sum", func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixQueryTokens })
	}
	r.rollup(&srv)
	srv.Finished = finishedSizes(p, lmReqSizes)
	return srv, nil
}
