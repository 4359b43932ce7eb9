package sim

// Hybrid models with Mamba layers (SGLang): each running request holds one
// state slot of the rank's Mamba pool (HybridReqToTokenPool), so a rank
// admits at most mamba_slots requests at once whatever its KV and
// running-request limit allow. SGLang's collector writes each hybrid
// pool's free, evictable (radix-cached) and used counts
// (python/sglang/srt/observability/metrics_collector.py @016d8605, #22726;
// used = size − available − evictable, scheduler_runtime_checker_mixin.py
// @008e7b87); the simulator keeps no cached states: evictable is 0.

// MambaTruth is the Mamba state pool of a hybrid model, in slots.
type MambaTruth struct{ CapacitySlots, UsedSlots int64 }

// mambaTruth is a rank's Mamba pool (nil for a model without one).
func (k *rank) mambaTruth() *MambaTruth {
	n := k.srv.spec.MambaSlots
	if n <= 0 {
		return nil
	}
	return &MambaTruth{CapacitySlots: n, UsedSlots: min(int64(len(k.running)), n)}
}

// admissionLimit is a rank's running cap: its running-request limit, and
// its Mamba slots where it has them.
func admissionLimit(s ServerSpec) int {
	if s.MambaSlots > 0 {
		return min(s.MaxRunningRequests, int(s.MambaSlots))
	}
	return s.MaxRunningRequests
}

// mambaUsage is a rank's mamba_usage (0 for a model without Mamba layers,
// as SGLang writes).
func (r *RankTruth) mambaUsage() float64 {
	if r.Mamba == nil || r.Mamba.CapacitySlots == 0 {
		return 0
	}
	return float64(r.Mamba.UsedSlots) / float64(r.Mamba.CapacitySlots)
}

// hybridTruth fills the ranks' and the server's Mamba pools.
func (s *server) hybridTruth(t *Truth) {
	for i, k := range s.ranks {
		m := k.mambaTruth()
		if m == nil || i >= len(t.Ranks) {
			continue
		}
		t.Ranks[i].Mamba = m
		if t.Mamba == nil {
			t.Mamba = &MambaTruth{}
		}
		t.Mamba.CapacitySlots += m.CapacitySlots
		t.Mamba.UsedSlots += m.UsedSlots
	}
}

// renderHybridCounts writes the current collector's counts of the SWA and
// Mamba pools: 0 for a model without such layers, as SGLang writes.
func renderHybridCounts(gauge func(name, help string, v func(r *RankTruth) float64)) {
	swa := func(f func(s *SWATruth) int64) func(r *RankTruth) float64 {
		return func(r *RankTruth) float64 {
			if r.SWA == nil {
				return 0
			}
			return float64(f(r.SWA))
		}
	}
	mamba := func(f func(m *MambaTruth) int64) func(r *RankTruth) float64 {
		return func(r *RankTruth) float64 {
			if r.Mamba == nil {
				return 0
			}
			return float64(f(r.Mamba))
		}
	}
	zero := func(*RankTruth) float64 { return 0 }
	gauge("swa_available_tokens", "Number of free token slots in the SWA pool (hybrid-SWA only).", swa(func(s *SWATruth) int64 { return s.CapacityTokens - s.UsedTokens }))
	gauge("swa_evictable_tokens", "Number of evictable (radix-cached) token slots in the SWA pool.", zero)
	gauge("swa_used_tokens", "Number of actively used token slots in the SWA pool.", swa(func(s *SWATruth) int64 { return s.UsedTokens }))
	gauge("mamba_available_tokens", "Number of free state slots in the mamba SSM pool (hybrid-SSM only).", mamba(func(m *MambaTruth) int64 { return m.CapacitySlots - m.UsedSlots }))
	gauge("mamba_evictable_tokens", "Number of evictable (radix-cached) state slots in the mamba SSM pool.", zero)
	gauge("mamba_used_tokens", "Number of actively used state slots in the mamba SSM pool.", mamba(func(m *MambaTruth) int64 { return m.UsedSlots }))
}

// stateUsage is the usage of the server's state pool as kvwatch picks it
// (docs/planning.md, "Hybrid models"): its Mamba pool, else its SWA pool;
// false without one.
func (t *Truth) stateUsage() (float64, bool) {
	switch {
	case t.Mamba != nil && t.Mamba.CapacitySlots > 0:
		return float64(t.Mamba.UsedSlots) / float64(t.Mamba.CapacitySlots), true
	case t.SWA != nil && t.SWA.CapacityTokens > 0:
		return float64(t.SWA.UsedTokens) / float64(t.SWA.CapacityTokens), true
	}
	return 0, false
}
