package kv

import (
	"fmt"
	"math"
)

// Hybrid models (Mamba or sliding-window layers beside full attention) have
// two capacities: KV tokens and the state pool (Mamba state slots, one set
// per request; SWA tokens, the window's last tokens of each request). A
// server runs at most min(running-request limit, KV capacity in requests,
// state capacity in requests) requests at once (sglang #33004's
// effective_concurrency); the pool that gives the minimum binds. The
// formulas are in docs/planning.md, "Hybrid models".

// Binding names what caps a server's concurrency: the values of
// kvwatch_binding_pool's pool label.
type Binding string

// Bindings.
const (
	BindingRunning Binding = "running_limit" // the running-request limit
	BindingKV      Binding = "kv_tokens"     // the full-attention KV pool
	BindingMamba   Binding = "mamba_slots"   // the Mamba state pool
	BindingSWA     Binding = "swa_tokens"    // the sliding-window pool
)

// Bindings lists the bindings in documentation order.
func Bindings() []Binding { return []Binding{BindingRunning, BindingKV, BindingMamba, BindingSWA} }

// StatePlan is the planning view of a server's state pool: the Mamba or SWA
// pool on the GPU beside its KV pool.
type StatePlan struct {
	// Type is PoolMamba or PoolSWA; Unit UnitSlots or UnitTokens.
	Type string `json:"pool_type"`
	Unit string `json:"unit"`
	// Capacity, Used and UsageRatio are the pool's (CachePool).
	Capacity   Value `json:"capacity"`
	Used       Value `json:"used"`
	UsageRatio Value `json:"usage_ratio"`
	// PerRequest is what a running request holds in the pool: used over
	// running; with nothing running, 1 for Mamba (SGLang allocates one
	// state slot per request), unavailable for SWA (the window is not on
	// the page).
	PerRequest Value `json:"per_running_request"`
	// CapacityRequests is floor(capacity / PerRequest): how many requests
	// the pool holds at once; Headroom floor((capacity − used) /
	// PerRequest): how many more fit.
	CapacityRequests Value `json:"capacity_requests"`
	Headroom         Value `json:"headroom_requests"`
}

// Binding returns the binding the pool is when it binds.
func (p *StatePlan) Binding() Binding {
	if p.Type == PoolSWA {
		return BindingSWA
	}
	return BindingMamba
}

// StateOf returns s's state pool's plan: its Mamba pool on the GPU, else
// its SWA pool; nil when it has neither (a dense model, or a page without
// the hybrid gauges: no state pool, not an empty one).
func StateOf(s *Server) *StatePlan {
	var pool *CachePool
	for _, typ := range []string{PoolMamba, PoolSWA} {
		for i := range s.CachePools {
			if p := &s.CachePools[i]; p.Type == typ && p.Tier == TierGPU && pool == nil {
				pool = p
			}
		}
	}
	if pool == nil {
		return nil
	}
	p := &StatePlan{Type: pool.Type, Unit: pool.Unit, Capacity: pool.Capacity, Used: pool.Used, UsageRatio: pool.UsageRatio}
	switch {
	case p.Used.Trusted() && s.Running.Trusted() && s.Running.V >= 1 && p.Used.V >= 1:
		p.PerRequest = p.Used.Div(s.Running)
	case pool.Type == PoolMamba && s.Running.Trusted() && s.Running.V == 0:
		p.PerRequest = DerivedOf(1)
	}
	if c, per := p.Capacity, p.PerRequest; c.Trusted() && per.OK() && per.V > 0 {
		p.CapacityRequests = Value{V: math.Floor(c.V / per.V), Prov: combine(combine(c.Prov, per.Prov), Derived)}
		if u := p.Used; u.Trusted() {
			p.Headroom = Value{V: math.Max(0, math.Floor((c.V-u.V)/per.V)), Prov: p.CapacityRequests.Prov}
		}
	}
	return p
}

// concurrency returns min(max running, KV capacity in requests, the state
// pool's capacity in requests) and what gives it: the KV term is
// floor(capacity / KV per running request). Unknown when the KV term is, or
// when the server has a state pool whose term is unknown (the minimum of a
// set with an unknown member is unknown); a running limit the engine does
// not report is left out (then the minimum is of the pools). Ties go to the
// first of running limit, KV, state.
func concurrency(s *Server, p *ServerPlan) (kvReq, conc Value, b Binding) {
	if c, per := s.Capacity, p.KVPerRequest; c.Trusted() && per.OK() && per.V > 0 {
		kvReq = Value{V: math.Floor(c.V / per.V), Prov: combine(combine(c.Prov, per.Prov), Derived)}
	}
	if !kvReq.OK() || (p.StatePool != nil && !p.StatePool.CapacityRequests.OK()) {
		return kvReq, Value{}, ""
	}
	conc, b = kvReq, BindingKV
	if p.MaxRunning.OK() && p.MaxRunning.V <= conc.V {
		conc, b = p.MaxRunning.As(max(p.MaxRunning.Prov, Derived)), BindingRunning
	}
	if st := p.StatePool; st != nil && st.CapacityRequests.V < conc.V {
		conc, b = st.CapacityRequests, st.Binding()
	}
	return kvReq, conc, b
}

// stateLimit is the limiting-factor rule of the state pool: its usage at or
// above the warning, and at least the KV's when that is too.
func stateLimit(s *Server, st *StatePlan, warning float64) (Factor, string, bool) {
	if st == nil || !st.UsageRatio.Trusted() || st.UsageRatio.V < warning {
		return "", "", false
	}
	if u := s.UsageRatio; u.Trusted() && u.V >= warning && u.V > st.UsageRatio.V {
		return "", "", false
	}
	return FactorState, fmt.Sprintf("%s %s used, at or above the %s warning", BindingWords(st.Binding()), pctOf(st.UsageRatio.V), pctOf(warning)), true
}

// BindingWords names a binding in words, the same on every face: "state
// slots (mamba)", "SWA tokens", "KV tokens", "running-request limit"; ""
// for none. (textfmt.Binding writes them; kv writes them into Why.)
func BindingWords(b Binding) string {
	switch b {
	case BindingRunning:
		return "running-request limit"
	case BindingKV:
		return "KV tokens"
	case BindingMamba:
		return "state slots (mamba)"
	case BindingSWA:
		return "SWA tokens"
	}
	return ""
}

// stateDiagnosis is the diagnosis of a hybrid model whose state pool is
// fuller than its KV and at or above the warning: full at the critical
// threshold, else pressure; unknown otherwise (the KV's diagnosis holds).
func stateDiagnosis(s *Server, o DiagnoseOptions, waits string) (State, string) {
	st := StateOf(s)
	if st == nil || !st.UsageRatio.Trusted() || st.UsageRatio.V < o.Warning || st.UsageRatio.V <= s.UsageRatio.V {
		return StateUnknown, ""
	}
	state, at, level := StatePressure, o.Warning, "warning"
	if st.UsageRatio.V >= o.Critical {
		state, at, level = StateFull, o.Critical, "critical"
	}
	return state, fmt.Sprintf("%s %s used (%s at %s), KV cache %s%s", BindingWords(st.Binding()), pctOf(st.UsageRatio.V), level, pctOf(at), pctOf(s.UsageRatio.V), waits)
}
