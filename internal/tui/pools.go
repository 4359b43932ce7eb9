package tui

import (
	"fmt"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

// cachePoolLines are the drill-down's table of the server's further KV pools
// (kv.Server.CachePools): hybrid-model pools and cache tiers, each in its own
// unit, with the prompt tokens it served from its cache (or the engine's
// own windowed hit rate). Nothing when the engine reports none.
func (m Model) cachePoolLines(s report.Server, w int) []string {
	if s.Server == nil || len(s.Server.CachePools) == 0 {
		return nil
	}
	barW := 10
	out := []string{"", m.st.bold.Render(fmt.Sprintf("%-22s %12s %12s %-*s %s", "POOL / TIER", "USED", "CAP", barW+8, "USAGE", "HITS"))}
	for _, p := range s.Server.CachePools {
		used, capa := cachePoolAmount(p, p.Used), cachePoolAmount(p, p.Capacity)
		l := fmt.Sprintf("%-22s %12s %12s ", fit(cachePoolName(p), 22, false), used, capa)
		l += m.bar(p.UsageRatio, barW) + " " + fit(pct(p.UsageRatio), 7, true)
		switch {
		case p.HitTokens.OK():
			l += " " + num(p.HitTokens.V) + " tok"
		case p.HitRate.OK():
			l += " rate " + pct(p.HitRate)
		}
		out = append(out, l)
		if p.Note != "" && !p.Used.OK() && !p.UsageRatio.OK() {
			for _, n := range wrap("fill unavailable: "+p.Note, max(20, w-4)) {
				out = append(out, m.st.dim.Render("  "+n))
			}
		}
	}
	return out
}

// cachePoolName is "host tier", "swa pool", "lmcache-l2 fs".
func cachePoolName(p kv.CachePool) string {
	out := p.Tier + " tier"
	if p.Type != kv.PoolFull {
		out = p.Type + " pool"
	}
	if p.Name != "" {
		out = p.Tier + " " + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/-", r) {
				return r
			}
			return '?' // text from the page never reaches the terminal raw
		}, p.Name)
	}
	return out
}

// cachePoolAmount writes a pool value in its unit.
func cachePoolAmount(p kv.CachePool, v kv.Value) string {
	if !v.OK() {
		return na
	}
	switch p.Unit {
	case kv.UnitBytes:
		x, units := v.V, []string{"B", "KiB", "MiB", "GiB", "TiB"}
		i := 0
		for x >= 1024 && i < len(units)-1 {
			x /= 1024
			i++
		}
		return fmt.Sprintf("%.1f %s", x, units[i])
	case kv.UnitSlots:
		return num(v.V) + " sl"
	}
	return num(v.V)
}

// cacheTiers is a cache server's cell in the table: its tiers' fill, e.g.
// "lmcache-l1 64%, lmcache-l2 fs 2.0 GiB" (or the engine's hit rate where
// that is all it reports).
func cacheTiers(s *kv.Server) string {
	if len(s.CachePools) == 0 {
		return "tiers: none reported"
	}
	parts := make([]string, 0, len(s.CachePools))
	for _, p := range s.CachePools {
		name := strings.TrimSuffix(cachePoolName(p), " tier")
		switch {
		case p.UsageRatio.OK():
			name += " " + pct(p.UsageRatio)
		case p.Used.OK():
			name += " " + cachePoolAmount(p, p.Used)
		case p.HitRate.OK():
			name += " hit " + pct(p.HitRate)
		default:
			name += " " + na
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, ", ")
}
