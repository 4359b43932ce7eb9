package signal

// Capacity-planning families (docs/planning.md): per server, then per pool.

// LabelFactor is the label of LimitingFactor: kv, state, batch, queue or none.
const LabelFactor = "factor"

// PoolLabels are the identity labels of the per-pool families, in order:
// a pool is the servers of one role and, when set, one cluster and pool.
func PoolLabels() []string { return []string{LabelRole, LabelCluster, LabelPool} }

// Per-server planning families.
var (
	KVPerRunningRequestTokens = Metric{Name: "kvwatch_kv_per_running_request_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV held per running request now: used over running, in tokens; absent when nothing runs."}
	KVWorkloadHeadroomRequests = Metric{Name: "kvwatch_kv_workload_headroom_requests", Type: Gauge, Unit: "requests",
		Help: "How many more requests of today's mix fit: per DP rank, free KV over the KV held per running request, floored, summed; absent when idle."}
	FinishedRequestTokens = Metric{Name: "kvwatch_kv_finished_request_tokens", Type: Gauge, Unit: "tokens",
		Help: "Mean prompt plus generation tokens of the requests finished since the previous scrape (or since start), from the engine's per-request histograms; absent where it has none."}
	FinishedHeadroomRequests = Metric{Name: "kvwatch_kv_finished_headroom_requests", Type: Gauge, Unit: "requests",
		Help: "How many more requests of the finished requests' mean size fit: per DP rank, free KV over that size, floored, summed."}
	MaxRunningRequests = Metric{Name: "kvwatch_max_running_requests", Type: Gauge, Unit: "requests",
		Help: "The running-request limit: the engine's (SGLang max_running_requests, llama.cpp slots) or the target's max_running_requests in the config."}
	SaturationRatio = Metric{Name: "kvwatch_saturation_ratio", Type: Gauge, Unit: "ratio",
		Help: "The fuller of KV and the batch: max(usage ratio, running over the running-request limit), 0-1."}
	LimitingFactor = Metric{Name: "kvwatch_limiting_factor", Type: Gauge, Unit: "",
		Help:   "1 for what limits admission now (kv, state, batch, queue or none), 0 for the other factors; absent when unknown.",
		Labels: []string{LabelFactor}}
	ServerState = Metric{Name: "kvwatch_server_state", Type: Gauge, Unit: "",
		Help:   "1 for the server's diagnosis (leak_suspected, stuck, full, pressure, ok or idle; docs/runbook.md), 0 for the other states; absent when unknown.",
		Labels: []string{LabelState}}
	DrainMarginTokens = Metric{Name: "kvwatch_drain_margin_tokens", Type: Gauge, Unit: "tokens",
		Help: "If this server were drained: the warning threshold times the rest of its pool's capacity minus the pool's used and queued KV, in tokens (negative: unsafe); pools of more than one server."}
	DrainMarginRatio = Metric{Name: "kvwatch_drain_margin_ratio", Type: Gauge, Unit: "ratio",
		Help: "If this server were drained: the warning threshold minus the usage the rest of its pool would have (negative: unsafe); pools of more than one server."}
)

// Per-pool planning families.
var (
	PoolServers = Metric{Name: "kvwatch_pool_servers", Type: Gauge, Unit: "", Pool: true,
		Help: "Targets in the pool, failed ones included."}
	PoolState = Metric{Name: "kvwatch_pool_state", Type: Gauge, Unit: "", Pool: true,
		Help:   "1 for the most severe diagnosis of the pool's servers (leak_suspected, stuck, full, pressure, ok or idle), 0 for the other states; absent when no server's is known.",
		Labels: []string{LabelState}}
	PoolWorkloadHeadroomRequests = Metric{Name: "kvwatch_pool_workload_headroom_requests", Type: Gauge, Unit: "requests", Pool: true,
		Help: "How many more requests of today's mix fit in the pool: the servers' workload headroom summed, idle servers measured with the pool's mix."}
	PoolFinishedHeadroomRequests = Metric{Name: "kvwatch_pool_finished_headroom_requests", Type: Gauge, Unit: "requests", Pool: true,
		Help: "How many more requests of the finished requests' mean size fit in the pool: the servers' finished-size headroom summed."}
	PoolSaturationRatio = Metric{Name: "kvwatch_pool_saturation_ratio", Type: Gauge, Unit: "ratio", Pool: true,
		Help: "Capacity-weighted saturation of the pool: the sum of capacity times saturation over the sum of capacity, 0-1."}
	PoolDrainMarginTokens = Metric{Name: "kvwatch_pool_drain_margin_tokens", Type: Gauge, Unit: "tokens", Pool: true,
		Help: "N-1 margin of the pool, its largest server drained: the warning threshold times the rest's capacity minus the pool's used and queued KV, in tokens (negative: unsafe); pools of more than one server."}
	PoolDrainMarginRatio = Metric{Name: "kvwatch_pool_drain_margin_ratio", Type: Gauge, Unit: "ratio", Pool: true,
		Help: "N-1 margin of the pool, its largest server drained: the warning threshold minus the usage the rest would have (negative: unsafe); pools of more than one server."}
	// PoolDesiredServers is the autoscaling signal (docs/planning.md,
	// "Autoscaling"): what the generated KEDA ScaledObjects and HPAs scale
	// each pool's workload to.
	PoolDesiredServers = Metric{Name: "kvwatch_pool_desired_servers", Type: Gauge, Unit: "", Pool: true,
		Help: "Servers the pool needs: as many of its mean size as keep its used and queued KV at or under autoscaling.target_kv_usage, plus one so that it still does with a server drained (N-1); absent while a server is down or reports no whole KV tokens."}
)

// Planning lists the per-server planning families in documentation order.
func Planning() []Metric {
	return append([]Metric{KVPerRunningRequestTokens, KVWorkloadHeadroomRequests, FinishedRequestTokens, FinishedHeadroomRequests, MaxRunningRequests, SaturationRatio,
		LimitingFactor, ServerState, DrainMarginTokens, DrainMarginRatio}, Hybrid()...)
}

// PoolPlanning lists the per-pool planning families in documentation order.
func PoolPlanning() []Metric {
	return []Metric{PoolServers, PoolState, PoolWorkloadHeadroomRequests, PoolFinishedHeadroomRequests, PoolSaturationRatio, PoolDrainMarginTokens, PoolDrainMarginRatio,
		PoolDesiredServers}
}
