package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// renderPlanning writes the capacity-planning lines (docs/planning.md): one
// per pool (how many more of today's requests fit, the N−1 answer, what
// limits it), and with wide one per server (its limit and why, its workload
// headroom, the KV per running request, the batch limit, its drain margin).
//
// With a trend (status --trend) each pool's line also says its time to
// full; without one it says nothing of it (no history, no forecast).
func renderPlanning(out io.Writer, rep *report.Report, wide bool, trend kv.FillTrend) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer w.Flush()
	for i := range rep.Planning {
		p := &rep.Planning[i]
		fits := fitsCell(p.WorkloadHeadroom, p.KVPerRequest)
		if p.FinishedHeadroom.OK() {
			fits += ", " + textfmt.Count(p.FinishedHeadroom) + " of finished-request size"
		}
		fill := ""
		if p.FillForecast != nil {
			fill = "\t" + fillCell(p.FillForecast, trend, wide)
		}
		fmt.Fprintf(w, "plan\t%s\t%s\t%s\tsaturation %s\t%s\t%s%s\n", p.Name, plural(p.Servers, "server"),
			fits, textfmt.Percent(p.Saturation), drainCell(p), textfmt.Limiters(p.Limiters), fill)
	}
	renderStates(w, rep, wide)
	if !wide {
		return
	}
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
		fmt.Fprintf(w, "plan\t%s\t\tlimit %s\t%s\t%s\tmax_run=%s batch_left=%s\tsaturation %s\tdrain margin %s\n", row.Name, limit,
			fitsCell(p.WorkloadHeadroom, p.KVPerRequest), finished, maxRun, textfmt.Count(p.BatchHeadroom), textfmt.Percent(p.Saturation), drain)
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

// renderStates writes the diagnosis lines (kv.Diagnose, docs/runbook.md):
// one per pool with its most severe server's state and evidence, and with
// wide one per server.
func renderStates(w io.Writer, rep *report.Report, wide bool) {
	for i := range rep.Planning {
		p := &rep.Planning[i]
		fmt.Fprintf(w, "state\t%s\t%s\t%s\n", p.Name, textfmt.State(p.State), orDash(p.Evidence))
	}
	if !wide {
		return
	}
	for i := range rep.Servers {
		if p := rep.Servers[i].Plan; p != nil {
			fmt.Fprintf(w, "state\t%s\t%s\t%s\n", rep.Servers[i].Name, textfmt.State(p.State), orDash(p.Evidence))
		}
	}
}
