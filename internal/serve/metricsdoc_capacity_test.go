package serve

import "github.com/kvwatch/kvwatch/internal/signal"

// The provenance column of the planning families (docs/planning.md).
func init() {
	for k, v := range map[string]string{
		signal.KVPerRunningRequestTokens.Name:    "derived: used / running",
		signal.KVWorkloadHeadroomRequests.Name:   "derived: per DP rank floor(available / (used / running)), summed",
		signal.FinishedRequestTokens.Name:        "derived: Δ(prompt + generation histogram sums) / Δcount (vLLM `request_prompt_tokens`/`request_generation_tokens`, SGLang `prompt_tokens_histogram`/`generation_tokens_histogram`)",
		signal.FinishedHeadroomRequests.Name:     "derived: per DP rank floor(available / finished request size), summed",
		signal.PoolFinishedHeadroomRequests.Name: "derived: Σ servers' finished-size headroom",
		signal.MaxRunningRequests.Name:           "direct (SGLang `max_running_requests`, llama.cpp `/props` `total_slots`), or the target's `max_running_requests` in the config",
		signal.SaturationRatio.Name:              "derived: max(usage ratio, running / max running)",
		signal.LimitingFactor.Name:               "derived: the rules of docs/planning.md",
		signal.ServerState.Name:                  "derived: the diagnosis of docs/runbook.md (server states)",
		signal.PoolState.Name:                    "derived: the most severe of the pool's servers' states",
		signal.DrainMarginTokens.Name:            "derived: warning × (pool capacity − this server's) − (Σ used + Σ demand)",
		signal.DrainMarginRatio.Name:             "derived: warning − (Σ used + Σ demand) / (pool capacity − this server's)",
		signal.PoolServers.Name:                  "configured targets",
		signal.PoolWorkloadHeadroomRequests.Name: "derived: Σ servers' workload headroom",
		signal.PoolSaturationRatio.Name:          "derived: Σ capacity × saturation / Σ capacity",
		signal.PoolDrainMarginTokens.Name:        "derived: the largest server's drain margin",
		signal.PoolDrainMarginRatio.Name:         "derived: the largest server's drain margin ratio",
		signal.KVCapacityRequests.Name:           "derived: floor(capacity / (used / running))",
		signal.StateCapacityRequests.Name:        "derived: floor(state capacity / state per running request); SGLang `{swa,mamba}_{available,evictable,used}_tokens`",
		signal.StateHeadroomRequests.Name:        "derived: floor((state capacity − state used) / state per running request)",
		signal.ConcurrencyRequests.Name:          "derived: min(max running, KV capacity in requests, state capacity in requests)",
		signal.BindingPool.Name:                  "derived: the term that gives the concurrency (docs/planning.md, hybrid models)",
		signal.KVPoolCapacitySlots.Name:          "per state pool, derived: SGLang `mamba_{available,evictable,used}_tokens` summed",
		signal.KVPoolUsedSlots.Name:              "per state pool, direct: SGLang `mamba_used_tokens`",
		signal.PoolDesiredServers.Name:           "derived: ceil((Σ used + Σ demand) / (target × Σ capacity / servers)) + 1; the recording rule `pool:kvwatch_pool_desired_servers` computes the same from the exported series",
	} {
		provenanceDoc[k] = v
	}
}
