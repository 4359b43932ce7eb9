package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// renderPlanning writes the capacity-planning lines (docs/planning.md): one
// per pool (how many more of today's requests fit, the N−1 answer, what
// limits it), the diagnosis lines, and with wide one plan line per server
// (its limit and why, its workload headroom, the KV per running request,
// the batch limit, its drain margin). Aligned in columns where they fit
// the width, else each line's words wrap after its name.
//
// With a trend (status --trend) each pool's line also says its time to
// full; without one it says nothing of it (no history, no forecast).
func renderPlanning(out io.Writer, rep *report.Report, l statusLayout, trend kv.FillTrend) {
	g := newGrid(9)
	for i := range rep.Planning {
		p := &rep.Planning[i]
		fits := fitsCell(p.WorkloadHeadroom, p.KVPerRequest)
		if p.FinishedHeadroom.OK() {
			fits += ", " + textfmt.Count(p.FinishedHeadroom) + " of finished-request size"
		}
		fill := ""
		if p.FillForecast != nil {
			fill = fillCell(p.FillForecast, trend, l.wide)
		}
		g.add("plan", p.Name, plural(p.Servers, "server"), fits, "saturation "+textfmt.Percent(p.Saturation),
			drainCell(p), textfmt.Limiters(p.Limiters), fill)
	}
	stateRows(g, rep, l.wide)
	boundRows(g, rep)
	if l.width > 0 {
		if w, keep := g.layout(0); span(w, keep) > l.width {
			for i := range g.rows {
				if r := &g.rows[i]; r.proseAt < 0 {
					r.prose, r.proseAt = strings.Join(slices.DeleteFunc(slices.Clone(r.cells[3:]), func(c string) bool { return c == "" }), gap), 3
				}
			}
		}
	}
	if !l.wide {
		g.write(out, l.width)
		return
	}
	// Each server's plan line has columns of its own, after the pools'
	// plan and state lines, and shares their first three.
	sg := newGrid(9)
	planServerRows(sg, rep)
	alignFirst(g, sg, 3)
	g.write(out, 0)
	sg.write(out, 0)
}

// planServerRows are -o wide's plan line per server.
func planServerRows(g *grid, rep *report.Report) {
	drains := map[string]kv.DrainCase{}
	for _, p := range rep.Planning {
		if p.Servers > 1 {
			for _, d := range p.DrainEach {
				drains[d.Server] = d
			}
		}
	}
	for i := range rep.Servers {
		row := &rep.Servers[i]
		if row.Plan == nil {
			continue
		}
		p := row.Plan
		limit := string(p.Limit)
		if p.Why != "" {
			limit += ": " + p.Why
		}
		maxRun := textfmt.Count(p.MaxRunning)
		if p.MaxRunningSource != "" {
			maxRun += " (" + p.MaxRunningSource + ")"
		}
		drain := "--"
		if d, ok := drains[row.Name]; ok && d.MarginTokens.OK() {
			drain = fmt.Sprintf("%s tok (%s of the rest)", textfmt.Signed(d.MarginTokens), textfmt.Percent(d.MarginRatio))
		}
		finished := "finished=--"
		if p.FinishedRequestTokens.OK() {
			finished = fmt.Sprintf("finished=%s×%s tok", textfmt.Count(p.FinishedHeadroom), textfmt.Count(p.FinishedRequestTokens))
		}
		g.add("plan", row.Name, "", "limit "+limit, fitsCell(p.WorkloadHeadroom, p.KVPerRequest), finished,
			"max_run="+maxRun+" batch_left="+textfmt.Count(p.BatchHeadroom), "saturation "+textfmt.Percent(p.Saturation), "drain margin "+drain)
	}
}

// fitsCell is "fits 61 more of today's mix (2,760 tok each)", or says
// that nothing runs to measure the mix by (the state lines say why).
func fitsCell(fits, perRequest kv.Value) string {
	if !perRequest.OK() {
		return "fits -- (nothing runs: no mix to measure)"
	}
	return fmt.Sprintf("fits %s more of today's mix (%s tok each)", textfmt.Count(fits), textfmt.Count(perRequest))
}

// drainCell is the pool's N−1 answer in words.
func drainCell(p *kv.PoolPlan) string {
	if p.N1Safe && p.Drain != nil {
		return fmt.Sprintf("N−1 safe: draining %s leaves %s of the rest (margin %s tok)", p.Drain.Server,
			textfmt.Percent(p.Drain.After), textfmt.Count(p.Drain.MarginTokens))
	}
	if p.N1Note != "" {
		return p.N1Note
	}
	return "N−1 unknown"
}

// fillCell is a pool's time to full: "full in 12m" and, wide, how: the
// fill rate, the free KV after demand, the floor and the samples.
func fillCell(f *kv.FillForecast, trend kv.FillTrend, wide bool) string {
	out := textfmt.TimeToFull(f, trend)
	if f.TimeToFullState == kv.FillUnknown && !f.TrendWarming && f.TrendNote != "" {
		out += " (" + f.TrendNote + ")"
	}
	if !wide || !f.FillRate.OK() {
		return out
	}
	demand := ""
	if !f.FillDemandCounted {
		demand = ", no demand reported"
	}
	return fmt.Sprintf("%s (fill %s tok/s, floor %s, %s free after demand%s; %d samples %s)", out,
		textfmt.Rate(f.FillRate), textfmt.Rate(f.FillFloor), textfmt.Count(f.FreeAfterDemand), demand, f.TrendSamples, textfmt.Window(f.TrendSeconds))
}

// boundRows are the hybrid servers' lines (docs/planning.md, "Hybrid
// models"): what caps the concurrency, the state pool and the terms.
func boundRows(g *grid, rep *report.Report) {
	for i := range rep.Servers {
		row := &rep.Servers[i]
		if row.Plan == nil || row.Plan.StatePool == nil || row.Text == nil {
			continue
		}
		p := row.Plan
		g.add("bound", row.Name, "", row.Text.Binding, row.Text.StatePool,
			"KV "+textfmt.Count(p.KVCapacityRequests)+" requests", "max running "+textfmt.Count(p.MaxRunning))
	}
}

// stateRows are the diagnosis lines (kv.Diagnose, docs/runbook.md): one
// per pool with its most severe server's state and evidence, and with
// wide one per server.
func stateRows(g *grid, rep *report.Report, wide bool) {
	for i := range rep.Planning {
		p := &rep.Planning[i]
		g.addProse(3, orDash(p.Evidence), "state", p.Name, textfmt.State(p.State))
	}
	if !wide {
		return
	}
	for i := range rep.Servers {
		if p := rep.Servers[i].Plan; p != nil {
			g.addProse(3, orDash(p.Evidence), "state", rep.Servers[i].Name, textfmt.State(p.State))
		}
	}
}
