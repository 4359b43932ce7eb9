package engine

import (
	"strings"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// SGLang reads SGLang's scheduler and tokenizer metrics, every generation:
// current (kv_used_tokens, kv_available_tokens, kv_evictable_tokens,
// full_token_usage, tp/dp/pp rank labels), legacy (num_used_tokens,
// token_usage, engine_type label) and the first one (label "name"), with
// either the "sglang:" or "sglang_" prefix (expo.Canonical folds them).
type SGLang struct{}

// SGLang sample names (canonical form).
const (
	sgUsed            = "sglang:kv_used_tokens"
	sgAvailable       = "sglang:kv_available_tokens"
	sgEvictable       = "sglang:kv_evictable_tokens"
	sgCapacity        = "sglang:max_total_num_tokens"
	sgFullUsage       = "sglang:full_token_usage"
	sgTokenUsage      = "sglang:token_usage"
	sgNumUsed         = "sglang:num_used_tokens"
	sgContextLen      = "sglang:context_len"
	sgRunning         = "sglang:num_running_reqs"
	sgQueue           = "sglang:num_queue_reqs"
	sgBootstrapQ      = "sglang:num_prefill_bootstrap_queue_reqs"
	sgPrefillPreallQ  = "sglang:num_prefill_prealloc_queue_reqs" // older name of the bootstrap queue
	sgInflightQ       = "sglang:num_prefill_inflight_queue_reqs"
	sgPreallocQ       = "sglang:num_decode_prealloc_queue_reqs"
	sgTransferQ       = "sglang:num_decode_transfer_queue_reqs"
	sgPendingPrealloc = "sglang:pending_prealloc_token_usage"
	sgRetracted       = "sglang:num_retracted_requests_total"
	sgEffective       = "sglang:prefill_effective_tokens_total"
	sgRealtime        = "sglang:realtime_tokens_total"
	sgCached          = "sglang:cached_tokens_total"
	sgPrompt          = "sglang:prompt_tokens_total"
	sgGeneration      = "sglang:generation_tokens_total"
)

// Name implements Adapter.
func (SGLang) Name() string { return "sglang" }

// DisabledHint implements DisabledHint.
func (SGLang) DisabledHint() string { return "start SGLang with --enable-metrics" }

// MetricNames implements Adapter.
func (SGLang) MetricNames() []string {
	return append([]string{sgUsed, sgAvailable, sgEvictable, sgCapacity, sgFullUsage, sgTokenUsage,
		sgNumUsed, sgContextLen, sgRunning, sgQueue, sgBootstrapQ, sgPrefillPreallQ, sgInflightQ,
		sgPreallocQ, sgTransferQ, sgPendingPrealloc, sgRetracted, sgEffective, sgRealtime,
		sgCached, sgPrompt, sgGeneration, sgMaxRunningName}, histogramNames(sgReqPrompt, sgReqGen)...)
}

// Detect implements Adapter: any scheduler gauge of any generation.
func (SGLang) Detect(p *expo.Page) bool {
	for _, n := range []string{sgCapacity, sgTokenUsage, sgNumUsed, sgUsed, sgRunning, sgQueue} {
		if p.Has(n) {
			return true
		}
	}
	return false
}

// sgRank reads the rank labels; ranks absent in older versions stay "".
func sgRank(s expo.Sample) kv.RankID { return rankOf(s, "dp_rank", "tp_rank", "pp_rank") }

// sgTotals keeps the totals series under priority scheduling (priority=""
// or no priority label), dropping the per-priority breakdown.
func sgTotals(s expo.Sample) bool { return s.Labels.Get("priority") == "" }

// Normalize implements Adapter.
func (SGLang) Normalize(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "sglang"}
	switch {
	case p.Has(sgUsed):
		srv.Generation = "current"
	case firstLabel(p, "name", sgCapacity, sgRunning, sgNumUsed, sgTokenUsage) != "" && firstLabel(p, "model_name", sgRunning, sgNumUsed, sgTokenUsage) == "":
		srv.Generation = "first"
	default:
		srv.Generation = "legacy"
	}
	srv.Model = firstLabel(p, "model_name", sgRunning, sgCapacity, sgTokenUsage, sgPrompt)
	if srv.Model == "" {
		srv.Model = firstLabel(p, "name", sgCapacity, sgRunning, sgNumUsed, sgTokenUsage)
	}
	switch firstLabel(p, "engine_type", sgRunning, sgCapacity, sgTokenUsage, sgQueue) {
	case "prefill":
		srv.Role = kv.RolePrefill
	case "decode":
		srv.Role = kv.RoleDecode
	case "unified":
		srv.Role = kv.RoleUnified
	}

	r := newRanks()
	gauge := func(name string, field func(*kv.Signals) *kv.Value) bool {
		return r.read(p, name, sgRank, sgTotals, maxf, field, kv.Of)
	}
	counter := func(name string, keep func(expo.Sample) bool, field func(*kv.Signals) *kv.Value) bool {
		k := func(s expo.Sample) bool { return sgTotals(s) && (keep == nil || keep(s)) }
		return r.read(p, name, sgRank, k, sumf, field, kv.Of)
	}
	gauge(sgCapacity, func(s *kv.Signals) *kv.Value { return &s.Capacity })
	if !gauge(sgUsed, func(s *kv.Signals) *kv.Value { return &s.Used }) {
		gauge(sgNumUsed, func(s *kv.Signals) *kv.Value { return &s.Used })
	}
	gauge(sgEvictable, func(s *kv.Signals) *kv.Value { return &s.Evictable })
	gauge(sgFullUsage, func(s *kv.Signals) *kv.Value { return &s.UsageRatio })
	// Demand of requests waiting for PD pre-allocation, over capacity (> 1 under overload).
	gauge(sgPendingPrealloc, func(s *kv.Signals) *kv.Value { return &s.DemandRatio })
	gauge(sgRunning, func(s *kv.Signals) *kv.Value { return &s.Running })
	gauge(sgQueue, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting })
	if !gauge(sgBootstrapQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Bootstrap }) {
		gauge(sgPrefillPreallQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Bootstrap })
	}
	gauge(sgInflightQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Inflight })
	gauge(sgPreallocQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Prealloc })
	gauge(sgTransferQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Transfer })
	counter(sgRetracted, nil, func(s *kv.Signals) *kv.Value { return &s.Counters.Preemptions })
	counter(sgPrompt, nil, func(s *kv.Signals) *kv.Value { return &s.Counters.PromptTokens })
	counter(sgGeneration, nil, func(s *kv.Signals) *kv.Value { return &s.Counters.GenerationTokens })

	// Prefix-cache hit and query tokens, newest source first.
	hitQuery := func(hit, query func(expo.Sample) bool, name string) bool {
		h := counter(name, hit, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixHitTokens })
		q := counter(name, query, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixQueryTokens })
		return h && q
	}
	mode := func(s expo.Sample) string { return s.Labels.Get("mode") }
	switch {
	case p.Has(sgEffective):
		hitQuery(func(s expo.Sample) bool { return strings.HasSuffix(mode(s), "_hit") }, nil, sgEffective)
	case p.Has(sgRealtime):
		hitQuery(func(s expo.Sample) bool { return mode(s) == "prefill_cache" },
			func(s expo.Sample) bool { return mode(s) == "prefill_cache" || mode(s) == "prefill_compute" }, sgRealtime)
	case p.Has(sgCached):
		// cached_tokens_total{cache_source}: sum the sources; a "total"
		// fallback series stands alone when present.
		keep := func(s expo.Sample) bool { return s.Labels.Get("cache_source") != "total" }
		for _, s := range p.Samples(sgCached) {
			if s.Labels.Get("cache_source") == "total" {
				keep = func(s expo.Sample) bool { return s.Labels.Get("cache_source") == "total" }
				break
			}
		}
		counter(sgCached, keep, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixHitTokens })
		counter(sgPrompt, nil, func(s *kv.Signals) *kv.Value { return &s.Counters.PrefixQueryTokens })
	}
	// The 0.01-rounded token_usage is a last resort: only for ranks that
	// report neither tokens nor full_token_usage.
	for _, smp := range p.Samples(sgTokenUsage) {
		if !sgTotals(smp) || !expo.Finite(smp.Value) {
			continue
		}
		rk := r.get(sgRank(smp))
		if !rk.UsageRatio.OK() && !(rk.Used.OK() && rk.Capacity.OK()) {
			rk.UsageRatio = kv.Of(smp.Value)
		}
	}
	srv.Ranks = r.list()
	srv.Rollup()
	srv.MaxRunning = sgMaxRunning(p)
	srv.Finished = finishedSizes(p, sgReqPrompt, sgReqGen)
	for _, s := range p.Samples(sgContextLen) {
		if expo.Finite(s.Value) {
			srv.ContextLength = kv.Of(s.Value)
			break
		}
	}
	return srv, nil
}
