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
	mux.HandleFunc("GET "+s.eng.path(), s.serveMetrics)
	if s.eng.routes != nil {
		s.eng.routes(s, mux)
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !s.snap.Load().truth.Fault.healthy() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "OK")
	})
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
	mux.HandleFunc("POST /-/sim/version", func(w http.ResponseWriter, r *http.Request) {
		v := r.FormValue("version")
		if err := s.cl.SetVersion(s.spec.Name, v); err != nil {
			http.Error(w, fmt.Sprintf("version: %v; use POST /-/sim/version?version=V", err), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s: version %s\n", s.spec.Name, v)
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

func (f Fault) healthy() bool { return f.Kind != FaultError && f.Kind != FaultDrop }

// metricsOff is what the server's engine answers on its page's path with
// metrics off.
func (s *server) metricsOff(w http.ResponseWriter) {
	if s.eng.metricsOff != nil {
		s.eng.metricsOff(w)
		return
	}
	http.NotFound(w, nil)
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
	if s.eng.client != nil {
		a := s.eng.client(snap.truth.Version).negotiate(r.Header.Get("Accept"))
		body = snap.answer(a)
		w.Header().Set("Content-Type", a.contentType)
	} else if s.eng.header != nil {
		s.eng.header(w.Header(), snap)
	} else {
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
