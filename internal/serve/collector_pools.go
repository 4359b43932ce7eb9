package serve

import (
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// collectCachePools exports a server's further KV pools (kv.Server.CachePools): one
// series per known value, labelled pool_type, tier and pool_name; the unit
// picks the family (tokens or bytes; Mamba slots export their ratio only).
// Unknown values have no series, as everywhere.
func collectCachePools(s *kv.Server, known func(m signal.Metric, v kv.Value, extra ...string)) {
	for _, p := range s.CachePools {
		labels := []string{p.Type, p.Tier, p.Name}
		switch p.Unit {
		case kv.UnitTokens:
			known(signal.KVPoolCapacityTokens, p.Capacity, labels...)
			known(signal.KVPoolUsedTokens, p.Used, labels...)
		case kv.UnitBytes:
			known(signal.KVPoolCapacityBytes, p.Capacity, labels...)
			known(signal.KVPoolUsedBytes, p.Used, labels...)
		}
		known(signal.KVPoolUsageRatio, p.UsageRatio, labels...)
		known(signal.KVPoolHitTokens, p.HitTokens, labels...)
		known(signal.KVPoolHitRate, p.HitRate, labels...)
	}
}
