package sim

import "fmt"

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

// hostTier is one DP rank's host pool, and below it (KVBM's disk tier G3,
// LMCache's L2) the tier that takes what the host drops.
type hostTier struct {
	capacity, used                  int64
	backup, dropped, hits, loadBack int64
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
}

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
		if sp.Engine == EngineKVBM {
			h.window = &hitWindow{max: kvbmWindow}
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

// kvbmWindow is KVBM's DEFAULT_MAX_RECENT_REQUESTS: its hit rates are over
// the last 1,000 lookups.
const kvbmWindow = 1000

// hitWindow is KVBM's CacheStatsTracker: per lookup the blocks queried
// from host and disk and the blocks each served; the hit rates are the
// sums over the last max lookups. The simulator makes one lookup per step
// of a rank (the step's device misses), not one per request.
type hitWindow struct {
	max                          int
	queried, host, disk          []int64
	sumQueried, sumHost, sumDisk int64
}

func (w *hitWindow) add(queried, host, disk int64) {
	if len(w.queried) == w.max {
		w.sumQueried -= w.queried[0]
		w.sumHost -= w.host[0]
		w.sumDisk -= w.disk[0]
		w.queried, w.host, w.disk = w.queried[1:], w.host[1:], w.disk[1:]
	}
	w.queried = append(w.queried, queried)
	w.host = append(w.host, host)
	w.disk = append(w.disk, disk)
	w.sumQueried += queried
	w.sumHost += host
	w.sumDisk += disk
}

// rates are the host and disk hit rates over the window (0 when nothing
// was queried, as KVBM reports).
func (w *hitWindow) rates() (host, disk float64) {
	if w == nil || w.sumQueried == 0 {
		return 0, 0
	}
	return float64(w.sumHost) / float64(w.sumQueried), float64(w.sumDisk) / float64(w.sumQueried)
}

func (h *hostTier) truth() *HostTruth {
	if h == nil {
		return nil
	}
	return &HostTruth{CapacityTokens: h.capacity, UsedTokens: h.used, BackupTokens: h.backup, DroppedTokens: h.dropped, HitTokens: h.hits, QueriedTokens: h.queried}
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
	s.tierTruth(t)
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

// validateTiers checks a server's tier keys; servers and names are the
// scenario's (an lmcache server's worker is one of them).
func validateTiers(path string, s ServerSpec, servers []ServerSpec, names map[string]int) []problem {
	var ps []problem
	add := func(key, format string, args ...any) {
		ps = append(ps, problem{path + "." + key, fmt.Sprintf(format, args...)})
	}
	switch {
	case s.HiCacheTokens < 0:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("must not be negative, got %d", s.HiCacheTokens)})
	case s.HiCacheTokens > 0 && s.Engine != EngineSGLang:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("HiCache is simulated for engine %s only, got %s", EngineSGLang, s.Engine)})
	}
	switch {
	case s.SWAWindow < 0:
		ps = append(ps, problem{path + ".swa_window", fmt.Sprintf("must not be negative, got %d", s.SWAWindow)})
	case s.SWAWindow > 0 && s.Engine != EngineSGLang:
		ps = append(ps, problem{path + ".swa_window", fmt.Sprintf("hybrid models are simulated for engine %s only, got %s", EngineSGLang, s.Engine)})
	}
	switch {
	case s.CPUOffloadTokens < 0:
		ps = append(ps, problem{path + ".cpu_offload_tokens", fmt.Sprintf("must not be negative, got %d", s.CPUOffloadTokens)})
	case s.CPUOffloadTokens > 0 && s.Engine != EngineVLLM && s.Engine != EngineTRTLLMServe && s.Engine != EngineKVBM:
		ps = append(ps, problem{path + ".cpu_offload_tokens", fmt.Sprintf("KV offloading is simulated for engines %s, %s and %s only, got %s", EngineVLLM, EngineTRTLLMServe, EngineKVBM, s.Engine)})
	case s.CPUOffloadTokens > 0 && s.HiCacheTokens > 0:
		ps = append(ps, problem{path + ".cpu_offload_tokens", "a server has one host tier; set hicache_tokens or cpu_offload_tokens"})
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
	case s.DiskOffloadTokens > 0 && s.Engine != EngineKVBM:
		add("disk_offload_tokens", "a disk tier is simulated for engine %s only, got %s", EngineKVBM, s.Engine)
	case s.DiskOffloadTokens > 0 && s.CPUOffloadTokens <= 0:
		add("disk_offload_tokens", "the disk tier takes what the host tier drops; set cpu_offload_tokens too")
	}
	if s.Engine == EngineKVBM && s.CPUOffloadTokens <= 0 {
		add("cpu_offload_tokens", "a %s server needs its host tier (G2); set cpu_offload_tokens", EngineKVBM)
	}
	switch {
	case s.LMCacheL1Tokens < 0 || s.LMCacheL2Tokens < 0:
		add("lmcache_l1_tokens", "must not be negative, got %d and lmcache_l2_tokens %d", s.LMCacheL1Tokens, s.LMCacheL2Tokens)
	case (s.LMCacheL1Tokens > 0 || s.LMCacheL2Tokens > 0) && s.Engine != EngineVLLM:
		add("lmcache_l1_tokens", "LMCache is simulated next to engine %s only, got %s", EngineVLLM, s.Engine)
	case s.LMCacheL2Tokens > 0 && s.LMCacheL1Tokens <= 0:
		add("lmcache_l2_tokens", "L2 takes what L1 drops; set lmcache_l1_tokens too")
	case s.LMCacheL1Tokens > 0 && (s.CPUOffloadTokens > 0 || s.HiCacheTokens > 0):
		add("lmcache_l1_tokens", "a server has one host tier; set lmcache_l1_tokens or cpu_offload_tokens")
	case s.LMCacheL1Tokens > 0 && s.DP > 1:
		add("dp", "an LMCache server serves one vLLM engine in the simulator; use dp 1 with lmcache_l1_tokens")
	}
	if s.Engine == EngineLMCache {
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
	}
	return ps
}
