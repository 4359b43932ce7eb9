package tui

import (
	"fmt"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// stateCol is the STATE column: the server's diagnosis (kv.Diagnose,
// docs/runbook.md) in the words every face uses.
func stateCol() tableCol {
	return tableCol{numColumns, "STATE", 14, false, 2, func(m Model, s report.Server) string {
		if s.Plan == nil {
			return textfmt.NA
		}
		st := textfmt.State(s.Plan.State)
		switch s.Plan.State {
		case kv.StateLeak, kv.StateStuck, kv.StateFull:
			return m.st.bad.Render(st)
		case kv.StatePressure:
			return m.st.warn.Render(st)
		}
		return st
	}}
}

// limitCol is the LIMIT column: what limits admission on the server now
// (kv, state, batch, queue, none; -- when unknown), docs/planning.md.
func limitCol() tableCol {
	return tableCol{numColumns, "LIMIT", 5, false, 7, func(m Model, s report.Server) string {
		if s.Plan == nil || s.Plan.Limit == kv.FactorUnknown || s.Plan.Limit == "" {
			return textfmt.NA
		}
		f := string(s.Plan.Limit)
		switch s.Plan.Limit {
		case kv.FactorKV, kv.FactorState:
			return m.st.bad.Render(f)
		case kv.FactorBatch, kv.FactorQueue:
			return m.st.warn.Render(f)
		}
		return f
	}}
}

// planLines are the drill-down's planning lines: the limiting factor and
// why, the workload headroom, the batch limit, and the server's pool's N−1
// answer.
func (m Model) planLines(s report.Server, w int) []string {
	p := s.Plan
	if p == nil {
		return nil
	}
	limit := "limit " + string(p.Limit)
	if p.Why != "" {
		limit += ": " + p.Why
	}
	state := "state " + textfmt.State(p.State)
	if p.Evidence != "" {
		state += ": " + p.Evidence
	}
	fits := "fits -- more (nothing runs: no mix to measure)"
	if p.KVPerRequest.OK() {
		fits = "fits " + textfmt.Count(p.WorkloadHeadroom) + " more of today's mix (" + textfmt.Count(p.KVPerRequest) + " tok each)"
	}
	if p.FinishedRequestTokens.OK() {
		fits += ", " + textfmt.Count(p.FinishedHeadroom) + " of finished-request size (" + textfmt.Count(p.FinishedRequestTokens) + " tok)"
	}
	maxRun := "max running " + textfmt.Count(p.MaxRunning)
	if p.MaxRunningSource != "" {
		maxRun += " (" + p.MaxRunningSource + ")"
	}
	lines := flow([]string{state, limit, fits, maxRun, "batch left " + textfmt.Count(p.BatchHeadroom), "saturation " + textfmt.Percent(p.Saturation)}, w, "  ")
	if b := bindingLine(s); b != "" {
		lines = append(lines, flow([]string{b}, w, "  ")...)
	}
	key := report.PoolKeyOf(&s)
	for _, pp := range m.rep.Planning {
		if pp.PoolKey != key {
			continue
		}
		n1 := pp.N1Note
		if pp.N1Safe && pp.Drain != nil {
			n1 = fmt.Sprintf("N−1 safe: draining %s leaves %s of the rest", pp.Drain.Server, textfmt.Percent(pp.Drain.After))
		}
		for _, d := range pp.DrainEach {
			if d.Server == s.Name && pp.Servers > 1 {
				n1 += fmt.Sprintf("; draining %s: margin %s tok", s.Name, textfmt.Signed(d.MarginTokens))
			}
		}
		parts := []string{"pool " + pp.Name}
		if f := m.fillPart(&pp); f != "" {
			parts = append(parts, f)
		}
		lines = append(lines, flow(append(parts, n1), w, "  ")...)
	}
	return lines
}

// poolPlanParts are a pool's N−1 answer and its limiting servers, short,
// for the fleet lines.
func (m Model) poolPlanParts(key kv.PoolKey) []string {
	for _, pp := range m.rep.Planning {
		if pp.PoolKey != key {
			continue
		}
		var parts []string
		if f := m.fillPart(&pp); f != "" {
			parts = append(parts, f)
		}
		switch {
		case pp.Servers == 1:
			parts = append(parts, m.st.dim.Render("N−1: single server"))
		case pp.Drain == nil:
			parts = append(parts, "N−1 "+textfmt.NA)
		case pp.N1Safe:
			parts = append(parts, "N−1 safe ("+textfmt.Percent(pp.Drain.After)+" after)")
		default:
			parts = append(parts, m.st.bad.Render("N−1 unsafe ("+textfmt.Percent(pp.Drain.After)+" after draining "+pp.Drain.Server+")"))
		}
		if len(pp.Limiters) > 0 {
			parts = append(parts, textfmt.Limiters(pp.Limiters))
		}
		return parts
	}
	return nil
}

// fillPart is the pool's demand-aware time to full from top's own trend
// (docs/planning.md): "full in 12m", "full now (queue)", "not filling",
// "trend after 20s"; red within the full-soon horizon (alerts.kv_full_within).
// Empty where top keeps no trend (a single printed frame, top --once).
func (m Model) fillPart(pp *kv.PoolPlan) string {
	f := pp.FillForecast
	if f == nil {
		return ""
	}
	s := textfmt.TimeToFull(f, kv.TrendMinTop)
	switch {
	case f.TimeToFullState == kv.FillFull:
		return m.st.bad.Render(s)
	case f.TimeToFullState == kv.FillFilling && f.TimeToFullSeconds.V < m.opts.FullWithin.Seconds():
		return m.st.bad.Render(s)
	case f.TimeToFullState == kv.FillFilling:
		return m.st.warn.Render(s)
	case f.TimeToFullState == kv.FillUnknown:
		return m.st.dim.Render(s)
	}
	return s
}
