package engine

import (
	"math"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// sglangSpec reads SGLang's scheduler and tokenizer metrics, every generation:
// current (kv_used_tokens, kv_available_tokens, kv_evictable_tokens,
// full_token_usage, tp/dp/pp rank labels), legacy (num_used_tokens,
// token_usage, engine_type label) and the first one (label "name"), with
// either the "sglang:" or "sglang_" prefix (expo.Canonical folds them).
var sglangSpec = Spec{
	Name:         "sglang",
	DisabledHint: "start SGLang with --enable-metrics",
	Answer:       fastAPINotFound,
	// Any scheduler gauge of any generation.
	Detect: []string{sgCapacity, sgTokenUsage, sgNumUsed, sgUsed, sgRunning, sgQueue},
	Reads: append([]string{sgAvailable, sgEvictable, sgFullUsage, sgContextLen, sgBootstrapQ, sgPrefillPreallQ, sgInflightQ,
		sgPreallocQ, sgTransferQ, sgPendingPrealloc, sgRetracted, sgEffective, sgRealtime,
		sgCached, sgPrompt, sgGeneration, sgSWAUsage, sgMambaUsage, sgHostUsed, sgHostTotal, sgMaxRunningName,
		sgCacheConfig, sgPageSize, sgNumPages, sgSessionHeld},
		append(histogramNames(sgReqPrompt, sgReqGen), sgStateNames...)...),
	Normalize: normalizeSGLang,
}

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
	sgSWAUsage        = "sglang:swa_token_usage"
	sgMambaUsage      = "sglang:mamba_usage"
	sgHostUsed        = "sglang:hicache_host_used_tokens"
	sgHostTotal       = "sglang:hicache_host_total_tokens"
	sgGeneration      = "sglang:generation_tokens_total"
	// Capacity inputs: the info gauge's labels page_size and num_pages
	// (sglang #17273), which became the gauges page_size and num_pages
	// (sglang #24197); page_size × num_pages is max_total_num_tokens.
	sgCacheConfig = "sglang:cache_config_info"
	sgPageSize    = "sglang:page_size"
	sgNumPages    = "sglang:num_pages"
	// KV tokens held by streaming sessions (--enable-streaming-session):
	// outside kv_used_tokens, kv_available_tokens and kv_evictable_tokens
	// (the collector's invariant: available + evictable + used ≤ max total,
	// "the gap accounts for protected/session-held tokens"), not
	// reclaimable.
	sgSessionHeld = "sglang:streaming_session_held_tokens"
)

// sgRank reads the rank labels; ranks absent in older versions stay "".
// Like sgTotals and sgMode, it is computed once per shared label set
// (expo.Memoized).
func sgRank(s expo.Sample) kv.RankID {
	return expo.Memoized(s, sgRankKey, func(l labels.Labels) kv.RankID { return rankOfLabels(l, "dp_rank", "tp_rank", "pp_rank") })
}

// sgTotals keeps the totals series under priority scheduling (priority=""
// or no priority label), dropping the per-priority breakdown.
func sgTotals(s expo.Sample) bool {
	return expo.Memoized(s, sgTotalsKey, func(l labels.Labels) bool { return l.Get("priority") == "" })
}

// sgMode is the mode label of the prefill token counters.
func sgMode(s expo.Sample) string {
	return expo.Memoized(s, sgModeKey, func(l labels.Labels) string { return l.Get("mode") })
}

var sgRankKey, sgTotalsKey, sgModeKey = new(expo.MemoKey), new(expo.MemoKey), new(expo.MemoKey)

// normalizeSGLang is sglangSpec's Normalize.
func normalizeSGLang(in Input) (kv.Server, error) {
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
	hasCapacity := gauge(sgCapacity, func(s *kv.Signals) *kv.Value { return &s.Capacity })
	if gauge(sgUsed, func(s *kv.Signals) *kv.Value { return &s.Used }) {
		sgAddSessionHeld(p, r)
	} else {
		gauge(sgNumUsed, func(s *kv.Signals) *kv.Value { return &s.Used })
	}
	gauge(sgEvictable, func(s *kv.Signals) *kv.Value { return &s.Evictable })
	gauge(sgFullUsage, func(s *kv.Signals) *kv.Value { return &s.UsageRatio })
	// Demand of requests waiting for PD pre-allocation, over capacity (> 1 under overload).
	gauge(sgPendingPrealloc, func(s *kv.Signals) *kv.Value { return &s.DemandRatio })
	if srv.Role != kv.RolePrefill || sgPrefillCountsRunning(p, &srv) {
		gauge(sgRunning, func(s *kv.Signals) *kv.Value { return &s.Running })
	}
	gauge(sgQueue, func(s *kv.Signals) *kv.Value { return &s.Queued.Waiting })
	if !gauge(sgBootstrapQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Bootstrap }) {
		gauge(sgPrefillPreallQ, func(s *kv.Signals) *kv.Value { return &s.Queued.Bootstrap })
	} else {
		mixedDialect(p, &srv, sgPrefillPreallQ, sgBootstrapQ, sgRank, sgTotals, maxf)
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
	mode := sgMode
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
	if !hasCapacity {
		// After every rank is known: cache_config_info applies to all.
		sgPagesCapacity(p, r)
	}
	// The 0.01-rounded token_usage is a last resort: only for ranks that
	// report neither tokens nor full_token_usage, on pages without the
	// full pool's own gauges (full_token_usage, kv_used_tokens,
	// kv_available_tokens: a version that has them writes into token_usage
	// the max over the full, SWA and Mamba pools, sglang #22555), and only
	// where it is the full pool's: on a rank whose SWA or Mamba gauge
	// reaches it, it may be another pool's and the full pool's usage is
	// unknown.
	fullPool := p.Has(sgFullUsage) || p.Has(sgUsed) || p.Has(sgAvailable)
	other := map[kv.RankID]float64{}
	for _, n := range []string{sgSWAUsage, sgMambaUsage} {
		for _, smp := range p.Samples(n) {
			if sgTotals(smp) && expo.Finite(smp.Value) && smp.Value > other[sgRank(smp)] {
				other[sgRank(smp)] = smp.Value
			}
		}
	}
	for _, smp := range p.Samples(sgTokenUsage) {
		if !sgTotals(smp) || !expo.Finite(smp.Value) {
			continue
		}
		rk := r.get(sgRank(smp))
		if rk.UsageRatio.OK() || (rk.Used.OK() && rk.Capacity.OK()) {
			continue
		}
		switch o, ok := other[sgRank(smp)]; {
		case fullPool:
			srv.Explain(kv.UnknownVersion, "KV usage unavailable: sglang:token_usage is the max over the full-attention, SWA and Mamba pools (sglang #22555), and the page's full-pool gauges give no ratio")
		case ok && o > 0 && smp.Value <= o:
			srv.Explain(kv.UnknownVersion, "KV usage unavailable: sglang:token_usage is the max over the full-attention, SWA and Mamba pools (sglang #22555) and another pool's gauge reaches it, and the page has no full_token_usage or kv_used_tokens")
		default:
			rk.UsageRatio = kv.Of(smp.Value)
		}
	}
	r.rollup(&srv)
	srv.CachePools = sglangPools(p)
	srv.MaxRunning = sgMaxRunning(p)
	srv.Finished = finishedSizes(p, sgReqSizes)
	for _, s := range p.Samples(sgContextLen) {
		if expo.Finite(s.Value) {
			srv.ContextLength = kv.Of(s.Value)
			break
		}
	}
	return srv, nil
}

// sglangPools reads SGLang's further pools. Hybrid models: the SWA pool
// in tokens and the Mamba state pool in slots (hybrid.go). HiCache: the host
// (L2) pool in tokens (hicache_host_{used,total}_tokens, only with
// --enable-hierarchical-cache), and the prefix-hit tokens each tier served:
// prefill_effective_tokens_total{mode="host_hit"|"storage_hit"}, else
// cached_tokens_total{cache_source="host"|"storage"}. The storage (L3)
// backend (file, Mooncake, 3FS, …) is the "remote" tier: the page does not
// say which backend it is. The server's prefix-hit counter counts every
// tier's hits; the device's part makes no pool of its own.
func sglangPools(p *expo.Page) []kv.CachePool {
	ps := newPools()
	sglangStatePools(p, ps)
	host := func(s expo.Sample) (poolKey, bool) { return poolKey{kv.PoolFull, kv.TierHost, ""}, sgTotals(s) }
	ps.read(p, sgHostTotal, host, kv.UnitTokens, pfCapacity, sgRank, maxf, kv.Of)
	ps.read(p, sgHostUsed, host, kv.UnitTokens, pfUsed, sgRank, maxf, kv.Of)
	tierOf := func(v string) (poolKey, bool) {
		switch v {
		case "host", "host_hit":
			return poolKey{kv.PoolFull, kv.TierHost, ""}, true
		case "storage", "storage_hit":
			return poolKey{kv.PoolFull, kv.TierRemote, ""}, true
		}
		// cached_tokens_total's current storage source names its backend
		// (storage_<backend>, e.g. storage_mooncake).
		if b, ok := strings.CutPrefix(v, "storage_"); ok && b != "" {
			return poolKey{kv.PoolFull, kv.TierRemote, b}, true
		}
		return poolKey{}, false
	}
	if p.Has(sgEffective) {
		ps.read(p, sgEffective, func(s expo.Sample) (poolKey, bool) {
			k, ok := tierOf(sgMode(s))
			return k, ok && sgTotals(s)
		}, kv.UnitTokens, pfHits, sgRank, sumf, kv.Of)
	} else {
		ps.read(p, sgCached, func(s expo.Sample) (poolKey, bool) {
			k, ok := tierOf(s.Labels.Get("cache_source"))
			return k, ok && sgTotals(s)
		}, kv.UnitTokens, pfHits, sgRank, sumf, kv.Of)
	}
	// A tier SGLang reports only a zero hit counter for (it writes the
	// host_hit and storage_hit modes without HiCache too) is no pool.
	return ps.list(func(pl *kv.CachePool) bool {
		onlyHits := !pl.Capacity.OK() && !pl.Used.OK() && !pl.UsageRatio.OK() && !pl.HitRate.OK()
		return !onlyHits || pl.HitTokens.V != 0
	})
}

// sgMaxRunningName is SGLang's running-request limit: a constant emitted at
// startup by each scheduler (newest collectors label it cap_source; the
// first generation, label "name", had it too). It is per DP rank: with DP
// attention the limit is divided among the ranks.
const sgMaxRunningName = "sglang:max_running_requests"

// sgMaxRunning returns the server's running-request limit: the maximum over
// the TP/PP ranks of each DP rank, summed over DP ranks; unavailable when
// the page does not carry it.
func sgMaxRunning(p *expo.Page) kv.Value {
	perDP := map[string]float64{}
	for _, s := range p.Samples(sgMaxRunningName) {
		if !expo.Finite(s.Value) || !sgTotals(s) {
			continue
		}
		dp := sgRank(s).DP
		if v, ok := perDP[dp]; !ok || s.Value > v {
			perDP[dp] = s.Value
		}
	}
	if len(perDP) == 0 {
		return kv.Value{}
	}
	sum := 0.0
	for _, v := range perDP {
		sum += v
	}
	if len(perDP) > 1 {
		return kv.DerivedOf(math.Round(sum))
	}
	return kv.Of(sum)
}

// sgPagesCapacity sets each rank's capacity to page_size × num_pages
// (derived), for pages without max_total_num_tokens: the gauges of sglang
// #24197 per rank, else the labels of cache_config_info (sglang #17273),
// which carries no rank label and so applies to every rank.
func sgPagesCapacity(p *expo.Page, r *ranks) {
	pages := map[kv.RankID]float64{}
	for _, s := range p.Samples(sgNumPages) {
		if sgTotals(s) && expo.Finite(s.Value) && s.Value > 0 {
			pages[sgRank(s)] = s.Value
		}
	}
	set := false
	for _, s := range p.Samples(sgPageSize) {
		n, ok := pages[sgRank(s)]
		if !sgTotals(s) || !ok || !expo.Finite(s.Value) || s.Value <= 0 {
			continue
		}
		r.get(sgRank(s)).Capacity = kv.DerivedOf(s.Value * n)
		set = true
	}
	if set {
		return
	}
	for _, s := range p.Samples(sgCacheConfig) {
		size, ok := labelNumber(s, "page_size")
		n, ok2 := labelNumber(s, "num_pages")
		if !ok || !ok2 {
			continue
		}
		if r.len() == 0 {
			r.get(kv.RankID{})
		}
		r.each(func(_ kv.RankID, sig *kv.Signals) { sig.Capacity = kv.DerivedOf(size * n) })
		return
	}
}

// sgAddSessionHeld adds the tokens streaming sessions hold to each rank's
// used tokens (derived): they are neither kv_used_tokens nor reclaimable.
func sgAddSessionHeld(p *expo.Page, r *ranks) {
	for _, s := range p.Samples(sgSessionHeld) {
		if !sgTotals(s) || !expo.Finite(s.Value) || s.Value == 0 {
			continue
		}
		if u := &r.get(sgRank(s)).Used; u.OK() {
			*u = kv.DerivedOf(u.V + s.Value)
		}
	}
}

// sgPrefillCountsRunning reports whether a PD prefill page's
// num_running_reqs can be read: before sglang #31495 it was always 0 on
// prefill servers (running_batch is never filled there). A value above 0
// is read; so is a page with the bootstrap queue's current name. A page
// with its old name (num_prefill_prealloc_queue_reqs, renamed by #24341
// before #31495) is the old version: its 0 is no evidence, running stays
// unavailable and srv says why. (Versions between #24341 and #31495 have
// the new name and still write 0: nothing on their pages tells them apart;
// Diagnose's token rates keep them from a leak verdict.)
func sgPrefillCountsRunning(p *expo.Page, srv *kv.Server) bool {
	if !p.Has(sgPrefillPreallQ) || p.Has(sgBootstrapQ) {
		return true
	}
	for _, s := range p.Samples(sgRunning) {
		if sgTotals(s) && expo.Finite(s.Value) && s.Value != 0 {
			return true
		}
	}
	if !p.Has(sgRunning) {
		return true
	}
	srv.Explain(kv.UnknownVersion, "running requests unavailable: this PD prefill page predates sglang #31495 (it has num_prefill_prealloc_queue_reqs, renamed by #24341), whose num_running_reqs is always 0 on prefill servers")
	return false
}
