package scrape

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// The engine's version, for the drift sentinel: no engine writes it on
// its page, so the scraper asks the engine's version endpoint
// (engine.VersionPath) beside the metrics path, not on every scrape:
// on a target's first page, after a failed scrape (an upgrade restarts
// the engine), when the page's metric names changed, when the process'
// start time (process_start_time_seconds, where the page has it) moved,
// and every VersionEvery otherwise (a rolling upgrade behind one address
// may change none of these).

// VersionEvery is how often a target's version is asked again when
// nothing on its page says it changed.
const VersionEvery = 5 * time.Minute

// versionTimeout bounds one ask: a slow version endpoint delays the
// scrape by no more.
const versionTimeout = 2 * time.Second

// versionState is what the scraper knows of a target's version.
type versionState struct {
	engine  string
	version string // "" until an answer gave one
	asked   time.Time
	start   float64 // process_start_time_seconds of the page asked on; 0 when none
}

// engineVersion sets srv.EngineVersion: the adapter's (read from the
// page's own extra bodies), else the engine's version endpoint's answer
// when asking is due, else the last one. An endpoint that does not answer
// a version keeps the last version (a brief failure is no downgrade) but
// not across an engine change.
func (s *Scraper) engineVersion(ctx context.Context, t *Target, metrics url.URL, srv *kv.Server, page *expo.Page, names uint64, now time.Time, failedBefore bool) {
	prev := t.version.Load()
	start := 0.0
	if ss := page.Samples(engine.ProcessStart); len(ss) == 1 {
		start = ss[0].Value
	}
	path := engine.VersionPath(srv.Engine)
	switch {
	case srv.EngineVersion != "" || path == "":
		return // the adapter read it, or there is nothing to ask
	case prev != nil && prev.engine == srv.Engine && !failedBefore && now.Sub(prev.asked) < VersionEvery &&
		prev.start == start && !t.namesChanged(names):
		srv.EngineVersion = prev.version
		return
	}
	st := &versionState{engine: srv.Engine, asked: now, start: start}
	if prev != nil && prev.engine == srv.Engine {
		st.version = prev.version
	}
	u := metrics
	u.Path = siblingPath(metrics.Path, path)
	u.RawQuery = ""
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	// A buffer of its own, not pooled: the answer is small and rare.
	if b, _, _, err := s.fetchUpTo(ctx, t, &u, nil, new(bytes.Buffer), engine.MaxVersionBody); err == nil {
		if v, err := engine.ParseVersion(srv.Engine, b); err == nil {
			st.version = v
		}
	}
	t.version.Store(st)
	srv.EngineVersion = st.version
}

// namesChanged reports whether a page whose names hash to names declares
// other metric names than the target's last page (the drift sentinel's
// fingerprint).
func (t *Target) namesChanged(names uint64) bool {
	d := t.dialect.Load()
	return d == nil || names != d.d.hash
}

// siblingPath is the path of an endpoint p of the engine that serves its
// metrics at metricsPath: /metrics → /p, /x/metrics → /x/p, and
// trtllm-serve's /prometheus/metrics → /p.
func siblingPath(metricsPath, p string) string {
	base := strings.TrimSuffix(metricsPath, "/prometheus/metrics")
	if base == metricsPath {
		base = strings.TrimSuffix(metricsPath, "/metrics")
	}
	return base + p
}
