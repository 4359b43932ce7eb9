package sim

// vLLM's native KV offloading (kv_offloading_backend "native",
// cpu_offload_tokens per DP rank) runs the same host model: evicted prefix
// blocks are offloaded to CPU and a quarter of the device misses, at most
// what the CPU holds, are loaded back from it. vLLM's page shows only the
// loaded-back tokens (prompt_tokens_by_source{source="external_kv_transfer"})
// and the backend in cache_config_info: it exports no fill of the CPU tier.
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

// hostTier is one DP rank's host pool.
type hostTier struct {
	capacity, used                  int64
	backup, dropped, hits, loadBack int64
	lastEvicted, lastMiss           int64
}

// HostTruth is the host tier of a DP rank, or of the server (sums). Tokens.
type HostTruth struct {
	CapacityTokens, UsedTokens int64
	// BackupTokens went device → host, DroppedTokens were dropped from a
	// full host, HitTokens are prompt tokens the host served (loaded back).
	BackupTokens, DroppedTokens, HitTokens int64
}

func (s *server) newHostTier() *hostTier {
	switch {
	case s.spec.HiCacheTokens > 0:
		return &hostTier{capacity: s.spec.HiCacheTokens}
	case s.spec.CPUOffloadTokens > 0:
		return &hostTier{capacity: s.spec.CPUOffloadTokens}
	}
	return nil
}

// stepHost runs the host tier after the rank's step.
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
	h.used += ev
	if h.used > h.capacity {
		h.dropped += h.used - h.capacity
		h.used = h.capacity
	}
	hit := min(miss/4, h.used)
	h.hits += hit
	h.loadBack += hit
}

func (h *hostTier) truth() *HostTruth {
	if h == nil {
		return nil
	}
	return &HostTruth{CapacityTokens: h.capacity, UsedTokens: h.used, BackupTokens: h.backup, DroppedTokens: h.dropped, HitTokens: h.hits}
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
		ht := k.host.truth()
		if ht == nil || i >= len(t.Ranks) {
			continue
		}
		t.Ranks[i].Host = ht
		if t.Host == nil {
			t.Host = &HostTruth{}
		}
		t.Host.CapacityTokens += ht.CapacityTokens
		t.Host.UsedTokens += ht.UsedTokens
		t.Host.BackupTokens += ht.BackupTokens
		t.Host.DroppedTokens += ht.DroppedTokens
		t.Host.HitTokens += ht.HitTokens
	}
}

// hostHits is a rank's host hit tokens (0 without HiCache).
func (r *RankTruth) hostHits() int64 {
	if r.Host == nil {
		return 0
	}
	return r.Host.HitTokens
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
