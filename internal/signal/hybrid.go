package signal

// Hybrid models (docs/planning.md, "Hybrid models"): the state pool beside
// the KV pool, and what caps a server's concurrency.

// LabelBinding is the label of BindingPool: kv_tokens, mamba_slots,
// swa_tokens or running_limit.
const LabelBinding = "binding"

// Per-server families of hybrid models, beside the planning families.
var (
	KVCapacityRequests = Metric{Name: "kvwatch_kv_capacity_requests", Type: Gauge, Unit: "requests",
		Help: "How many requests of today's mix the KV pool holds at once: capacity over the KV held per running request, floored; absent when nothing runs."}
	StateCapacityRequests = Metric{Name: "kvwatch_state_capacity_requests", Type: Gauge, Unit: "requests", Labels: []string{LabelPoolType},
		Help: "How many requests a hybrid model's state pool (mamba slots, swa tokens) holds at once: its capacity over what a running request holds in it, floored."}
	StateHeadroomRequests = Metric{Name: "kvwatch_state_headroom_requests", Type: Gauge, Unit: "requests", Labels: []string{LabelPoolType},
		Help: "How many more requests a hybrid model's state pool has room for: its free capacity over what a running request holds in it, floored."}
	ConcurrencyRequests = Metric{Name: "kvwatch_concurrency_requests", Type: Gauge, Unit: "requests",
		Help: "How many requests the server runs at once: min(running-request limit, KV capacity in requests, state pool capacity in requests); absent when a term is unknown."}
	BindingPool = Metric{Name: "kvwatch_binding_pool", Type: Gauge, Unit: "", Labels: []string{LabelBinding},
		Help: "1 for what caps the server's concurrency (kv_tokens, mamba_slots, swa_tokens or running_limit), 0 for the others; absent when unknown."}
)

// Hybrid lists the hybrid-model families in documentation order.
func Hybrid() []Metric {
	return []Metric{KVCapacityRequests, StateCapacityRequests, StateHeadroomRequests, ConcurrencyRequests, BindingPool}
}
