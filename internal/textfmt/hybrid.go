package textfmt

import "github.com/kvwatch/kvwatch/internal/kv"

// Binding is what caps a server's concurrency (docs/planning.md, "Hybrid
// models"), the same on every face: "concurrency 96, bound by state slots
// (mamba)"; "concurrency --" when a term is unknown.
func Binding(p *kv.ServerPlan) string {
	if p == nil || !p.Concurrency.OK() || p.Binding == "" {
		return "concurrency " + NA
	}
	return "concurrency " + Count(p.Concurrency) + ", bound by " + kv.BindingWords(p.Binding)
}

// StatePool is a hybrid model's state pool with its room in requests:
// "state slots (mamba) 56 / 96 (58.3%), 40 more requests"; the counts
// "--" where the engine gives its usage alone.
func StatePool(st *kv.StatePlan) string {
	if st == nil {
		return ""
	}
	return kv.BindingWords(st.Binding()) + " " + Count(st.Used) + " / " + Count(st.Capacity) + " (" + Percent(st.UsageRatio) + "), " +
		Count(st.Headroom) + " more requests"
}
