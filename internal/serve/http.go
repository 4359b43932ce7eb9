package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Paths of serve's own routes; its health checks' are signal.PathHealthy
// and signal.PathReady, which the generated stack probes.
const (
	PathMetrics = "/metrics"
	PathProbe   = "/probe"
	PathReload  = "/-/reload"
	PathReport  = "/api/kvwatch/v1/report"
	// PathPprof serves Go's runtime profiles (heap, CPU, goroutines), as
	// Prometheus does, behind the same TLS and authentication as the rest.
	PathPprof = "/debug/pprof/"
)

func (d *Daemon) routes() {
	g := prometheus.Gatherers{d.kvReg, d.own}
	d.mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      slogPromLogger{d},
		ErrorHandling: promhttp.ContinueOnError,
		// One exposition of thousands of servers takes about a second of
		// CPU (docs/benchmarks.md); more at once only queue.
		MaxRequestsInFlight: 4,
	}))
	d.mux.HandleFunc("GET "+PathProbe, d.serveProbe)
	d.mux.HandleFunc("GET "+signal.PathHealthy, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "kvwatch is healthy.")
	})
	d.mux.HandleFunc("GET "+signal.PathReady, func(w http.ResponseWriter, r *http.Request) {
		if !d.Ready() {
			http.Error(w, "kvwatch is not ready: the first round of scrapes is still running.", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "kvwatch is ready.")
	})
	d.mux.HandleFunc(PathReload, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "reload with POST "+PathReload, http.StatusMethodNotAllowed)
			return
		}
		if d.opts.Reload == nil {
			http.Error(w, "this kvwatch has no config to reload", http.StatusNotImplemented)
			return
		}
		if err := d.opts.Reload(r.Context()); err != nil {
			http.Error(w, fmt.Sprintf("reload failed, the previous config keeps running: %v", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "config reloaded.")
	})
	d.mux.HandleFunc(PathPprof, pprof.Index)
	d.mux.HandleFunc(PathPprof+"cmdline", pprof.Cmdline)
	d.mux.HandleFunc(PathPprof+"profile", pprof.Profile)
	d.mux.HandleFunc(PathPprof+"symbol", pprof.Symbol)
	d.mux.HandleFunc(PathPprof+"trace", pprof.Trace)
	d.mux.HandleFunc("GET "+PathReport, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		if r.URL.Query().Has("pretty") {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(d.Report()); err != nil {
			d.log.Debug("write report", "err", err)
		}
	})
}

// newServer is the HTTP server of one listener: the timeouts of
// conns.go, the connection limiter's hooks, and the guard in front of
// everything. exporter-toolkit's web.Serve puts its authentication in
// front of the server's handler and then serves; BaseContext runs after
// that, before the first connection is accepted, and puts the guard in
// front of both, so that it sees the 401s of wrong passwords and refuses
// a throttled source before bcrypt runs.
func (d *Daemon) newServer() *http.Server {
	srv := &http.Server{Handler: d.mux, ReadHeaderTimeout: d.timeouts.readHeader, ReadTimeout: d.timeouts.read, IdleTimeout: d.timeouts.idle,
		ConnState: d.conns.connState, ConnContext: connContext,
		ErrorLog: slog.NewLogLogger(d.log.Handler(), slog.LevelWarn)}
	srv.BaseContext = func(net.Listener) context.Context {
		srv.Handler = d.guard.wrap(srv.Handler)
		return context.Background()
	}
	return srv
}

// slogPromLogger adapts the daemon's logger to promhttp's error log.
type slogPromLogger struct{ d *Daemon }

func (l slogPromLogger) Println(v ...any) { l.d.log.Error("serve /metrics", "err", fmt.Sprint(v...)) }

// landingPage links serve's routes (used when no other package handles "/").
func (d *Daemon) landingPage() http.Handler {
	lp, err := web.NewLandingPage(web.LandingConfig{
		Name:        "kvwatch",
		Description: "KV-cache exporter for LLM inference servers",
		Version:     version.Info(),
		Links: []web.LandingLinks{
			{Address: PathMetrics, Text: "Metrics"},
			{Address: PathReport, Text: "Report (JSON)"},
			{Address: signal.PathReady, Text: "Readiness"},
		},
	})
	if err != nil {
		return http.NotFoundHandler()
	}
	return lp
}
