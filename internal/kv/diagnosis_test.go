package kv

import (
	"strings"
	"testing"
)

// The seed's PD SGLang decode server: 2,581,504 tokens, context 524,288.
func decodeServer(used, running, prealloc, transfer float64) *Server {
	s := &Server{Engine: "sglang", Role: RoleDecode, ContextLength: Of(524288),
		Ranks: []Rank{{RankID: RankID{TP: "0"}, Signals: Signals{Capacity: Of(2581504), Used: Of(used), Running: Of(running),
			Queued: Queues{Waiting: Of(0), Prealloc: Of(prealloc), Transfer: Of(transfer)}}}}}
	s.Rollup()
	return s
}

func TestDiagnose(t *testing.T) {
	o := DiagnoseOptions{Warning: 0.90, Critical: 0.97, LeakUsage: 0.50}
	progress := &Rates{GenTokensPS: DerivedOf(1200), PromptTokensPS: DerivedOf(0), WindowSeconds: 5}
	still := &Rates{GenTokensPS: DerivedOf(0), PromptTokensPS: DerivedOf(0), WindowSeconds: 5}
	prefill := func(used, running, inflight float64) *Server {
		s := &Server{Engine: "sglang", Role: RolePrefill, ContextLength: Of(524288),
			Ranks: []Rank{{Signals: Signals{Capacity: Of(2581504), Used: Of(used), Running: Of(running),
				Queued: Queues{Waiting: Of(0), Inflight: Of(inflight)}}}}}
		s.Rollup()
		return s
	}
	for _, c := range []struct {
		name     string
		s        *Server
		rates    *Rates
		want     State
		evidence string
	}{
		// The case: router load ×8 and a leak on decode; 99.9 %
		// held, nothing runs, 20,312 requests wait for pre-allocation.
		{"leak under traffic", decodeServer(2579000, 0, 20312, 0), still, StateLeak,
			"99.9% of the KV cache (2,579,000 tok) is held while no request runs; 20,312 wait. Blocks are not freed after requests end: restart the engine"},
		// The same fill, busy: full, not a leak.
		{"full under load", decodeServer(2579000, 180, 20312, 0), progress, StateFull,
			"99.9% of the KV cache used (critical at 97%); 20,312 wait"},
		// Requests in a KV transfer hold KV without running.
		{"transfer holds", decodeServer(1600000, 0, 0, 40), progress, StateOK, "62% of the KV cache used by 0 running requests, 40 in a KV transfer"},
		// More held than its running requests could hold at their context length.
		{"leak beside running", decodeServer(2000000, 3, 0, 0), progress, StateLeak,
			"2,000,000 tok of KV held by 3 running requests of at most 524,288 tok each. Blocks are not freed after requests end: restart the engine"},
		{"quiet leak", decodeServer(1400000, 0, 0, 0), nil, StateLeak,
			"54.2% of the KV cache (1,400,000 tok) is held while no request runs. Blocks are not freed after requests end: restart the engine"},
		{"stuck", decodeServer(300000, 12, 0, 0), still, StateStuck, "12 requests run but no token was processed in the last 5s. The engine makes no progress"},
		{"pressure", decodeServer(2350000, 150, 0, 0), progress, StatePressure, "91% of the KV cache used (warning at 90%)"},
		{"ok", decodeServer(774451, 40, 0, 0), progress, StateOK, "30% of the KV cache used by 40 running requests"},
		{"idle", decodeServer(0, 0, 0, 0), nil, StateIdle, "nothing runs or waits; 0% of the KV cache held"},
		{"idle with a little held", decodeServer(25815, 0, 0, 0), nil, StateIdle, "nothing runs or waits; 1% of the KV cache held"},
		// PD prefill: requests whose KV is being sent out hold it.
		{"prefill sending", prefill(1500000, 0, 6), progress, StateOK, "58.1% of the KV cache used by 0 running requests, 6 in a KV transfer"},
		{"prefill leak", prefill(1500000, 0, 0), still, StateLeak,
			"58.1% of the KV cache (1,500,000 tok) is held while no request runs. Blocks are not freed after requests end: restart the engine"},
		// Older SGLang PD prefill reports 0 running while it works: tokens
		// flowing are progress, not a leak.
		{"prefill reporting no running", prefill(1500000, 0, 0), &Rates{GenTokensPS: DerivedOf(0), PromptTokensPS: DerivedOf(52000), WindowSeconds: 5},
			StateOK, "58.1% of the KV cache used by 0 running requests"},
		// llama.cpp's idle slots keep their tokens: held, not leaked.
		{"prompt cache in used", func() *Server { s := decodeServer(1400000, 0, 0, 0); s.UsedHoldsCache = true; return s }(), nil,
			StateIdle, "nothing runs or waits; 54.2% of the KV cache held"},
		{"unknown", &Server{Role: RoleDecode}, nil, StateUnknown, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, ev := Diagnose(c.s, c.rates, o)
			if st != c.want || ev != c.evidence {
				t.Errorf("Diagnose = %q, %q\nwant      %q, %q", st, ev, c.want, c.evidence)
			}
		})
	}
}

// A pool takes its most severe server's state, with that server's
// evidence under its name; unknown servers do not count.
func TestPoolState(t *testing.T) {
	o := DiagnoseOptions{Warning: 0.90, Critical: 0.97, LeakUsage: 0.50}
	member := func(name string, s *Server) PlanMember {
		p := PlanServer(s, 0, Value{}, o.Warning)
		p.State, p.Evidence = Diagnose(s, nil, o)
		return PlanMember{Key: PoolKey{Role: s.Role}, Name: name, Server: s, Plan: &p}
	}
	pools := PlanPools([]PlanMember{
		member("d0", decodeServer(774451, 40, 0, 0)),
		member("d1", decodeServer(2579000, 0, 20312, 0)),
		member("d2", decodeServer(2579000, 180, 0, 0)),
		{Key: PoolKey{Role: RoleDecode}, Name: "d3"},
	}, o.Warning, 0.8)
	if len(pools) != 1 || pools[0].State != StateLeak || !strings.HasPrefix(pools[0].Evidence, "d1: 99.9% of the KV cache") {
		t.Errorf("pool = %q %q, want d1's leak", pools[0].State, pools[0].Evidence)
	}
}

// A pool whose servers are all unknown says why with the first reason a
// page gives, under the server's name (before, its state line said
// nothing); a known server's state wins over it.
func TestPoolStateUnknownSaysWhy(t *testing.T) {
	o := DiagnoseOptions{Warning: 0.90, Critical: 0.97, LeakUsage: 0.50}
	member := func(name string, s *Server) PlanMember {
		p := PlanServer(s, 0, Value{}, o.Warning)
		p.State, p.Evidence = Diagnose(s, nil, o)
		return PlanMember{Key: PoolKey{Role: RoleUnified}, Name: name, Server: s, Plan: &p}
	}
	llama := func(why string) *Server {
		s := &Server{Engine: "llamacpp", Role: RoleUnified, Ranks: []Rank{{Signals: Signals{Used: Of(1967), Running: Of(4), Queued: Queues{Waiting: Of(0)}}}}}
		if why != "" {
			s.Explain(UnknownConfig, "%s", why)
		}
		s.Rollup()
		return s
	}
	pools := PlanPools([]PlanMember{member("bare", llama("")), member("l0", llama("KV capacity unavailable: set kv_unified")), member("l1", llama("other"))}, o.Warning, 0.8)
	if len(pools) != 1 || pools[0].State != StateUnknown || pools[0].Evidence != "l0: KV capacity unavailable: set kv_unified" {
		t.Errorf("pool = %q %q, want unknown with l0's reason", pools[0].State, pools[0].Evidence)
	}
	pools = PlanPools([]PlanMember{member("l0", llama("KV capacity unavailable: set kv_unified")), member("d0", decodeServer(774451, 40, 0, 0))}, o.Warning, 0.8)
	if len(pools) != 1 || pools[0].State != StateOK || !strings.HasPrefix(pools[0].Evidence, "d0: ") {
		t.Errorf("pool = %q %q, want d0's ok", pools[0].State, pools[0].Evidence)
	}
}

// TestDiagnoseUnknownSaysWhy: an unknown state carries the page's reasons
// for its unavailable values (Server.Unavailable) as its evidence, and a
// prefill page whose running count is no count is never a leak.
func TestDiagnoseUnknownSaysWhy(t *testing.T) {
	o := DiagnoseOptions{Warning: 0.90, Critical: 0.97, LeakUsage: 0.50}
	asleep := &Server{Engine: "vllm", Ranks: []Rank{{Signals: Signals{Running: Of(0), Queued: Queues{Waiting: Of(0)}}}}}
	asleep.Explain(UnknownAsleep, "KV unavailable: the engine is asleep (weights_offloaded)")
	asleep.Rollup()
	// Old SGLang PD prefill: 60 % held, running not read (always 0 there).
	prefill := &Server{Engine: "sglang", Role: RolePrefill,
		Ranks: []Rank{{Signals: Signals{Capacity: Of(1000), Used: Of(600), Queued: Queues{Waiting: Of(0), Inflight: Of(0)}}}}}
	prefill.Explain(UnknownVersion, "running requests unavailable: old prefill page")
	prefill.Rollup()
	for _, c := range []struct {
		name     string
		s        *Server
		want     State
		evidence string
	}{
		{"asleep", asleep, StateUnknown, "KV unavailable: the engine is asleep (weights_offloaded)"},
		{"old prefill, 60 % held", prefill, StateOK, "60% of the KV cache used"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, ev := Diagnose(c.s, nil, o)
			if st != c.want || ev != c.evidence {
				t.Errorf("Diagnose = %q, %q; want %q, %q", st, ev, c.want, c.evidence)
			}
		})
	}
}
