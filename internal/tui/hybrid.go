package tui

import (
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// hybridLines are a line per hybrid server under the fleet lines: what caps
// its concurrency and its state pool (docs/planning.md, "Hybrid models"),
// in the words of every face.
func (m Model) hybridLines(w int) []string {
	var out []string
	for _, s := range m.rep.Servers {
		if s.Plan == nil || s.Plan.StatePool == nil {
			continue
		}
		out = append(out, flow([]string{"  " + m.st.bold.Render(fit(s.Name, 8, false)), textfmt.Binding(s.Plan),
			textfmt.StatePool(s.Plan.StatePool)}, w, "           ")...)
	}
	return out
}

// bindingLine is the drill-down's line of a hybrid server; "" for others.
func bindingLine(s report.Server) string {
	if s.Plan == nil || s.Plan.StatePool == nil {
		return ""
	}
	return textfmt.Binding(s.Plan) + "  " + textfmt.StatePool(s.Plan.StatePool) + "  KV " + textfmt.Count(s.Plan.KVCapacityRequests) + " requests"
}
