package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// sglangRouterSpec reads the SGLang router / model gateway: current "smg_"
// names and the older "sgl_router_" ones. A router holds no KV cache: its KV
// signals stay unavailable, never 0; it reports worker health.
var sglangRouterSpec = Spec{
	Name:         "sgl-router",
	DisabledHint: "the SGLang router serves metrics on a listener of their own, --prometheus-port (default 29000), not on its API port; sgl-router before the model gateway binds it to 127.0.0.1 unless started with --prometheus-host 0.0.0.0",
	Answer:       emptyAnswer(404),
	MetricsPort:  29000,
	Detect:       []string{smgHealth, smgPoolSize, smgRequests, sglrHealth, sglrActive, sglrRequests},
	Reads:        []string{smgWorkerActive},
	Normalize:    normalizeSGLangRouter,
}

const (
	smgHealth       = "smg_worker_health"
	smgPoolSize     = "smg_worker_pool_size"
	smgRequests     = "smg_router_requests_total"
	sglrHealth      = "sgl_router_worker_health"
	sglrActive      = "sgl_router_active_workers"
	sglrRequests    = "sgl_router_requests_total"
	smgWorkerActive = "smg_worker_requests_active"
)

// normalizeSGLangRouter is sglangRouterSpec's Normalize.
func normalizeSGLangRouter(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "sgl-router", Generation: "smg", Role: kv.RoleRouter, Router: &kv.Router{}}
	health, size := smgHealth, smgPoolSize
	if !p.Has(smgHealth) && !p.Has(smgPoolSize) && !p.Has(smgRequests) {
		srv.Generation = "sgl_router"
		health, size = sglrHealth, sglrActive
	}
	var total, healthy float64
	n := 0
	for _, s := range p.Samples(health) {
		if !expo.Finite(s.Value) {
			continue
		}
		n++
		total++
		if s.Value >= 1 {
			healthy++
		}
	}
	if n > 0 {
		srv.Router.WorkersTotal = kv.DerivedOf(total)
		srv.Router.WorkersHealthy = kv.DerivedOf(healthy)
	} else {
		var sz float64
		ok := false
		for _, s := range p.Samples(size) {
			if expo.Finite(s.Value) {
				sz += s.Value
				ok = true
			}
		}
		if ok {
			srv.Router.WorkersTotal = kv.Of(sz)
		}
	}
	var active float64
	ok := false
	for _, s := range p.Samples(smgWorkerActive) {
		if expo.Finite(s.Value) {
			active += s.Value
			ok = true
		}
	}
	if ok {
		srv.Running = kv.DerivedOf(active)
	}
	return srv, nil
}
