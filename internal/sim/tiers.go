package sim

import "fmt"

// vLLM's native KV offloading (kv_offloading_backend "native",
// cpu_offload_tokens per DP rank) runs the same host model: evicted prefix
// blocks are offloaded to CPU and a quarter of the device misses, at most
// what the CPU holds, are loaded back from it. vLLM's page shows the
// loaded-back tokens (prompt_tokens_by_source{source="external_kv_transfer"}),
// the backend in cache_config_info and the tier's traffic in bytes
// (kv_offload_{load,store}_bytes): it exports no fill of the CPU tier.
//
// SGLang HiCache's host (L2) tier, one per DP rank (--enable-hierarchical-cache
// with hicache_tokens of host memory per rank).
//
// The load model: every prefix-cache token the device evicts is backed up
// to the host (SGLang writes evicted radix nodes through to host memory:
// hicache_backup_tokens_total); when the host is full the oldest tokens are
// dropped (hicache_dropped_tokens_total) and the host stays full. Of the
// prompt tokens the device cache missed in a step, a quarter is found on the
// host, at most what the host holds: those are host hits, loaded back to the
// device (load_back_tokens_total, cached_tokens_total{cache_source="host"},
// prefill_effective_tokens_total{mode="host_hit"}) and no longer counted as
// input. The host keeps its copy (HiCache's host pool is write-through), so
// a hit does not change its fill. The device's own counters and compute time
// are left as the device model made them: the simplification is documented in
// docs/simulator.md.

// The tiers of trtllm-serve, Dynamo KVBM and LMCache's multi-process server
// run the same host model, with a tier below the host for the last two:
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

// hostTier is one DP rank's host pool, and below it (KVBM's disk tier G3,
// LMCache's L2) the tier that takes what the host drops.
type hostTier struct {
	capacity, used                  int64
	backup, dropped, hits, loadBack int64
	// stored are the tokens stored into this tier from the GPU: the
	// host's backups (the tier below gets its tokens from the host).
	stored int64
	// queried are the prompt tokens looked up in this tier: the device's
	// misses (the top tier), what the host missed of them (the tier below).
	queried               int64
	lastEvicted, lastMiss int64
	below                 *hostTier
	window                *hitWindow // KVBM's sliding window of lookups (nil elsewhere)
}

// HostTruth is the host tier of a DP rank, or of the server (sums). Tokens.
type HostTruth struct {
	CapacityTokens, UsedTokens int64
	// BackupTokens went device → host (for the tier below: host → it),
	// DroppedTokens were dropped from it when full (from the host of a
	// server with a tier below: moved down), HitTokens are prompt tokens it
	// served (loaded back), QueriedTokens the prompt tokens looked up in it.
	BackupTokens, DroppedTokens, HitTokens, QueriedTokens int64
	// StoredBytes and LoadedBytes are the host tier's traffic in bytes
	// (kvBytesPerToken a token): its backups stored GPU → host and its
	// hits loaded host → GPU (vLLM's kv_offload_{store,load}_bytes,
	// trtllm-serve's offload and onboard bytes). The tier below the host
	// moves nothing to or from the GPU: 0 there.
	StoredBytes, LoadedBytes int64
}

// kvBytesPerToken is the KV size of one token of the simulated model, the
// one LMCache's pages count bytes with.
const kvBytesPerToken = lmcacheBytesPerToken

func (s *server) newHostTier() *hostTier {
	sp := s.spec
	switch {
	case sp.HiCacheTokens > 0:
		return &hostTier{capacity: sp.HiCacheTokens}
	case sp.LMCacheL1Tokens > 0:
		h := &hostTier{capacity: sp.LMCacheL1Tokens}
		if sp.LMCacheL2Tokens > 0 {
			h.below = &hostTier{capacity: sp.LMCacheL2Tokens}
		}
		return h
	case sp.CPUOffloadTokens > 0:
		h := &hostTier{capacity: sp.CPUOffloadTokens}
		if sp.DiskOffloadTokens > 0 {
			h.below = &hostTier{capacity: sp.DiskOffloadTokens}
		}
		if n := s.eng.hitWindow; n > 0 {
			h.window = &hitWindow{max: n}
		}
		return h
	}
	return nil
}

// stepHost runs the host tier (and the one below it) after the rank's step.
func (k *rank) stepHost() {
	h := k.host
	if h == nil {
		return
	}
	ev := k.c.evicted - h.lastEvicted
	h.lastEvicted = k.c.evicted
	missed := k.c.prefixQueried - k.c.prefixHit
	miss := missed - h.lastMiss
	h.lastMiss = missed
	h.backup += ev
	h.stored += ev
	h.used += ev
	if over := h.used - h.capacity; over > 0 {
		h.dropped += over
		h.used = h.capacity
		if b := h.below; b != nil {
			b.backup += over
			b.used += over
			if o := b.used - b.capacity; o > 0 {
				b.dropped += o
				b.used = b.capacity
			}
		}
	}
	h.queried += miss
	hit := min(miss/4, h.used)
	h.hits += hit
	h.loadBack += hit
	var low int64
	if b := h.below; b != nil {
		b.queried += miss - hit
		low = min((miss-hit)/4, b.used)
		b.hits += low
	}
	if h.window != nil && miss > 0 {
		p := k.page
		h.window.add(miss/p, hit/p, low/p)
	}
}

func (h *hostTier) truth() *HostTruth {
	if h == nil {
		return nil
	}
	return &HostTruth{CapacityTokens: h.capacity, UsedTokens: h.used, BackupTokens: h.backup, DroppedTokens: h.dropped, HitTokens: h.hits, QueriedTokens: h.queried,
		StoredBytes: h.stored * kvBytesPerToken, LoadedBytes: h.loadBack * kvBytesPerToken}
}

// SWATruth is the sliding-window pool of a hybrid model: each running
// request holds min(its length, swa_window) tokens there. Its capacity is
// 0.8 × the full pool's (the default of SGLang's --swa-full-tokens-ratio).
type SWATruth struct{ CapacityTokens, UsedTokens int64 }

// swaUsage is a rank's swa_token_usage (0 for a dense model, as SGLang writes).
func (r *RankTruth) swaUsage() float64 {
	if r.SWA == nil || r.SWA.CapacityTokens == 0 {
		return 0
	}
	return float64(r.SWA.UsedTokens) / float64(r.SWA.CapacityTokens)
}

func (k *rank) swaTruth() *SWATruth {
	w := k.srv.spec.SWAWindow
	if w <= 0 {
		return nil
	}
	t := &SWATruth{CapacityTokens: k.capacity * 8 / 10}
	for _, r := range k.running {
		t.UsedTokens += min(r.kvLen(), w)
	}
	t.UsedTokens = min(t.UsedTokens, t.CapacityTokens)
	return t
}

// hostTruth fills the ranks' and the server's host tier and SWA pool.
func (s *server) hostTruth(t *Truth) {
	for i, k := range s.ranks {
		sw := k.swaTruth()
		if sw == nil || i >= len(t.Ranks) {
			continue
		}
		t.Ranks[i].SWA = sw
		if t.SWA == nil {
			t.SWA = &SWATruth{}
		}
		t.SWA.CapacityTokens += sw.CapacityTokens
		t.SWA.UsedTokens += sw.UsedTokens
	}
	for i, k := range s.ranks {
		if k.host == nil || i >= len(t.Ranks) {
			continue
		}
		t.Ranks[i].Host = k.host.truth()
		t.Host = t.Host.plus(t.Ranks[i].Host)
		if k.host.below != nil {
			t.Ranks[i].Disk = k.host.below.truth()
			t.Disk = t.Disk.plus(t.Ranks[i].Disk)
		}
	}
	s.hybridTruth(t)
	if s.eng.truth != nil {
		s.eng.truth(s, t)
	}
}

// plus returns a + b, a new value (a may be nil).
func (a *HostTruth) plus(b *HostTruth) *HostTruth {
	out := &HostTruth{}
	if a != nil {
		*out = *a
	}
	out.CapacityTokens += b.CapacityTokens
	out.UsedTokens += b.UsedTokens
	out.BackupTokens += b.BackupTokens
	out.DroppedTokens += b.DroppedTokens
	out.HitTokens += b.HitTokens
	out.QueriedTokens += b.QueriedTokens
	out.StoredBytes += b.StoredBytes
	out.LoadedBytes += b.LoadedBytes
	return out
}

// hostHits is a rank's host hit tokens (0 without HiCache).
func (r *RankTruth) hostHits() int64 {
	if r.Host == nil {
		return 0
	}
	return r.Host.HitTokens
}

// externalHits are the prompt tokens a rank's tiers below the GPU served
// (host and the tier below it): vLLM's external_kv_transfer.
func (r *RankTruth) externalHits() int64 {
	n := r.hostHits()
	if r.Disk != nil {
		n += r.Disk.HitTokens
	}
	return n
}

// renderHiCache writes SGLang's HiCache families (python/sglang/srt/metrics/
// collector.py: "only created when hierarchical cache is enabled"): the host
// pool's gauges per scheduler and the transfer counters with pool="kv".
func renderHiCache(gauge, counter func(name, help string, v func(r *RankTruth) float64), poolCounter func(name, help, pool string, v func(r *RankTruth) float64)) {
	host := func(f func(h *HostTruth) int64) func(r *RankTruth) float64 {
		return func(r *RankTruth) float64 {
			if r.Host == nil {
				return 0
			}
			return float64(f(r.Host))
		}
	}
	gauge("hicache_host_used_tokens", "Number of tokens currently used in the host KV cache.", host(func(h *HostTruth) int64 { return h.UsedTokens }))
	gauge("hicache_host_total_tokens", "Total capacity of the host KV cache in tokens.", host(func(h *HostTruth) int64 { return h.CapacityTokens }))
	poolCounter("hicache_backup_tokens_total", "The number of tokens backed up from GPU to CPU.", "kv", host(func(h *HostTruth) int64 { return h.BackupTokens }))
	poolCounter("load_back_tokens_total", "The number of tokens loaded from CPU to GPU.", "kv", host(func(h *HostTruth) int64 { return h.HitTokens }))
	counter("hicache_dropped_tokens_total", "The number of tokens dropped from the host KV cache when it was full.", host(func(h *HostTruth) int64 { return h.DroppedTokens }))
}

// tierKeys are the cache-tier keys an engine's servers take; another
// engine's server that sets one is an error.
type tierKeys struct {
	hiCache bool // hicache_tokens: SGLang HiCache's host tier
	swa     bool // swa_window: a hybrid model's sliding-window pool
	host    bool // cpu_offload_tokens: a host tier
	disk    bool // disk_offload_tokens: a disk tier below the host tier
	lmcache bool // lmcache_l1_tokens, lmcache_l2_tokens: an LMCache server next to it
	// needsHost names the host tier the engine's servers cannot run
	// without (KVBM's "G2"); empty when the host tier is optional.
	needsHost string
}

// validateTiers checks a server's tier keys against its engine's, then
// the engine's own checks; servers and names are the scenario's (an
// lmcache server's worker is one of them).
func validateTiers(path string, s ServerSpec, eng *engine, servers []ServerSpec, names map[string]int) []problem {
	var ps []problem
	add := func(key, format string, args ...any) {
		ps = append(ps, problem{path + "." + key, fmt.Sprintf(format, args...)})
	}
	switch {
	case s.HiCacheTokens < 0:
		add("hicache_tokens", "must not be negative, got %d", s.HiCacheTokens)
	case s.HiCacheTokens > 0 && !eng.tiers.hiCache:
		add("hicache_tokens", "HiCache is simulated for %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.hiCache }), s.Engine)
	}
	switch {
	case s.SWAWindow < 0:
		add("swa_window", "must not be negative, got %d", s.SWAWindow)
	case s.SWAWindow > 0 && !eng.tiers.swa:
		add("swa_window", "hybrid models are simulated for %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.swa }), s.Engine)
	}
	switch {
	case s.MambaSlots < 0:
		add("mamba_slots", "must not be negative, got %d", s.MambaSlots)
	case s.MambaSlots > 0 && !eng.tiers.swa:
		add("mamba_slots", "hybrid models are simulated for %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.swa }), s.Engine)
	}
	switch {
	case s.CPUOffloadTokens < 0:
		add("cpu_offload_tokens", "must not be negative, got %d", s.CPUOffloadTokens)
	case s.CPUOffloadTokens > 0 && !eng.tiers.host:
		add("cpu_offload_tokens", "KV offloading is simulated for %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.host }), s.Engine)
	case s.CPUOffloadTokens > 0 && s.HiCacheTokens > 0:
		add("cpu_offload_tokens", "a server has one host tier; set hicache_tokens or cpu_offload_tokens")
	}
	for _, t := range []struct {
		key string
		v   int64
	}{{"cpu_offload_tokens", s.CPUOffloadTokens}, {"disk_offload_tokens", s.DiskOffloadTokens}, {"lmcache_l1_tokens", s.LMCacheL1Tokens}, {"lmcache_l2_tokens", s.LMCacheL2Tokens}} {
		if t.v > 0 && s.PageSize > 0 && t.v%s.PageSize != 0 {
			add(t.key, "must be a multiple of page_size %d, got %d", s.PageSize, t.v)
		}
	}
	switch {
	case s.DiskOffloadTokens < 0:
		add("disk_offload_tokens", "must not be negative, got %d", s.DiskOffloadTokens)
	case s.DiskOffloadTokens > 0 && !eng.tiers.disk:
		add("disk_offload_tokens", "a disk tier is simulated for %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.disk }), s.Engine)
	case s.DiskOffloadTokens > 0 && s.CPUOffloadTokens <= 0:
		add("disk_offload_tokens", "the disk tier takes what the host tier drops; set cpu_offload_tokens too")
	}
	if eng.tiers.needsHost != "" && s.CPUOffloadTokens <= 0 {
		add("cpu_offload_tokens", "a %s server needs its host tier (%s); set cpu_offload_tokens", s.Engine, eng.tiers.needsHost)
	}
	switch {
	case s.LMCacheL1Tokens < 0 || s.LMCacheL2Tokens < 0:
		add("lmcache_l1_tokens", "must not be negative, got %d and lmcache_l2_tokens %d", s.LMCacheL1Tokens, s.LMCacheL2Tokens)
	case (s.LMCacheL1Tokens > 0 || s.LMCacheL2Tokens > 0) && !eng.tiers.lmcache:
		add("lmcache_l1_tokens", "LMCache is simulated next to %s only, got %s", enginesWith(func(e *engine) bool { return e.tiers.lmcache }), s.Engine)
	case s.LMCacheL2Tokens > 0 && s.LMCacheL1Tokens <= 0:
		add("lmcache_l2_tokens", "L2 takes what L1 drops; set lmcache_l1_tokens too")
	case s.LMCacheL1Tokens > 0 && (s.CPUOffloadTokens > 0 || s.HiCacheTokens > 0):
		add("lmcache_l1_tokens", "a server has one host tier; set lmcache_l1_tokens or cpu_offload_tokens")
	case s.LMCacheL1Tokens > 0 && s.DP > 1:
		add("dp", "an LMCache server serves one vLLM engine in the simulator; use dp 1 with lmcache_l1_tokens")
	}
	if eng.validate != nil {
		eng.validate(s, servers, names, add)
	}
	return ps
}
