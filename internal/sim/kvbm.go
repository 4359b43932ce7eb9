package sim

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
