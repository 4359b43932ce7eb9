package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// lmcacheSpec reads an LMCache server in multi-process mode (`lmcache
// server`, /metrics on its HTTP port; LMCache
// docs/source/mp/observability/metrics.rst @081c98da): a KV cache tier
// next to the engines, not an engine. It holds no GPU KV ("L0 … is
// vLLM-owned and not observable from LMCache"): the server's own KV
// signals stay unavailable, its role is cache (in no pool's KV sums), and
// what it holds is in its pools:
//
//   - L1 (host memory), in bytes: used = lmcache_mp_l1_memory_usage_bytes,
//     usage = lmcache_mp_l1_usage_ratio (0–1, direct; LMCache writes 0
//     before the gauge is wired up), capacity = used / usage (derived, when
//     usage is above 0), hit tokens = lmcache_mp_lookup_hit_l1_tokens_total
//     ("tokens L1 could serve on its own").
//   - L2, one pool per adapter (label l2_name: "fs", "nixl_store",
//     "mooncake_store", …), used = lmcache_mp_l2_usage_bytes; no capacity
//     is exported. The L2 hit tokens (lmcache_mp_lookup_hit_l2_tokens_total,
//     "tokens L2 added beyond the L1-servable prefix") carry no adapter
//     label: they go to the L2 pool when there is one adapter, else to an
//     L2 pool without a name.
//
// The server's prefix counters are LMCache's own lookups: hit =
// lmcache_mp_lookup_hit_tokens_total (L1 + L2), query =
// lmcache_mp_lookup_requested_tokens_total.
var lmcacheSpec = Spec{
	Name:         "lmcache",
	DisabledHint: "lmcache server serves /metrics on its --http-port (default 8080) unless started with --disable-metrics or --otlp-endpoint; /metrics is empty until the first store or retrieve",
	Detect:       []string{lmL1Ratio, lmL1Bytes, lmL2Bytes, lmLookupHit, lmLookupReq},
	Reads:        []string{lmHitL1, lmHitL2},
	Normalize:    normalizeLMCache,
}

const (
	lmL1Ratio   = "lmcache_mp_l1_usage_ratio"
	lmL1Bytes   = "lmcache_mp_l1_memory_usage_bytes"
	lmL2Bytes   = "lmcache_mp_l2_usage_bytes"
	lmLookupHit = "lmcache_mp_lookup_hit_tokens_total"
	lmLookupReq = "lmcache_mp_lookup_requested_tokens_total"
	lmHitL1     = "lmcache_mp_lookup_hit_l1_tokens_total"
	lmHitL2     = "lmcache_mp_lookup_hit_l2_tokens_total"
)

// normalizeLMCache is lmcacheSpec's Normalize.
func normalizeLMCache(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "lmcache", Generation: "mp", Role: kv.RoleCache}
	srv.Model = firstLabel(p, "model_name", lmLookupReq, lmLookupHit)
	srv.Counters.PrefixHitTokens = summed(p, lmLookupHit, nil, kv.Of)
	srv.Counters.PrefixQueryTokens = summed(p, lmLookupReq, nil, kv.Of)

	ps := newPools()
	l1 := fixed(kv.PoolFull, kv.TierLMCacheL1, "")
	ps.read(p, lmL1Bytes, l1, kv.UnitBytes, pfUsed, lmL1Tag, maxf, kv.Of)
	ps.read(p, lmL1Ratio, l1, kv.UnitBytes, pfRatio, lmL1Tag, maxf, kv.Of)
	lmL1Capacity(ps, poolKey{kv.PoolFull, kv.TierLMCacheL1, ""})
	ps.read(p, lmHitL1, l1, kv.UnitBytes, pfHits, nil, sumf, kv.Of)
	adapters := sortedUnique(labelValues(p, lmL2Bytes, "l2_name"))
	ps.read(p, lmL2Bytes, func(s expo.Sample) (poolKey, bool) {
		return poolKey{kv.PoolFull, kv.TierLMCacheL2, s.Labels.Get("l2_name")}, true
	}, kv.UnitBytes, pfUsed, nil, maxf, kv.Of)
	l2 := ""
	if len(adapters) == 1 {
		l2 = adapters[0]
	}
	ps.read(p, lmHitL2, fixed(kv.PoolFull, kv.TierLMCacheL2, l2), kv.UnitBytes, pfHits, nil, sumf, kv.Of)
	srv.CachePools = ps.list(nil)
	srv.Rollup()
	return srv, nil
}

// lmL1Tag groups the L1 gauges by L1 manager: with several L1 managers
// (--l1-manager, LMCache docs/source/mp/multi_l1.rst) each series carries
// its l1_tag, "sum across l1_tag for server totals; do not sum usage
// ratios". A single legacy L1 has no tag.
func lmL1Tag(s expo.Sample) kv.RankID { return kv.RankID{DP: s.Labels.Get("l1_tag")} }

// lmL1Capacity gives each L1 manager its capacity, used / usage (derived,
// when its usage is above 0), so that the L1 total is Σ used over Σ
// capacity. With several managers and one capacity unknown, no usage is
// shown: a mean of the managers' ratios would weigh a small DRAM pool like
// a large GDS slab.
func lmL1Capacity(ps *pools, k poolKey) {
	pool := ps.pool(k)
	if pool < 0 {
		return
	}
	var used, ratios []poolVal // copies: set below appends to ps.vals
	for _, pv := range ps.vals {
		switch {
		case pv.pool == pool && pv.field == pfUsed:
			used = append(used, pv)
		case pv.pool == pool && pv.field == pfRatio:
			ratios = append(ratios, pv)
		}
	}
	known := true
	for _, u := range used {
		ratio, ok := ps.value(pool, pfRatio, u.rank)
		if ok && ratio.V > 0 {
			ps.set(k, kv.UnitBytes, pfCapacity, u.rank, kv.DerivedOf(u.v.V/ratio.V), maxf)
		} else {
			known = false
		}
	}
	for _, r := range ratios {
		if _, ok := ps.value(pool, pfUsed, r.rank); !ok {
			known = false
		}
	}
	if len(ps.groups(pool)) > 1 && !known {
		ps.drop(pool, pfRatio)
	}
}

// labelValues returns the label's value of every sample of name.
func labelValues(p *expo.Page, name, label string) []string {
	var out []string
	for _, s := range p.Samples(name) {
		out = append(out, s.Labels.Get(label))
	}
	return out
}
