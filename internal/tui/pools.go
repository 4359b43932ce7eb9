package tui

import (
	"fmt"

	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// cachePoolLines are the drill-down's table of the server's further KV pools
// (kv.Server.CachePools): hybrid-model pools and cache tiers, each in its own
// unit, with the prompt tokens it served from its cache (or the engine's
// own windowed hit rate) and, under it, its traffic to and from the GPU.
// Nothing when the engine reports none.
func (m Model) cachePoolLines(s report.Server, w int) []string {
	if s.Server == nil || len(s.Server.CachePools) == 0 {
		return nil
	}
	barW := 10
	out := []string{"", m.st.bold.Render(fmt.Sprintf("%-26s %12s %12s %-*s %s", "POOL / TIER", "USED", "CAP", barW+8, "USAGE", "HITS"))}
	for _, p := range s.Server.CachePools {
		used, capa := textfmt.Amount(p.Unit, p.Used), textfmt.Amount(p.Unit, p.Capacity)
		l := fmt.Sprintf("%-26s %12s %12s ", fit(textfmt.CachePoolName(p), 26, false), used, capa)
		l += m.bar(p.UsageRatio, barW) + " " + fit(textfmt.Percent(p.UsageRatio), 7, true)
		switch {
		case p.HitTokens.OK():
			l += " " + textfmt.Count(p.HitTokens) + " tok"
		case p.HitRate.OK():
			l += " rate " + textfmt.Percent(p.HitRate)
		}
		out = append(out, l)
		if tr := textfmt.Traffic(p); tr != "" {
			out = append(out, m.st.dim.Render("  "+tr))
		}
		if p.Note != "" && !p.Used.OK() && !p.UsageRatio.OK() {
			for _, n := range wrap("fill unavailable: "+p.Note, max(20, w-4)) {
				out = append(out, m.st.dim.Render("  "+n))
			}
		}
	}
	return out
}
