package sim

// Engine names of SGLang's routers.
const (
	EngineRouter       = "sglang-router"        // SGLang model gateway (smg_*)
	EngineRouterLegacy = "sglang-router-legacy" // SGLang router before the gateway rename (sgl_router_*)
)

// routerEngine is the SGLang model gateway, routerLegacyEngine the router
// before it: router servers, no KV of their own.
var (
	routerEngine       = engine{name: EngineRouter, render: renderRouter, role: RoleRouter}
	routerLegacyEngine = engine{name: EngineRouterLegacy, render: renderRouterLegacy, role: RoleRouter}
)

// renderRouter writes the SGLang model gateway's smg_* families
// (sgl-model-gateway/src/observability/metrics.rs; engine-metrics.md §2):
// worker health, pool size and in-flight requests; no KV.
func renderRouter(p *snapshot) []byte {
	t := p.gauges()
	live := &p.truth
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	typ := func(name, kind string) { w.b = append(w.b, "# TYPE "+name+" "+kind+"\n"...) }
	wl := func(wt WorkerTruth) string {
		kind := "regular"
		if wt.Role == RolePrefill || wt.Role == RoleDecode {
			kind = wt.Role
		}
		return labels(true, "worker", wt.URL, "worker_type", kind)
	}
	backend := "regular"
	if p.srv.pd {
		backend = "pd"
	}
	typ("smg_router_requests_total", "counter")
	w.sample("smg_router_requests_total", labels(true, "router_type", "http", "backend_type", backend, "endpoint", "/generate"), float64(live.Routed))
	typ("smg_router_request_errors_total", "counter")
	w.sample("smg_router_request_errors_total", labels(true, "router_type", "http", "backend_type", backend, "endpoint", "/generate", "error_type", "no_available_workers"), float64(live.RouteErrors))
	typ("smg_worker_pool_size", "gauge")
	w.sample("smg_worker_pool_size", labels(true, "worker_type", "all"), float64(len(t.Workers)))
	typ("smg_worker_health", "gauge")
	for _, wt := range t.Workers {
		w.sample("smg_worker_health", wl(wt), b2f(wt.Healthy))
	}
	w.b = append(w.b, "# HELP smg_worker_requests_active Currently running requests per worker\n"...)
	typ("smg_worker_requests_active", "gauge")
	for _, wt := range t.Workers {
		w.sample("smg_worker_requests_active", wl(wt), float64(wt.Active))
	}
	typ("smg_worker_selection_total", "counter")
	for _, wt := range live.Workers {
		w.sample("smg_worker_selection_total", join(wl(wt), `policy="cache_aware"`), float64(wt.Selected))
	}
	return w.b
}

// renderRouterLegacy writes the pre-gateway sgl_router_* families
// (sgl-router/src/metrics.rs).
func renderRouterLegacy(p *snapshot) []byte {
	t := p.gauges()
	live := &p.truth
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	typ := func(name, kind string) { w.b = append(w.b, "# TYPE "+name+" "+kind+"\n"...) }
	typ("sgl_router_requests_total", "counter")
	w.sample("sgl_router_requests_total", `route="/generate"`, float64(live.Routed))
	typ("sgl_router_active_workers", "gauge")
	n := 0
	for _, wt := range t.Workers {
		if wt.Healthy {
			n++
		}
	}
	w.sample("sgl_router_active_workers", "", float64(n))
	typ("sgl_router_worker_health", "gauge")
	for _, wt := range t.Workers {
		w.sample("sgl_router_worker_health", labels(true, "worker", wt.URL), b2f(wt.Healthy))
	}
	typ("sgl_router_worker_load", "gauge")
	for _, wt := range t.Workers {
		w.sample("sgl_router_worker_load", labels(true, "worker", wt.URL), float64(wt.Active))
	}
	typ("sgl_router_processed_requests_total", "counter")
	for _, wt := range live.Workers {
		w.sample("sgl_router_processed_requests_total", labels(true, "worker", wt.URL), float64(wt.Processed))
	}
	return w.b
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
