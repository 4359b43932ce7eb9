package sim

import "fmt"

// EngineLMCache is an LMCache server in multi-process mode, the cache tier
// of one vLLM server.
const EngineLMCache = "lmcache"

// lmcacheEngine is an LMCache server: a cache server next to the one vLLM
// server it lists in workers, whose L1 and L2 (that server's
// lmcache_l1_tokens and lmcache_l2_tokens) its page shows; no KV and no
// requests of its own.
var lmcacheEngine = engine{
	name: EngineLMCache, render: renderLMCache, role: RoleCache, tierOf: true,
	validate: func(s ServerSpec, servers []ServerSpec, names map[string]int, add func(key, format string, args ...any)) {
		if s.Load.Rate != 0 {
			add("load.rate", "an lmcache server takes no requests of its own (its vLLM server does); remove the rate")
		}
		if len(s.Workers) != 1 {
			add("workers", "an lmcache server serves exactly one vLLM server; list its name, got %d names", len(s.Workers))
		} else if i, ok := names[s.Workers[0]]; !ok {
			add("workers[0]", "unknown server %q", s.Workers[0])
		} else if w := servers[i]; w.Engine != EngineVLLM || w.LMCacheL1Tokens <= 0 {
			add("workers[0]", "%q must be a vllm server with lmcache_l1_tokens set", s.Workers[0])
		}
	},
	fleet: func(*ServerSpec) error {
		return fmt.Errorf("an %s server is the cache tier of one vLLM server, not a fleet; use the vllm-lmcache scenario or a scenario file (docs/simulator.md)", EngineLMCache)
	},
	truth: lmcacheTruth,
}

// lmcacheBytesPerToken is the KV size of one token of the simulated model:
// Llama-3.1-8B in bf16, 32 layers × 2 (K and V) × 8 KV heads × 128 × 2 bytes.
const lmcacheBytesPerToken = 131072

// lmcacheL2Name is the simulated L2 adapter (LMCache's l2_name label).
const lmcacheL2Name = "fs"

// LMCacheTruth is what an LMCache server's page shows: its L1 and L2 in
// bytes, its lookups in tokens (requested: the prompt tokens its vLLM
// server's device cache missed; hit = L1 + L2).
type LMCacheTruth struct {
	ModelName, L2Name            string
	L1CapacityBytes, L1UsedBytes int64
	L2CapacityBytes, L2UsedBytes int64
	RequestedTokens, HitTokens   int64
	HitL1Tokens, HitL2Tokens     int64
	BytesPerToken                int64
}

// L1UsageRatio is lmcache_mp_l1_usage_ratio: used over total, 0 when total is 0.
func (l *LMCacheTruth) L1UsageRatio() float64 {
	if l.L1CapacityBytes == 0 {
		return 0
	}
	return float64(l.L1UsedBytes) / float64(l.L1CapacityBytes)
}

// lmcacheTruth fills what the page of t shows from its worker's host tiers
// (lmcacheEngine.truth).
func lmcacheTruth(s *server, t *Truth) {
	if len(s.workers) != 1 {
		return
	}
	w := s.workers[0]
	lt := &LMCacheTruth{ModelName: w.spec.ModelName, L2Name: lmcacheL2Name, BytesPerToken: lmcacheBytesPerToken}
	for _, k := range w.ranks {
		h := k.host
		if h == nil {
			continue
		}
		lt.L1CapacityBytes += h.capacity * lmcacheBytesPerToken
		lt.L1UsedBytes += h.used * lmcacheBytesPerToken
		lt.RequestedTokens += h.queried
		lt.HitL1Tokens += h.hits
		if b := h.below; b != nil {
			lt.L2CapacityBytes += b.capacity * lmcacheBytesPerToken
			lt.L2UsedBytes += b.used * lmcacheBytesPerToken
			lt.HitL2Tokens += b.hits
		}
	}
	lt.HitTokens = lt.HitL1Tokens + lt.HitL2Tokens
	t.LMCache = lt
}

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
