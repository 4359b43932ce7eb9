package serve

import (
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// collectCachePools exports a server's further KV pools (kv.Server.CachePools): one
// series per known value, labelled pool_type, tier and pool_name; the unit
// picks the family (tokens, bytes or Mamba's state slots). A tier's
// traffic is one family with a direction label (load, store).
// Unknown values have no series, as everywhere. id are the server's
// identity label values.
func (c *collector) collectCachePools(s *kv.Server, em *emitter, id []string) {
	for _, p := range s.CachePools {
		labels := [...]string{p.Type, p.Tier, p.Name}
		known := func(m signal.Metric, v kv.Value) {
			if v.Trusted() {
				em.emit(m, v.V, c.serverLabels, id, labels[:]...)
			}
		}
		switch p.Unit {
		case kv.UnitTokens:
			known(signal.KVPoolCapacityTokens, p.Capacity)
			known(signal.KVPoolUsedTokens, p.Used)
		case kv.UnitBytes:
			known(signal.KVPoolCapacityBytes, p.Capacity)
			known(signal.KVPoolUsedBytes, p.Used)
		case kv.UnitSlots:
			known(signal.KVPoolCapacitySlots, p.Capacity)
			known(signal.KVPoolUsedSlots, p.Used)
		}
		known(signal.KVPoolUsageRatio, p.UsageRatio)
		known(signal.KVPoolHitTokens, p.HitTokens)
		known(signal.KVPoolHitRate, p.HitRate)
		for _, t := range [...]struct {
			direction string
			v         kv.Value
		}{{signal.DirectionLoad, p.LoadBytes}, {signal.DirectionStore, p.StoreBytes}} {
			if t.v.Trusted() {
				em.emit(signal.KVPoolTransferBytes, t.v.V, c.serverLabels, id, p.Type, p.Tier, p.Name, t.direction)
			}
		}
	}
}
