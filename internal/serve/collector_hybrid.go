package serve

import (
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// collectHybrid exports a server's concurrency and the pool that binds it
// (docs/planning.md, "Hybrid models"), and its state pool's capacity and
// headroom in requests, labelled with the pool's type. Unknown values have
// no series.
func collectHybrid(em *emitter, names, id []string, p *kv.ServerPlan) {
	known := func(m signal.Metric, v kv.Value, extra ...string) {
		if v.Trusted() {
			em.emit(m, v.V, names, id, extra...)
		}
	}
	known(signal.KVCapacityRequests, p.KVCapacityRequests)
	if st := p.StatePool; st != nil {
		known(signal.StateCapacityRequests, st.CapacityRequests, st.Type)
		known(signal.StateHeadroomRequests, st.Headroom, st.Type)
	}
	if p.Concurrency.Trusted() {
		known(signal.ConcurrencyRequests, p.Concurrency)
		oneHot(em, signal.BindingPool, names, id, p.Binding, kv.Bindings())
	}
}
