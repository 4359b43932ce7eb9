package sim

// The tiers of trtllm-serve, Dynamo KVBM and LMCache's multi-process server,
// on the host model of tiers.go:
//
//   - trtllm-serve's host cache (KvCacheConfig host_cache_size,
//     cpu_offload_tokens): the host tier; its page shows the host pool's
//     utilization only (secondaryUsed / secondaryMax blocks).
//   - Dynamo KVBM (the KV block manager of a Dynamo worker, its own
//     listener on DYN_KVBM_METRICS_PORT): G2 is the host tier
//     (cpu_offload_tokens), G3 the disk tier below it (disk_offload_tokens):
//     what the host drops when full is offloaded to disk. The page shows
//     transfer counters in blocks and the hit rates of both tiers over
//     KVBM's sliding window.
//   - LMCache (multi-process mode, one LMCache server next to one vLLM
//     server): L1 is host memory (lmcache_l1_tokens), L2 the "fs" adapter
//     (lmcache_l2_tokens). Its page shows both in bytes and its lookups in
//     tokens; the vLLM server's page shows the tokens it loaded as
//     prompt_tokens_by_source{source="external_kv_transfer"}.
//
// Of the prompt tokens the device missed in a step, a quarter is found on
// the host (at most what it holds), and of the rest a quarter on the tier
// below (at most what it holds).

// lmcacheBytesPerToken is the KV size of one token of the simulated model:
// Llama-3.1-8B in bf16, 32 layers × 2 (K and V) × 8 KV heads × 128 × 2 bytes.
const lmcacheBytesPerToken = 131072

// lmcacheL2Name is the simulated L2 adapter (LMCache's l2_name label).
const lmcacheL2Name = "fs"

// KVBMTruth is what a Dynamo KVBM page shows: the hit rates of the host
// (G2) and disk (G3) tiers over the window of the last 1,000 lookups and
// the transfer counters, in blocks (KVBM's) or tokens.
type KVBMTruth struct {
	HostHitRate, DiskHitRate float64
	// Lookups in the window (at most 1,000).
	Lookups int
	// MatchedTokens: prompt tokens found on host or disk.
	MatchedTokens int64
	// OffloadD2H: device → host, OffloadH2D: host → disk, OnboardH2D: host
	// → device, OnboardD2D: disk → device; blocks.
	OffloadD2H, OffloadH2D, OnboardH2D, OnboardD2D int64
}

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

// stepReuse keeps trtllm-serve's block reuse stats after the rank's step:
// the prompt blocks found and not found in the device cache at the step's
// admissions, and the reuse rate of the last step that looked blocks up.
func (k *rank) stepReuse() {
	q, h := k.c.prefixQueried-k.lastQueried, k.c.prefixHit-k.lastHit
	k.lastQueried, k.lastHit = k.c.prefixQueried, k.c.prefixHit
	if q <= 0 || k.page <= 0 {
		return
	}
	reused := h / k.page
	missed := (q - h + k.page - 1) / k.page
	k.c.reusedBlocks += reused
	k.c.missedBlocks += missed
	if reused+missed > 0 {
		k.iterReuse = float64(reused) / float64(reused+missed)
	}
}

// tierTruth fills the KVBM and LMCache parts of t.
func (s *server) tierTruth(t *Truth) {
	if s.spec.Engine == EngineKVBM && len(s.ranks) > 0 && s.ranks[0].host != nil {
		k := s.ranks[0]
		h, p := k.host, k.page
		kt := &KVBMTruth{Lookups: len(h.window.queried), MatchedTokens: h.hits, OffloadD2H: h.backup / p, OnboardH2D: h.hits / p}
		kt.HostHitRate, kt.DiskHitRate = h.window.rates()
		if b := h.below; b != nil {
			kt.MatchedTokens += b.hits
			kt.OffloadH2D, kt.OnboardD2D = b.backup/p, b.hits/p
		}
		t.KVBM = kt
	}
	if s.spec.Engine == EngineLMCache && len(s.workers) == 1 {
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
}
