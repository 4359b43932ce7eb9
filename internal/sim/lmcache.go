package sim

// renderLMCache writes an LMCache server's /metrics in multi-process mode
// (lmcache server, /metrics on --http-port; LMCache
// docs/source/mp/observability/metrics.rst and the OTel instruments in
// lmcache/v1/mp_observability): OpenTelemetry's Prometheus exporter, so
// dots become underscores, counters get their unit and _total and no
// _created, and target_info carries the resource attributes. The L1
// gauges (observable, no attributes) and the L2 usage per adapter
// (l2_name) in bytes; the lookup counters in tokens with model_name and
// cache_salt (empty: no tenant salt).
func renderLMCache(p *snapshot) []byte {
	g, live := p.gauges().LMCache, p.truth.LMCache
	w := &page{style: pyNum, b: make([]byte, 0, 4<<10)}
	w.family("target_info", "Target metadata", "gauge")
	w.sample("target_info", labels(true, "service_instance_id", p.srv.spec.Name, "service_name", "lmcache-mp", "telemetry_sdk_language", "python", "telemetry_sdk_name", "opentelemetry"), 1)
	if g == nil || live == nil {
		return w.b
	}
	gauge := func(name, help, lbls string, v float64) {
		w.family(name, help, "gauge")
		w.sample(name, lbls, v)
	}
	gauge("lmcache_mp_l1_memory_usage_bytes", "Bytes currently held in L1 cache", "", float64(g.L1UsedBytes))
	gauge("lmcache_mp_l1_usage_ratio", "L1 used/total ratio (0.0–1.0)", "", g.L1UsageRatio())
	if g.L2CapacityBytes > 0 {
		gauge("lmcache_mp_l2_usage_bytes", "Bytes currently held in each L2 adapter, tagged by ``l2_name`` (one observation per adapter).", labels(true, "l2_name", g.L2Name), float64(g.L2UsedBytes))
	}
	lbl := labels(true, "cache_salt", "", "model_name", live.ModelName)
	counter := func(name, help string, v int64) {
		w.family(name, help, "counter")
		w.sample(name, lbl, float64(v))
	}
	counter("lmcache_mp_lookup_requested_tokens_total", "Total tokens submitted for lookup (denominator of the L1+L2 token-level hit rate). Only chunk-aligned tokens are counted.", live.RequestedTokens)
	counter("lmcache_mp_lookup_hit_tokens_total", "Total tokens found in L1+L2 during lookup (numerator of the L1+L2 token-level hit rate). Counts the contiguous prefix hit only.", live.HitTokens)
	counter("lmcache_mp_lookup_hit_l1_tokens_total", "Of lookup_hit: tokens served from objects L1 already held (from the storage manager's per-tier hit counts).", live.HitL1Tokens)
	counter("lmcache_mp_lookup_hit_l2_tokens_total", "Of lookup_hit: tokens L2 added beyond the L1-servable prefix. lookup_hit_l1 + lookup_hit_l2 == lookup_hit.", live.HitL2Tokens)
	return w.b
}
