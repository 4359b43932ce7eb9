package textfmt

import (
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// CachePoolName names a server's further KV pool (kv.CachePool): "host
// tier", "swa pool", "swa pool (host)", "lmcache-l2 tier fs". The pool's
// own name comes from the target's page: anything but letters, digits and
// ._:/- is written '?', so it never reaches a terminal raw.
func CachePoolName(p kv.CachePool) string {
	out := p.Tier + " tier"
	if p.Type != kv.PoolFull {
		out = p.Type + " pool"
		if p.Tier != kv.TierGPU {
			out += " (" + p.Tier + ")"
		}
	}
	if p.Name != "" {
		out += " " + printable(p.Name)
	}
	return out
}

// printable keeps letters, digits and ._:/-; anything else becomes '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:/-", r):
			return r
		}
		return '?'
	}, s)
}

// Amount writes a value of a pool in the pool's unit: tokens as Count,
// bytes as Bytes, slots as "3 slots".
func Amount(unit string, v kv.Value) string {
	switch {
	case unit == kv.UnitBytes:
		return Bytes(v)
	case unit == kv.UnitSlots && v.OK():
		return Count(v) + " slots"
	}
	return Count(v)
}

// Traffic is a cache tier's KV bytes moved to and from the GPU since the
// engine started (kv.CachePool LoadBytes, StoreBytes): "loaded 256.0 MiB,
// stored 768.0 MiB"; "" when the engine reports neither.
func Traffic(p kv.CachePool) string {
	if !p.LoadBytes.OK() && !p.StoreBytes.OK() {
		return ""
	}
	return "loaded " + Bytes(p.LoadBytes) + ", stored " + Bytes(p.StoreBytes)
}

// Tiers is what a cache server holds instead of a KV pool of its own: its
// tiers, each with its fill, or the engine's own hit rate where that is
// all it reports: "lmcache-l1 41.0%, lmcache-l2 fs 2.0 GiB"; NA while it
// reports none.
func Tiers(s *kv.Server) string {
	if len(s.CachePools) == 0 {
		return NA
	}
	parts := make([]string, 0, len(s.CachePools))
	for _, p := range s.CachePools {
		label := strings.Replace(CachePoolName(p), " tier", "", 1)
		switch {
		case p.UsageRatio.OK():
			label += " " + Percent(p.UsageRatio)
		case p.Used.OK():
			label += " " + Amount(p.Unit, p.Used)
		case p.HitRate.OK():
			label += " hit rate " + Percent(p.HitRate)
		default:
			label += " " + NA
		}
		parts = append(parts, label)
	}
	return strings.Join(parts, ", ")
}
