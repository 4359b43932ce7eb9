package kv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHybridPlan: the state pool beside the KV pool, the concurrency
// min(max running, KV in requests, state in requests) and the pool that
// binds, and the state pool as the limiting factor. Every expected value
// is worked out in the comments.
func TestHybridPlan(t *testing.T) {
	mamba := func(capacity, used, ratio Value) CachePool {
		return CachePool{Type: PoolMamba, Tier: TierGPU, Unit: UnitSlots, Capacity: capacity, Used: used, UsageRatio: ratio}
	}
	swa := CachePool{Type: PoolSWA, Tier: TierGPU, Unit: UnitTokens, Capacity: DerivedOf(2000), Used: Of(750), UsageRatio: DerivedOf(0.375)}
	host := CachePool{Type: PoolFull, Tier: TierHost, Unit: UnitTokens, Capacity: Of(8000), Used: Of(100)}
	srv := func(sig Signals, maxRun Value, pools ...CachePool) *Server {
		s := srvOf(RoleUnified, sig)
		s.MaxRunning, s.CachePools = maxRun, pools
		return s
	}
	// The Qwen3-Next page of internal/engine (testdata/source).
	qwen := Signals{Capacity: Of(524288), Used: Of(126000), UsageRatio: Of(126000.0 / 524288), Running: Of(56), Queued: Queues{Waiting: Of(3)}}
	tests := []struct {
		name  string
		s     *Server
		state *StatePlan
		kvReq Value
		conc  Value
		bind  Binding
		limit Factor
		why   string
	}{
		{
			// KV: 126,000 / 56 = 2,250 tok per request, 524,288 / 2,250 =
			// 233.0 → 233. Mamba: 56 / 56 = 1 slot each, 96 slots → 96,
			// 96 − 56 = 40 more. min(128, 233, 96) = 96: the state slots
			// bind. Neither pool at the warning: 3 queued is the limit.
			name:  "Qwen3-Next: the Mamba slots bind",
			s:     srv(qwen, Of(128), host, mamba(DerivedOf(96), Of(56), Of(56.0/96))),
			state: &StatePlan{Type: PoolMamba, Unit: UnitSlots, Capacity: DerivedOf(96), Used: Of(56), UsageRatio: Of(56.0 / 96), PerRequest: DerivedOf(1), CapacityRequests: DerivedOf(96), Headroom: DerivedOf(40)},
			kvReq: DerivedOf(233), conc: DerivedOf(96), bind: BindingMamba,
			limit: FactorQueue, why: "3 requests wait while KV (24% used) and the batch have room",
		},
		{
			// 50,000 / 10 = 5,000 each, 100,000 / 5,000 = 20 > 16 running.
			name:  "dense: no state pool, not an empty one; the running limit binds",
			s:     srv(Signals{Capacity: Of(100000), Used: Of(50000), UsageRatio: DerivedOf(0.5), Running: Of(10), Queued: Queues{Waiting: Of(0)}}, Of(16), host),
			kvReq: DerivedOf(20), conc: DerivedOf(16), bind: BindingRunning, limit: FactorNone,
		},
		{
			// KV 2,000 / 5 = 400 each, 10,000 / 400 = 25; SWA 750 / 5 = 150
			// tok each, 2,000 / 150 = 13.3 → 13, (2,000 − 750) / 150 = 8.3
			// → 8. No running limit on the page: min(25, 13) = 13.
			name:  "SWA: the window's tokens bind",
			s:     srv(Signals{Capacity: Of(10000), Used: Of(2000), UsageRatio: DerivedOf(0.2), Running: Of(5), Queued: Queues{Waiting: Of(0)}}, Value{}, swa),
			state: &StatePlan{Type: PoolSWA, Unit: UnitTokens, Capacity: DerivedOf(2000), Used: Of(750), UsageRatio: DerivedOf(0.375), PerRequest: DerivedOf(150), CapacityRequests: DerivedOf(13), Headroom: DerivedOf(8)},
			kvReq: DerivedOf(25), conc: DerivedOf(13), bind: BindingSWA, limit: FactorNone,
		},
		{
			// Nothing runs: no KV per request, so no KV term and no
			// concurrency; a Mamba request takes one slot: 96 and 96 more.
			name:  "idle hybrid: the concurrency is unknown, the slots are not",
			s:     srv(Signals{Capacity: Of(524288), Used: Of(0), UsageRatio: Of(0), Running: Of(0), Queued: Queues{Waiting: Of(0)}}, Of(128), mamba(DerivedOf(96), Of(0), Of(0))),
			state: &StatePlan{Type: PoolMamba, Unit: UnitSlots, Capacity: DerivedOf(96), Used: Of(0), UsageRatio: Of(0), PerRequest: DerivedOf(1), CapacityRequests: DerivedOf(96), Headroom: DerivedOf(96)},
			limit: FactorNone,
		},
		{
			// Only mamba_usage (older SGLang): the state term is unknown,
			// so the minimum is, though KV's 233 is known.
			name:  "a state pool without counts: unknown, not the KV's",
			s:     srv(qwen, Of(128), mamba(Value{}, Value{}, Of(0.5))),
			state: &StatePlan{Type: PoolMamba, Unit: UnitSlots, UsageRatio: Of(0.5)},
			kvReq: DerivedOf(233), limit: FactorQueue, why: "3 requests wait while KV (24% used) and the batch have room",
		},
		{
			// 92 of 96 slots = 95.8 % ≥ 90 %, KV 24 %: the state pool
			// limits; 92 / 56 slots each, 96 / 1.64 = 58.4 → 58 requests.
			name:  "Mamba slots at the warning: the limit is the state pool",
			s:     srv(qwen, Of(128), mamba(DerivedOf(96), Of(92), Of(92.0/96))),
			state: &StatePlan{Type: PoolMamba, Unit: UnitSlots, Capacity: DerivedOf(96), Used: Of(92), UsageRatio: Of(92.0 / 96), PerRequest: DerivedOf(92.0 / 56), CapacityRequests: DerivedOf(58), Headroom: DerivedOf(2)},
			kvReq: DerivedOf(233), conc: DerivedOf(58), bind: BindingMamba,
			limit: FactorState, why: "state slots (mamba) 95.8% used, at or above the 90% warning",
		},
		{
			// KV 97 % above the warning and above the slots' 95.8 %: KV.
			name: "both at the warning, KV fuller: the limit is KV",
			s: srv(Signals{Capacity: Of(100000), Used: Of(97000), UsageRatio: DerivedOf(0.97), Running: Of(56), Queued: Queues{Waiting: Of(0)}},
				Of(128), mamba(DerivedOf(96), Of(92), Of(92.0/96))),
			// 97,000 / 56 = 1,732.1 each, 100,000 / 1,732.1 = 57.7 → 57 < 58.
			state: &StatePlan{Type: PoolMamba, Unit: UnitSlots, Capacity: DerivedOf(96), Used: Of(92), UsageRatio: Of(92.0 / 96), PerRequest: DerivedOf(92.0 / 56), CapacityRequests: DerivedOf(58), Headroom: DerivedOf(2)},
			kvReq: DerivedOf(57), conc: DerivedOf(57), bind: BindingKV,
			limit: FactorKV, why: "KV 97% used, at or above the 90% warning",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanServer(tt.s, 0, Value{}, 0.9)
			if diff := cmp.Diff(tt.state, p.StatePool, valueCmp); diff != "" {
				t.Errorf("state pool (-want +got):\n%s", diff)
			}
			if !cmp.Equal(p.KVCapacityRequests, tt.kvReq, valueCmp) || !cmp.Equal(p.Concurrency, tt.conc, valueCmp) || p.Binding != tt.bind {
				t.Errorf("KV %+v, concurrency %+v bound by %q; want %+v, %+v, %q", p.KVCapacityRequests, p.Concurrency, p.Binding, tt.kvReq, tt.conc, tt.bind)
			}
			if p.Limit != tt.limit || p.Why != tt.why {
				t.Errorf("limit %s: %q, want %s: %q", p.Limit, p.Why, tt.limit, tt.why)
			}
		})
	}
}

// TestHybridDiagnosis: a state pool fuller than KV and at the warning or
// the critical threshold is the server's state, with its evidence; below,
// or emptier than KV, the KV's diagnosis holds.
func TestHybridDiagnosis(t *testing.T) {
	o := DiagnoseOptions{Warning: 0.9, Critical: 0.97, LeakUsage: 0.8}
	srv := func(kvUsed float64, pool CachePool) *Server {
		s := srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(kvUsed), UsageRatio: DerivedOf(kvUsed / 100000), Running: Of(12), Queued: Queues{Waiting: Of(340)}})
		s.CachePools = []CachePool{pool}
		return s
	}
	mamba := func(used float64) CachePool {
		return CachePool{Type: PoolMamba, Tier: TierGPU, Unit: UnitSlots, Capacity: DerivedOf(12), Used: Of(used), UsageRatio: DerivedOf(used / 12)}
	}
	tests := []struct {
		name     string
		s        *Server
		state    State
		evidence string
	}{
		// 12 / 12 slots ≥ 97 %, KV 12.6 %.
		{"every slot held", srv(12600, mamba(12)), StateFull, "state slots (mamba) 100% used (critical at 97%), KV cache 12.6%; 340 wait"},
		// 11 / 12 = 91.7 %: between warning and critical.
		{"slots at the warning", srv(12600, mamba(11)), StatePressure, "state slots (mamba) 91.7% used (warning at 90%), KV cache 12.6%; 340 wait"},
		// 10 / 12 = 83.3 %: below the warning, KV's state.
		{"slots below the warning", srv(12600, mamba(10)), StateOK, "12.6% of the KV cache used by 12 running requests; 340 wait"},
		// KV 98 % is fuller than the slots' 91.7 %: KV's full.
		{"KV fuller", srv(98000, mamba(11)), StateFull, "98% of the KV cache used (critical at 97%); 340 wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, ev := Diagnose(tt.s, nil, o)
			if st != tt.state || ev != tt.evidence {
				t.Errorf("Diagnose = %s: %q, want %s: %q", st, ev, tt.state, tt.evidence)
			}
		})
	}
}
