package scrape

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// versionedVLLM is a vLLM server whose version, process start and
// answers the test sets between scrapes.
type versionedVLLM struct {
	mu        sync.Mutex
	version   string // what /version answers: a version, or a body when it starts with '<'
	start     float64
	failNext  bool
	slow      time.Duration
	hostile   http.HandlerFunc // answers /version when set
	asks      atomic.Int64
	gotAuthOn atomic.Int64 // /version requests that carried the target's credentials
}

func (v *versionedVLLM) set(f func(v *versionedVLLM)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	f(v)
}

func (v *versionedVLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	version, start, slow, hostile := v.version, v.start, v.slow, v.hostile
	fail := v.failNext && r.URL.Path == "/metrics"
	if fail {
		v.failNext = false
	}
	v.mu.Unlock()
	switch r.URL.Path {
	case "/version":
		v.asks.Add(1)
		if _, pw, ok := r.BasicAuth(); ok && pw == "s3cret" {
			v.gotAuthOn.Add(1)
		}
		if slow > 0 {
			time.Sleep(slow)
		}
		if hostile != nil {
			hostile(w, r)
			return
		}
		if strings.HasPrefix(version, "<") {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, version)
			return
		}
		fmt.Fprintf(w, `{"version":%q}`, version)
	case "/metrics":
		if fail {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %g\n%s", start, vllmPage)
	default:
		http.NotFound(w, r)
	}
}

// TestEngineVersion: the scraper asks vLLM's /version on the first page
// and again only when something says the engine may have changed (the
// process' start moved, a scrape failed, five minutes passed), never on
// a steady run; an upgrade across vllm#48860 is a version change whose
// warning names it; an answer that is no version keeps the last one; a
// slow endpoint (3 s, the scrape's timeout 5 s), an endless body and a
// gzip bomb fail nothing and keep the version; a
// release whose names the page contradicts gets version_mismatch.
func TestEngineVersion(t *testing.T) {
	v := &versionedVLLM{version: "0.25.1", start: 1.7e9}
	srv := httptest.NewServer(v)
	defer srv.Close()
	tg := target(t, config.Target{URL: srv.URL, ScrapeTimeout: model.Duration(5 * time.Second),
		HTTPClientConfig: promcfg.HTTPClientConfig{BasicAuth: &promcfg.BasicAuth{Username: "kvwatch", Password: "s3cret"}}})
	s := New(nil2reg(), 0)

	type want struct {
		asks     int64
		version  string
		changed  []string
		warnings map[string][]string // reason → parts of its text
	}
	step := func(name string, w want) {
		t.Helper()
		res := s.Scrape(t.Context(), tg)
		if !res.OK() {
			t.Fatalf("%s: %s %v", name, res.Reason, res.Err)
		}
		if got := v.asks.Load(); got != w.asks {
			t.Errorf("%s: /version asked %d times in all, want %d", name, got, w.asks)
		}
		if res.Server.EngineVersion != w.version || res.Dialect.Version != w.version {
			t.Errorf("%s: version %q (dialect %q), want %q", name, res.Server.EngineVersion, res.Dialect.Version, w.version)
		}
		if !slices.Equal(res.Changed, w.changed) {
			t.Errorf("%s: changed %v, want %v", name, res.Changed, w.changed)
		}
		got := map[string]string{}
		for _, x := range res.Server.Warnings {
			got[x.Reason] += x.Detail
		}
		for reason, parts := range w.warnings {
			for _, p := range parts {
				if !strings.Contains(got[reason], p) {
					t.Errorf("%s: %s warning %q does not say %q", name, reason, got[reason], p)
				}
			}
			delete(got, reason)
		}
		if w.warnings[kv.WarnDialect] == nil {
			delete(got, kv.WarnDialect) // the last change's warning lasts 5 minutes
		}
		if len(got) > 0 {
			t.Errorf("%s: unexpected warnings %v", name, got)
		}
	}

	step("first page", want{asks: 1, version: "0.25.1"})
	for i := range 3 {
		step(fmt.Sprintf("steady %d", i), want{asks: 1, version: "0.25.1"})
	}
	// An upgrade behind one address that moves nothing on the page is not
	// asked before VersionEvery.
	v.set(func(v *versionedVLLM) { v.version = "0.26.0" })
	step("upgraded, nothing on the page moved", want{asks: 1, version: "0.25.1"})
	v.set(func(v *versionedVLLM) { v.start = 1.7e9 + 600 })
	step("the process restarted", want{asks: 2, version: "0.26.0", changed: []string{signal.ChangeVersion},
		warnings: map[string][]string{kv.WarnDialect: {"version 0.25.1 → 0.26.0", "vllm#48860", "prefix hit ratio steps"}}})
	step("steady after the upgrade", want{asks: 2, version: "0.26.0"})

	v.set(func(v *versionedVLLM) { v.version, v.start = "<html><body>502 Bad Gateway</body></html>", 1.7e9+700 })
	step("an HTML answer keeps the version", want{asks: 3, version: "0.26.0"})

	v.set(func(v *versionedVLLM) { v.version, v.failNext = "0.26.1", true })
	if res := s.Scrape(t.Context(), tg); res.OK() {
		t.Fatal("the failing scrape succeeded")
	}
	step("after a failed scrape", want{asks: 4, version: "0.26.1", changed: []string{signal.ChangeVersion},
		warnings: map[string][]string{kv.WarnDialect: {"version 0.26.0 → 0.26.1"}}})
	if w := v.asks.Load(); w != 4 {
		t.Fatalf("asks %d", w)
	}

	// Five minutes on, the version is asked again.
	st := *tg.version.Load()
	st.asked = st.asked.Add(-VersionEvery)
	tg.version.Store(&st)
	v.set(func(v *versionedVLLM) { v.version = "0.27.0" })
	step("five minutes on", want{asks: 5, version: "0.27.0", changed: []string{signal.ChangeVersion}})

	v.set(func(v *versionedVLLM) { v.version, v.start, v.slow = "0.28.0", 1.7e9+800, 3*time.Second })
	step("a slow /version keeps the version", want{asks: 6, version: "0.27.0"})

	v.set(func(v *versionedVLLM) { v.slow, v.hostile, v.start = 0, testenv.EndlessBody, 1.7e9+810 })
	step("an endless /version keeps the version", want{asks: 7, version: "0.27.0"})
	v.set(func(v *versionedVLLM) { v.hostile, v.start = testenv.GzipBomb(), 1.7e9+820 })
	step("a gzip bomb on /version keeps the version", want{asks: 8, version: "0.27.0"})

	v.set(func(v *versionedVLLM) { v.version, v.start, v.hostile = "0.8.5", 1.7e9+900, nil })
	step("a release the names contradict", want{asks: 9, version: "0.8.5", changed: []string{signal.ChangeVersion},
		warnings: map[string][]string{
			kv.WarnVersionMismatch: {"vllm says it is 0.8.5", "vllm:kv_cache_usage_perc is on the page, but 0.8.5 has it only from 0.9.2"},
			kv.WarnDialect:         {"version 0.27.0 → 0.8.5", "vllm#48860"},
		}})
	if n := v.gotAuthOn.Load(); n != v.asks.Load() {
		t.Errorf("%d of %d /version requests carried the target's credentials", n, v.asks.Load())
	}
}
