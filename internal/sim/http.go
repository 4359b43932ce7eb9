package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// handler serves one simulated server: its engine's pages and the control
// endpoints under /-/sim/.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	if s.spec.Engine == EngineTRTLLMServe {
		// trtllm-serve's Prometheus registry is mounted at
		// /prometheus/metrics; its /metrics is JSON iteration stats.
		mux.HandleFunc("GET "+metricsPath(s.spec.Engine), s.serveMetrics)
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(trtllmIterStats(s.snap.Load()))
		})
	} else {
		mux.HandleFunc("GET /metrics", s.serveMetrics)
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !s.snap.Load().truth.Fault.healthy() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "OK")
	})
	if s.spec.Engine == EngineLlamaCpp {
		mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Write(llamaSlots(s.snap.Load()))
		})
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Write(llamaProps(s.snap.Load()))
		})
	}
	mux.HandleFunc("GET /-/sim/truth", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(s.snap.Load().truth)
	})
	mux.HandleFunc("GET /-/sim/pages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, s.cl.PagesServed())
	})
	mux.HandleFunc("POST /-/sim/load", func(w http.ResponseWriter, r *http.Request) {
		f, err := strconv.ParseFloat(r.FormValue("factor"), 64)
		if err == nil {
			err = s.cl.SetLoad(s.spec.Name, f)
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("load: %v; use POST /-/sim/load?factor=2", err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s: load factor %g\n", s.spec.Name, f)
	})
	mux.HandleFunc("POST /-/sim/fault", func(w http.ResponseWriter, r *http.Request) {
		k, err := ParseFaultKind(r.FormValue("kind"))
		var d time.Duration
		if err == nil && r.FormValue("delay") != "" {
			d, err = time.ParseDuration(r.FormValue("delay"))
		}
		if err != nil {
			http.Error(w, fmt.Sprintf("fault: %v; use POST /-/sim/fault?kind=slow&delay=3s", err), http.StatusBadRequest)
			return
		}
		s.cl.SetFault(s.spec.Name, Fault{Kind: k, Delay: d})
		fmt.Fprintf(w, "%s: fault %s\n", s.spec.Name, k)
	})
	return mux
}

// metricsPath is where an engine serves its Prometheus page.
func metricsPath(engine string) string {
	if engine == EngineTRTLLMServe {
		return "/prometheus/metrics"
	}
	return "/metrics"
}

func (f Fault) healthy() bool { return f.Kind != FaultError && f.Kind != FaultDrop }

// metricsOffBody is what each engine answers on /metrics with metrics off.
func (s *server) metricsOff(w http.ResponseWriter) {
	switch s.spec.Engine {
	case EngineLlamaCpp:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotImplemented)
		w.Write([]byte(`{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with ` + "`--metrics`" + `","type":"not_supported_error"}}`))
	case EngineSGLang, EngineSGLangLegacy, EngineVLLM, EngineVLLMV0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"detail":"Not Found"}`))
	default:
		http.NotFound(w, nil)
	}
}

func (s *server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	snap := s.snap.Load()
	f := snap.truth.Fault
	switch f.Kind {
	case FaultMetricsOff:
		s.metricsOff(w)
		return
	case FaultError:
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	case FaultSlow:
		t := time.NewTimer(f.Delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	body := snap.metrics()
	switch s.spec.Engine {
	case EngineLlamaCpp:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(int64(snap.truth.At/time.Microsecond)+2007966438, 10))
	default:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if f.Kind == FaultDrop {
		// Promise the whole body, send half, then cut the connection.
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
			}
		}
		return
	}
	if _, err := w.Write(body); err == nil {
		s.cl.pages.Add(1)
	}
}
