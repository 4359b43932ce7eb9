package kv

import "fmt"

// State is the diagnosis of a server or pool: what is happening to its KV
// cache, named once here and shown in the same words by every face
// (docs/runbook.md has what to do for each).
type State string

// States, most severe first.
const (
	// StateLeak: the KV cache stays held while the requests that could
	// hold it do not run: blocks not freed after requests ended. Whatever
	// the queue: a leaking engine under load fills, stops admitting and
	// queues, and must be restarted, not given more capacity.
	StateLeak State = "leak_suspected"
	// StateStuck: requests run but no token is processed (no prompt
	// token, no generated token) between two scrapes.
	StateStuck State = "stuck"
	// StateFull: the KV cache is at or above the critical threshold.
	StateFull State = "full"
	// StatePressure: the KV cache is at or above the warning threshold.
	StatePressure State = "pressure"
	// StateOK: the KV cache holds the requests that run, below the
	// warning threshold.
	StateOK State = "ok"
	// StateIdle: nothing runs, nothing waits and the KV cache holds less
	// than the leak threshold.
	StateIdle State = "idle"
	// StateUnknown: the engine reports too little to tell.
	StateUnknown State = ""
)

// States lists every known state, most severe first (the order of the
// kvwatch_server_state series and of a pool's worst state).
func States() []State {
	return []State{StateLeak, StateStuck, StateFull, StatePressure, StateOK, StateIdle}
}

// severity orders states: lower is more severe; unknown is the least.
func (s State) severity() int {
	for i, x := range States() {
		if x == s {
			return i
		}
	}
	return len(States())
}

// DiagnoseOptions are the thresholds of a diagnosis: the alert thresholds
// of the config (alerts.kv_usage_warning, kv_usage_critical, leak_usage).
type DiagnoseOptions struct {
	Warning, Critical, LeakUsage float64
}

// Diagnose names the state of s from one page and, when known, the rates
// since the previous one, with the evidence in words.
//
// A leak is KV held that no running request can account for: the usage is
// at or above LeakUsage while no request holds KV (none runs, none is in a
// KV transfer), or while the requests that do could hold at most their
// context length each and the cache holds more than that; never where the
// used tokens count reusable cache (Server.UsedHoldsCache). It does not
// depend on the queue: under load a leaking server fills, admits nothing
// and its queue grows, which looks like overload but is not.
func Diagnose(s *Server, rates *Rates, o DiagnoseOptions) (State, string) {
	u := s.UsageRatio
	run := s.Running
	// Requests in a PD KV transfer hold KV without running: decode's
	// being received, prefill's being sent.
	var moving Value
	switch s.Role {
	case RoleDecode:
		moving = s.Queued.Transfer
	case RolePrefill:
		moving = s.Queued.Inflight
	}
	holders := sumOf(run, moving)
	if !run.OK() {
		// A running count the page does not give (SGLang's old PD prefill)
		// is no 0: who holds the KV is unknown.
		holders = Value{}
	}
	// What waits for admission (not the transfers, which are work in
	// flight).
	waiting := sumOf(sumOf(s.Queued.Waiting, s.Queued.Prealloc), s.Queued.Bootstrap)
	waits := ""
	if waiting.Trusted() && waiting.V > 0 {
		waits = fmt.Sprintf("; %s wait", countOf(waiting.V))
	}
	// Tokens processed since the previous page: a server that makes
	// progress is not holding dead blocks, whatever its running count says
	// (SGLang's PD prefill reported 0 running before sglang #31495).
	progress := rates != nil && (rates.GenTokensPS.Trusted() && rates.GenTokensPS.V > 0 ||
		rates.PromptTokensPS.Trusted() && rates.PromptTokensPS.V > 0)
	if u.Trusted() && holders.Trusted() && u.V >= o.LeakUsage && !s.UsedHoldsCache {
		if holders.V == 0 && !progress {
			return StateLeak, fmt.Sprintf("%s of the KV cache (%s tok) is held while no request runs%s. Blocks are not freed after requests end: restart the engine",
				pctOf(u.V), countOf(s.Used.V), waits)
		}
		if c := s.ContextLength; holders.V > 0 && c.Trusted() && c.V > 0 && s.Used.Trusted() && s.Used.V > holders.V*c.V {
			return StateLeak, fmt.Sprintf("%s tok of KV held by %s running requests of at most %s tok each%s. Blocks are not freed after requests end: restart the engine",
				countOf(s.Used.V), countOf(holders.V), countOf(c.V), waits)
		}
	}
	if rates != nil && run.Trusted() && run.V > 0 {
		gen, prompt := rates.GenTokensPS, rates.PromptTokensPS
		if gen.Trusted() && prompt.Trusted() && gen.V == 0 && prompt.V == 0 {
			return StateStuck, fmt.Sprintf("%s requests run but no token was processed in the last %.0fs%s. The engine makes no progress",
				countOf(run.V), rates.WindowSeconds, waits)
		}
	}
	if !u.Trusted() {
		return StateUnknown, unknownText(s)
	}
	if st, ev := stateDiagnosis(s, o, waits); st != StateUnknown {
		return st, ev
	}
	switch {
	case u.V >= o.Critical:
		return StateFull, fmt.Sprintf("%s of the KV cache used (critical at %s)%s", pctOf(u.V), pctOf(o.Critical), waits)
	case u.V >= o.Warning:
		return StatePressure, fmt.Sprintf("%s of the KV cache used (warning at %s)%s", pctOf(u.V), pctOf(o.Warning), waits)
	}
	if holders.Trusted() && holders.V == 0 && waiting.Trusted() && waiting.V == 0 && !progress {
		return StateIdle, fmt.Sprintf("nothing runs or waits; %s of the KV cache held", pctOf(u.V))
	}
	if !run.Trusted() {
		return StateOK, fmt.Sprintf("%s of the KV cache used", pctOf(u.V))
	}
	inTransfer := ""
	if moving.Trusted() && moving.V > 0 {
		inTransfer = fmt.Sprintf(", %s in a KV transfer", countOf(moving.V))
	}
	return StateOK, fmt.Sprintf("%s of the KV cache used by %s running requests%s%s", pctOf(u.V), countOf(run.V), inTransfer, waits)
}

// worstState is the pool's state: its most severe server's, with that
// server's evidence; unknown when no server is known, then with the first
// server's reason where its page gives one (a llama.cpp server without
// kv_unified), so the pool's line says why instead of nothing.
func worstState(ms []PlanMember) (State, string) {
	st, ev, why := StateUnknown, "", ""
	for _, m := range ms {
		if m.Plan == nil {
			continue
		}
		if m.Plan.State == StateUnknown {
			if why == "" && m.Plan.Evidence != "" {
				why = m.Name + ": " + m.Plan.Evidence
			}
			continue
		}
		if st == StateUnknown || m.Plan.State.severity() < st.severity() {
			st, ev = m.Plan.State, m.Name+": "+m.Plan.Evidence
		}
	}
	if st == StateUnknown {
		return st, why
	}
	return st, ev
}

// unknownText is the evidence of an unknown state: why the page leaves its
// values unavailable, where it tells (Server.Unavailable); "" otherwise.
func unknownText(s *Server) string {
	out := ""
	for i, u := range s.Unavailable {
		if i > 0 {
			out += "; "
		}
		out += u.Detail
	}
	return out
}
