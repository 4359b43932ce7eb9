package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
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
		cols := []string{"", "  " + textfmt.CachePoolName(p), "", cachePoolFill(p), "", cachePoolHits(p)}
		if p.Note != "" && !p.Used.OK() && !p.UsageRatio.OK() {
			cols = append(cols, "fill unavailable: "+p.Note)
		}
		for len(cols) < cells+1 {
			cols = append(cols, "")
		}
		fmt.Fprintln(w, strings.Join(cols, "\t"))
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
