// Package web serves kvwatch's embedded web UI: a fleet overview, a page per
// server with charts over the in-memory history, an alerts page and a
// capacity planner. The pages are plain HTML, CSS and JavaScript embedded
// with go:embed; charts are drawn with uPlot, which the Makefile installs
// from npm into static/vendor at build time (`make assets`). The UI reads
// serve's report (/api/kvwatch/v1/report), the Prometheus-compatible API
// (/api/v1/query_range, /api/v1/alerts, /api/v1/rules) and the two small
// JSON endpoints this package adds. It holds no state of its own.
package web

import (
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/kvwatch/kvwatch/internal/report"
)

//go:embed static
var static embed.FS

// Vendor files that `make assets` copies from npm's uplot package.
var vendorFiles = []string{"static/vendor/uPlot.iife.min.js", "static/vendor/uPlot.min.css"}

// ErrNoAssets says the uPlot files were not installed before building.
var ErrNoAssets = errors.New("web UI assets missing: static/vendor/uPlot.iife.min.js and uPlot.min.css are installed from npm at build time; run `make assets` and rebuild")

// CheckAssets reports ErrNoAssets when the binary was built without the
// vendor files.
func CheckAssets() error {
	for _, f := range vendorFiles {
		if _, err := fs.Stat(static, f); err != nil {
			return ErrNoAssets
		}
	}
	return nil
}

// Paths of the routes this package adds.
const (
	PathCapacity = "/api/kvwatch/v1/capacity"
	PathSettings = "/api/kvwatch/v1/ui"
	// PathProjection answers the capacity projection over days: serve's
	// history planned as `kvwatch plan` plans a store (forecast.Projection).
	PathProjection = "/api/kvwatch/v1/projection"
)

// Options configure the UI.
type Options struct {
	// Report returns the fleet's current state.
	Report func() report.Report
	// Warning and Critical are the KV usage ratios (0–1) where bars turn
	// amber and red: the alert thresholds.
	Warning, Critical float64
	// RefreshSeconds is how often pages refresh. Default 5.
	RefreshSeconds int
	// HistorySeconds is the history window, for the charts' time range.
	HistorySeconds float64
	// HistoryEnabled is false when serve runs without history: the pages
	// then show no charts and say why.
	HistoryEnabled bool
	// AlertsEnabled is false when no rules are evaluated.
	AlertsEnabled bool
	// Projection returns the capacity projection over days, written as
	// JSON at PathProjection (the planner's chart); nil: none.
	Projection func() any
	// ScrapeIntervalSeconds is serve's scrape interval; rate() ranges in
	// charts are at least 4 of them. Default 15 (a safe upper guess).
	ScrapeIntervalSeconds float64
	// FullResolutionSeconds is how much of the newest history keeps every
	// sample, and DownsampleStepSeconds the step of the older part: a chart
	// reaching past FullResolution uses rate() ranges of at least two steps.
	// Defaults 3600 and 60, as in package history.
	FullResolutionSeconds, DownsampleStepSeconds float64
}

// Handler is what routes are registered on; *http.ServeMux and serve's
// Daemon satisfy it.
type Handler interface {
	Handle(pattern string, h http.Handler)
}

// UI is the registered web UI; its settings follow the config in effect
// (ApplyConfig).
type UI struct {
	mu sync.RWMutex
	o  Options
}

// Register adds the UI at "/", its static files under /static/ and its
// JSON endpoints.
func Register(mux Handler, o Options) *UI {
	ui := &UI{}
	ui.ApplyConfig(o)
	mux.Handle("GET /static/", noAssets(http.HandlerFunc(staticFile)))
	mux.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckAssets(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		b, _ := static.ReadFile("static/index.html")
		w.Write(b)
	}))
	mux.Handle("GET "+PathSettings, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := ui.Options()
		writeJSON(w, map[string]any{
			"kv_usage_warning": o.Warning, "kv_usage_critical": o.Critical,
			"refresh_seconds": o.RefreshSeconds, "history_seconds": o.HistorySeconds,
			"history": o.HistoryEnabled, "alerts": o.AlertsEnabled,
			"scrape_interval_seconds":         o.ScrapeIntervalSeconds,
			"history_full_resolution_seconds": o.FullResolutionSeconds,
			"history_downsample_step_seconds": o.DownsampleStepSeconds,
		})
	}))
	mux.Handle("GET "+PathProjection, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := ui.Options().Projection
		if p == nil {
			http.Error(w, "no capacity projection here: kvwatch serve projects its history", http.StatusNotFound)
			return
		}
		writeJSON(w, p())
	}))
	mux.Handle("GET "+PathCapacity, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("tokens"))
		if err != nil || n <= 0 {
			http.Error(w, "tokens must be a positive integer: the request size in tokens (prompt + output)", http.StatusBadRequest)
			return
		}
		writeJSON(w, report.Plan(ui.Options().Report(), n))
	}))
	return ui
}

// Options returns the UI's options in effect.
func (ui *UI) Options() Options {
	ui.mu.RLock()
	defer ui.mu.RUnlock()
	return ui.o
}

// ApplyConfig replaces the UI's options (a config reload: thresholds,
// history window, scrape interval); zero fields take their defaults.
func (ui *UI) ApplyConfig(o Options) {
	if o.RefreshSeconds <= 0 {
		o.RefreshSeconds = 5
	}
	if o.ScrapeIntervalSeconds <= 0 {
		o.ScrapeIntervalSeconds = 15
	}
	if o.FullResolutionSeconds <= 0 {
		o.FullResolutionSeconds = 3600
	}
	if o.DownsampleStepSeconds <= 0 {
		o.DownsampleStepSeconds = 60
	}
	ui.mu.Lock()
	ui.o = o
	ui.mu.Unlock()
}

func noAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckAssets(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// staticFile serves one embedded file under /static/, and answers 404 for
// every other path: a missing file, a directory (no listing, no index), a
// trailing slash, "..", an empty element or invalid UTF-8 (which
// http.FileServerFS answered with a 500), whether written plainly or
// percent-encoded.
func staticFile(w http.ResponseWriter, r *http.Request) {
	name, _ := strings.CutPrefix(r.URL.Path, "/static/")
	if !fs.ValidPath(name) || name == "." {
		http.NotFound(w, r)
		return
	}
	f, err := static.Open("static/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	rs, seeks := f.(io.ReadSeeker)
	if err != nil || fi.IsDir() || !seeks {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, name, fi.ModTime(), rs)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
