package scrape

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// sglangDialect writes one SGLang PD prefill page the way prometheus_client
// writes it: the text format with colon names (om false), or OpenMetrics
// with escaping=underscores (om true), where HELP and TYPE lines keep the
// colon (escape_metric_name: a valid legacy name) and sample names do not
// (the sample line escapes with the label-name rune check), a counter's
// TYPE line names the family without _total, _created belongs to the
// counter, and the page ends with # EOF. queue is the bootstrap queue's
// name: num_prefill_prealloc_queue_reqs before sglang#24341,
// num_prefill_bootstrap_queue_reqs after.
func sglangDialect(queue string, om bool) string {
	var b strings.Builder
	const lbl = `{engine_type="prefill",model_name="m",tp_rank="0"}`
	sample := func(name string) string {
		if om {
			return strings.Replace(name, ":", "_", 1)
		}
		return name
	}
	gauge := func(name, help, v string) {
		fmt.Fprintf(&b, "# HELP sglang:%s %s\n# TYPE sglang:%s gauge\n%s%s %s\n", name, help, name, sample("sglang:"+name), lbl, v)
	}
	gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", "100000.0")
	gauge("kv_used_tokens", "Number of actively used token slots in the KV cache pool.", "25000.0")
	gauge("kv_evictable_tokens", "Number of evictable token slots.", "500.0")
	gauge("num_running_reqs", "The number of running requests.", "2.0")
	gauge(queue, "The number of requests in the prefill bootstrap queue.", "3.0")
	if om {
		fmt.Fprintf(&b, "# HELP sglang:prompt_tokens Number of prefill tokens processed.\n# TYPE sglang:prompt_tokens counter\n%s%s 1234.0\n%s%s 1.7e+09\n# EOF\n",
			sample("sglang:prompt_tokens_total"), lbl, sample("sglang:prompt_tokens_created"), lbl)
	} else {
		fmt.Fprintf(&b, "# HELP sglang:prompt_tokens_total Number of prefill tokens processed.\n# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total%s 1234.0\n", lbl)
		fmt.Fprintf(&b, "# HELP sglang:prompt_tokens_created Number of prefill tokens processed.\n# TYPE sglang:prompt_tokens_created gauge\nsglang:prompt_tokens_created%s 1.7e+09\n", lbl)
	}
	return b.String()
}

const (
	ctText      = "text/plain; version=0.0.4; charset=utf-8"
	ctOMEscaped = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
	ctOMUTF8    = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
)

// servePages answers each scrape with the next page and Content-Type of
// pages (the last one again once they run out).
func servePages(t *testing.T, pages [][2]string) string {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1)-1), len(pages)-1)
		w.Header().Set("Content-Type", pages[i][1])
		fmt.Fprint(w, pages[i][0])
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDialectsReadAlike: the colon text page and the same page as
// OpenMetrics with underscore-escaped names (or with colons, as
// allow-utf-8 gets it) are read into exactly the same server, with one
// fingerprint; only the format and escaping tell them apart.
func TestDialectsReadAlike(t *testing.T) {
	const queue = "num_prefill_bootstrap_queue_reqs"
	tests := []struct {
		name, body, ctype, format, escaping string
	}{
		{"text, colons", sglangDialect(queue, false), ctText, "PrometheusText0.0.4", "none"},
		{"text, underscores (a relabelling)", strings.ReplaceAll(sglangDialect(queue, false), "\nsglang:", "\nsglang_"), ctText, "PrometheusText0.0.4", "underscores"},
		{"openmetrics, escaping=underscores", sglangDialect(queue, true), ctOMEscaped, "OpenMetricsText1.0.0", "underscores"},
		{"openmetrics, escaping=allow-utf-8", strings.ReplaceAll(sglangDialect(queue, true), "\nsglang_", "\nsglang:"), ctOMUTF8, "OpenMetricsText1.0.0", "allow-utf-8"},
	}
	s := New(nil2reg(), 0)
	var first *kv.Server
	var firstPrint string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := target(t, config.Target{URL: servePages(t, [][2]string{{tc.body, tc.ctype}})})
			res := s.Scrape(t.Context(), tg)
			if !res.OK() {
				t.Fatalf("%s %v", res.Reason, res.Err)
			}
			sv := res.Server
			// Worked out from the page: 25,000 of 100,000 tokens used, 500
			// evictable, 2 running, 3 in the bootstrap queue, 1,234 prompt
			// tokens.
			if sv.Engine != "sglang" || sv.Role != kv.RolePrefill || sv.Capacity.V != 100000 || sv.Used.V != 25000 || sv.Evictable.V != 500 ||
				sv.Running.V != 2 || sv.Queued.Bootstrap.V != 3 || sv.Counters.PromptTokens.V != 1234 || len(sv.Warnings) != 0 {
				t.Errorf("read %+v", sv)
			}
			if first == nil {
				first, firstPrint = sv, res.Dialect.Fingerprint
			} else if diff := cmp.Diff(first, sv); diff != "" {
				t.Errorf("read otherwise than the colon text page (-text +this):\n%s", diff)
			}
			d := res.Dialect
			if d.Engine != "sglang" || d.Format != tc.format || d.Escaping != tc.escaping || d.Fingerprint != firstPrint || len(d.Fingerprint) != 16 {
				t.Errorf("dialect %+v; want sglang, %s, %s, fingerprint %s", d, tc.format, tc.escaping, firstPrint)
			}
			if res.Changed != nil {
				t.Errorf("first page of the target: changed %q, want nothing", res.Changed)
			}
		})
	}
}

// TestDriftSentinel: a target whose SGLang is upgraded (the prealloc
// queue renamed bootstrap, OpenMetrics with underscores instead of the
// colon text format) reports the change once, on the page where it
// happens, and warns naming it and the signal whose meaning changed while
// the change is recent; a long steady run before and after changes and
// warns nothing.
func TestDriftSentinel(t *testing.T) {
	const steady = 40
	old := [2]string{sglangDialect("num_prefill_prealloc_queue_reqs", false), ctText}
	upgraded := [2]string{sglangDialect("num_prefill_bootstrap_queue_reqs", true), ctOMEscaped}
	var pages [][2]string
	for range steady {
		pages = append(pages, old)
	}
	for range steady {
		pages = append(pages, upgraded)
	}
	tg := target(t, config.Target{URL: servePages(t, pages)})
	s := New(nil2reg(), 0)
	var oldPrint string
	for i := range pages {
		res := s.Scrape(t.Context(), tg)
		if !res.OK() {
			t.Fatalf("scrape %d: %s %v", i, res.Reason, res.Err)
		}
		// The queue is read under either name.
		if res.Server.Queued.Bootstrap.V != 3 {
			t.Errorf("scrape %d: bootstrap queue %v, want 3", i, res.Server.Queued.Bootstrap)
		}
		var warned []string
		for _, w := range res.Server.Warnings {
			if w.Reason == kv.WarnDialect {
				warned = append(warned, w.Detail)
			}
		}
		switch {
		case i == 0:
			oldPrint = res.Dialect.Fingerprint
			fallthrough
		case i < steady:
			if res.Changed != nil || warned != nil {
				t.Fatalf("scrape %d of the steady run: changed %q, warnings %q; want none", i, res.Changed, warned)
			}
		case i == steady:
			want := []string{signal.ChangeFingerprint, signal.ChangeFormat, signal.ChangeEscaping}
			if !slices.Equal(res.Changed, want) {
				t.Errorf("upgrade: changed %q, want %q", res.Changed, want)
			}
			if res.Dialect.Fingerprint == oldPrint {
				t.Errorf("upgrade: fingerprint %s unchanged", oldPrint)
			}
			fallthrough
		default:
			if i > steady && res.Changed != nil {
				t.Fatalf("scrape %d after the upgrade: changed %q, want nothing", i, res.Changed)
			}
			if len(warned) != 1 {
				t.Fatalf("scrape %d: dialect warnings %q, want one", i, warned)
			}
			for _, part := range []string{"format PrometheusText0.0.4 → OpenMetricsText1.0.0", "escaping none → underscores",
				"new: sglang:num_prefill_bootstrap_queue_reqs; gone: sglang:num_prefill_prealloc_queue_reqs", "sglang#24341",
				"a Prometheus scraping this engine now stores the other spelling"} {
				if !strings.Contains(warned[0], part) {
					t.Errorf("scrape %d: warning %q does not say %q", i, warned[0], part)
				}
			}
		}
	}

	// The warning ends DialectWarnFor after the change, and nothing
	// changes with it.
	res := s.Scrape(t.Context(), tg)
	st := tg.dialect.Load()
	page, err := s.parser.Parse([]byte(upgraded[0]), upgraded[1], s.reg.Want)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after time.Duration
		warn  bool
	}{{DialectWarnFor - time.Second, true}, {DialectWarnFor, false}} {
		var sv kv.Server
		sv.Engine = "sglang"
		_, changed := tg.sentinel(page, hashOf(page), upgraded[1], &sv, st.changed.Add(tc.after))
		if changed != nil || sv.Warned(kv.WarnDialect) != tc.warn {
			t.Errorf("%v after the change: changed %q, warned %v; want nothing, %v", tc.after, changed, sv.Warned(kv.WarnDialect), tc.warn)
		}
	}
	if !res.OK() {
		t.Fatal(res.Err)
	}
}

// TestAcceptHeaderIsPrometheus3s: kvwatch asks for a page with the Accept
// header Prometheus 3 sends by default, so that an engine answers kvwatch
// in the format and escaping it answers the store with. The header is
// taken from a real Prometheus 3 scraping a loopback server.
func TestAcceptHeaderIsPrometheus3s(t *testing.T) {
	bin := prometheus3(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Accept"):
		default:
		}
		fmt.Fprint(w, "up_test 1\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: engine\n    static_configs:\n      - targets: [%q]\n", strings.TrimPrefix(srv.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, filepath.Join(dir, "prometheus.log"), bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+testenv.FreeAddr(t))
	select {
	case h := <-got:
		if h != acceptHeader {
			t.Errorf("Prometheus 3 sends Accept: %s\nkvwatch sends:              %s", h, acceptHeader)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Prometheus 3 did not scrape within 30s; see its log")
	}
}

// prometheus3 finds the Prometheus 3 binary tools/prometheus3/build.sh
// builds ($KVWATCH_PROMETHEUS3_DIR, or bin/prometheus3 at the repo root),
// or skips (fails with KVWATCH_REQUIRE_TOOLS=1).
func prometheus3(t *testing.T) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv("KVWATCH_PROMETHEUS3_DIR"); d != "" {
		dirs = append(dirs, d, filepath.Join(d, "prometheus3"))
	}
	dirs = append(dirs, filepath.Join("..", "..", "bin", "prometheus3"))
	for _, d := range dirs {
		p := filepath.Join(d, "prometheus")
		if out, err := exec.Command(p, "--version").CombinedOutput(); err == nil && strings.Contains(string(out), "version 3.") {
			return p
		}
	}
	msg := "no Prometheus 3 in $KVWATCH_PROMETHEUS3_DIR or bin/prometheus3; build it with tools/prometheus3/build.sh"
	if os.Getenv(testenv.RequireToolsEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestMixedSpellings: a page that writes some SGLang names with the colon
// and others with an underscore is read (both spellings are one name),
// but its escaping is "mixed" and it carries a mixed_escaping warning; a
// page in one spelling does not (TestDialectsReadAlike).
func TestMixedSpellings(t *testing.T) {
	page := strings.Replace(sglangDialect("num_prefill_bootstrap_queue_reqs", false), "\nsglang:kv_used_tokens{", "\nsglang_kv_used_tokens{", 1)
	tg := target(t, config.Target{URL: servePages(t, [][2]string{{page, ctText}})})
	res := New(nil2reg(), 0).Scrape(t.Context(), tg)
	if !res.OK() {
		t.Fatalf("%s %v", res.Reason, res.Err)
	}
	if res.Server.Used.V != 25000 || res.Server.Capacity.V != 100000 {
		t.Errorf("read used %v of %v, want 25000 of 100000", res.Server.Used, res.Server.Capacity)
	}
	if res.Dialect.Escaping != "mixed" || !res.Server.Warned(kv.WarnMixedEscaping) {
		t.Errorf("escaping %q, warnings %v; want mixed and a mixed_escaping warning", res.Dialect.Escaping, res.Server.Warnings)
	}
}

// hashOf is the hash of page's names, as the scraper passes it to the
// sentinel.
func hashOf(page *expo.Page) uint64 {
	h, _ := fingerprint(page, false)
	return h
}
