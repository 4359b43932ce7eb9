package sim

// EngineKVBM is the KV block manager listener of a Dynamo worker (kvbm_*).
const EngineKVBM = "dynamo-kvbm"

// kvbmEngine is Dynamo KVBM: a cache server whose page holds the host (G2,
// cpu_offload_tokens, required) and disk (G3, disk_offload_tokens) tiers
// of its worker, blocks of 16 tokens, hit rates over KVBM's window.
var kvbmEngine = engine{
	name: EngineKVBM, render: renderKVBM, role: RoleCache,
	defaults: serverDefaults{pageSize: 16}, tiers: tierKeys{host: true, disk: true, needsHost: "G2"}, hitWindow: kvbmWindow,
	fleet: func(s *ServerSpec) error {
		s.CPUOffloadTokens = 2 << 20 // KVBM needs its host tier (G2)
		return nil
	},
	truth: kvbmTruth,
}

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

// kvbmTruth fills the window and transfer counters of t (kvbmEngine.truth).
func kvbmTruth(s *server, t *Truth) {
	if len(s.ranks) == 0 || s.ranks[0].host == nil {
		return
	}
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

// renderKVBM writes the page of a Dynamo worker's KVBM listener
// (DYN_KVBM_METRICS_PORT; names from lib/runtime's prometheus_names kvbm
// module, "kvbm_" prefix): Rust prometheus counters without _total, no
// labels, the host and disk hit rates over the sliding window.
func renderKVBM(p *snapshot) []byte {
	t := p.gauges().KVBM
	live := p.truth.KVBM
	w := &page{style: rustNum, b: make([]byte, 0, 2<<10)}
	if t == nil || live == nil {
		return w.b
	}
	one := func(name, help, typ string, v float64) {
		w.family(name, help, typ)
		w.sample(name, "", v)
	}
	one("kvbm_offload_blocks_d2h", "The number of offload blocks from device to host", "counter", float64(live.OffloadD2H))
	one("kvbm_offload_blocks_h2d", "The number of offload blocks from host to disk", "counter", float64(live.OffloadH2D))
	one("kvbm_offload_blocks_d2d", "The number of offload blocks from device to disk (bypassing host memory)", "counter", 0)
	one("kvbm_onboard_blocks_h2d", "The number of onboard blocks from host to device", "counter", float64(live.OnboardH2D))
	one("kvbm_onboard_blocks_d2d", "The number of onboard blocks from disk to device", "counter", float64(live.OnboardD2D))
	one("kvbm_matched_tokens", "The number of matched tokens", "counter", float64(live.MatchedTokens))
	one("kvbm_host_cache_hit_rate", "Host cache hit rate (0.0-1.0) from the sliding window", "gauge", t.HostHitRate)
	one("kvbm_disk_cache_hit_rate", "Disk cache hit rate (0.0-1.0) from the sliding window", "gauge", t.DiskHitRate)
	return w.b
}
