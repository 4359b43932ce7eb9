package cli

import (
	"fmt"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// cachePoolRows adds one row per further KV pool of s
// (kv.Server.CachePools): hybrid-model pools and cache tiers, under the
// server's row and in its columns, with --ranks and -o wide. The hits a
// tier served, its traffic to and from the GPU, and why its fill is
// unknown, follow the row.
func cachePoolRows(g *grid, s *kv.Server) {
	for _, p := range s.CachePools {
		c := g.add("", "  "+textfmt.CachePoolName(p))
		c.cells[colKV] = cachePoolFill(p)
		var note []string
		if h := cachePoolHits(p); h != "" {
			note = append(note, h)
		}
		if tr := textfmt.Traffic(p); tr != "" {
			note = append(note, tr)
		}
		if p.Note != "" && !p.Used.OK() && !p.UsageRatio.OK() {
			note = append(note, "fill unavailable: "+p.Note)
		}
		c.note = strings.Join(note, gap)
	}
}

// cachePoolFill is "KV used / capacity unit (usage)" in the pool's unit.
func cachePoolFill(p kv.CachePool) string {
	switch p.Unit {
	case kv.UnitBytes:
		return fmt.Sprintf("KV %s / %s (%s)", textfmt.Bytes(p.Used), textfmt.Bytes(p.Capacity), textfmt.Percent(p.UsageRatio))
	case kv.UnitSlots:
		return fmt.Sprintf("KV %s / %s slots (%s)", textfmt.Count(p.Used), textfmt.Count(p.Capacity), textfmt.Percent(p.UsageRatio))
	}
	return "KV " + kvCell(p.Used, p.Capacity, p.UsageRatio)
}

// cachePoolHits is the prefix hits the tier served: tokens, or the engine's own
// windowed rate.
func cachePoolHits(p kv.CachePool) string {
	switch {
	case p.HitTokens.OK():
		return "hits " + textfmt.Count(p.HitTokens) + " tok"
	case p.HitRate.OK():
		return "hit rate " + textfmt.Percent(p.HitRate)
	}
	return ""
}
