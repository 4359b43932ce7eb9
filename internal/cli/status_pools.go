package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// renderCachePools writes one row per further KV pool of s (kv.Server.CachePools):
// hybrid-model pools and cache tiers, under the server's row, with
// --ranks and -o wide.
//
// Each line has at least cells+1 cells, like the rank rows: a line with
// fewer would end the table's column block, and the next server row would
// not line up with the ones above.
func renderCachePools(w io.Writer, s *kv.Server, cells int) {
	for _, p := range s.CachePools {
		cols := []string{"", "  " + cachePoolLabel(p), "", cachePoolFill(p), "", cachePoolHits(p)}
		if p.Note != "" && !p.Used.OK() && !p.UsageRatio.OK() {
			cols = append(cols, "fill unavailable: "+p.Note)
		}
		for len(cols) < cells+1 {
			cols = append(cols, "")
		}
		fmt.Fprintln(w, strings.Join(cols, "\t"))
	}
}

// cacheServerCell is a cache server's KV cell: it has no KV pool of its
// own, only tiers, each with its fill: "tiers lmcache-l1 41.0%, lmcache-l2 fs 2.0 GiB".
func cacheServerCell(s *kv.Server) string {
	if len(s.CachePools) == 0 {
		return "no KV pool of its own; no tier reported yet"
	}
	parts := make([]string, 0, len(s.CachePools))
	for _, p := range s.CachePools {
		label := strings.Replace(cachePoolLabel(p), " tier", "", 1)
		switch {
		case p.UsageRatio.OK():
			label += " " + percent(p.UsageRatio)
		case p.Used.OK() && p.Unit == kv.UnitBytes:
			label += " " + bytesCell(p.Used)
		case p.Used.OK():
			label += " " + count(p.Used)
		case p.HitRate.OK():
			label += " hit rate " + percent(p.HitRate)
		default:
			label += " --"
		}
		parts = append(parts, label)
	}
	return "tiers " + strings.Join(parts, ", ")
}

// cachePoolLabel names a pool: "swa pool", "host tier", "lmcache-l2 tier fs".
func cachePoolLabel(p kv.CachePool) string {
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

// cachePoolFill is "KV used / capacity unit (usage)" in the pool's unit.
func cachePoolFill(p kv.CachePool) string {
	switch p.Unit {
	case kv.UnitBytes:
		return fmt.Sprintf("KV %s / %s (%s)", bytesCell(p.Used), bytesCell(p.Capacity), percent(p.UsageRatio))
	case kv.UnitSlots:
		return fmt.Sprintf("KV %s / %s slots (%s)", count(p.Used), count(p.Capacity), percent(p.UsageRatio))
	}
	return "KV " + kvCell(p.Used, p.Capacity, p.UsageRatio)
}

// cachePoolHits is the prefix hits the tier served: tokens, or the engine's own
// windowed rate.
func cachePoolHits(p kv.CachePool) string {
	switch {
	case p.HitTokens.OK():
		return "hits " + count(p.HitTokens) + " tok"
	case p.HitRate.OK():
		return "hit rate " + percent(p.HitRate)
	}
	return ""
}

// bytesCell writes bytes in binary units: "2.8 GiB"; "--" when unknown.
func bytesCell(v kv.Value) string {
	if !v.OK() {
		return "--"
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	x, i := v.V, 0
	for x >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", x)
	}
	return fmt.Sprintf("%.1f %s", x, units[i])
}

// printable keeps a name from a target's page safe for a terminal: letters,
// digits and ._:/- pass, anything else becomes '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:/-", r):
			return r
		}
		return '?'
	}, s)
}
