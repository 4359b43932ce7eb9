package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestTopOnce prints one plain frame of a PD SGLang fleet (stdout is not a
// terminal here): no escape sequences, one row per server, rates unknown
// after a single scrape.
func TestTopOnce(t *testing.T) {
	prefill := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-prefill-dp2-tp2.prom"))
	decode := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	router := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "smg-router.prom"))
	cfg := writeConfig(t, `targets:
  - {name: prefill-0, url: `+prefill.URL+`}
  - {name: decode-0, url: `+decode.URL+`}
  - {name: router, url: `+router.URL+`}
`)
	code, out, errOut := run(t, "top", "--once", "--config.file", cfg, "--width", "160")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	t.Log("\n" + out)
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape sequences in plain output:\n%q", out)
	}
	for _, want := range []string{"kvwatch top 3 targets", "FLEET  2 up", "SERVER▲", "prefill-0 ", "decode-0 ", "router "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// One frame keeps no trend: no time to full, and no promise of one.
	for _, bad := range []string{"trend after", "time to full", "full in", "not filling"} {
		if strings.Contains(out, bad) {
			t.Errorf("top --once says %q:\n%s", bad, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  decode-0 ") && !strings.Contains(l, " decode ") {
			t.Errorf("decode-0 row without its role: %q", l)
		}
		if strings.HasPrefix(l, "›") {
			t.Errorf("selection marker in a printed frame: %q", l)
		}
	}
}

func TestTopOnceDownTarget(t *testing.T) {
	good := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-docs-production_metrics.prom"))
	code, out, _ := run(t, "top", "--once", good.URL, "http://"+testenv.FreeAddr(t))
	if code != exitFailed {
		t.Errorf("exit %d, want %d when a target is down", code, exitFailed)
	}
	if !strings.Contains(out, "DOWN refused") {
		t.Errorf("no DOWN row with its reason:\n%s", out)
	}
}

func TestTopServeURL(t *testing.T) {
	rep := report.Report{Schema: report.SchemaVersion, Time: time.Now(), Servers: []report.Server{{
		Name: "remote-decode", URL: "http://10.1.2.3:30002/metrics", OK: true, ScrapedAt: time.Now(), Role: kv.RoleDecode,
		Server: &kv.Server{Engine: "sglang", Role: kv.RoleDecode, Signals: kv.Signals{
			Capacity: kv.Of(1000000), Used: kv.Of(250000), UsageRatio: kv.DerivedOf(0.25), Running: kv.Of(9)}},
		Rates: &kv.Rates{WindowSeconds: 5, PrefixHitRatio: kv.DerivedOf(0.5)},
	}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/kvwatch/v1/report" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(rep)
	}))
	defer srv.Close()
	code, out, errOut := run(t, "top", "--once", "--serve.url", srv.URL, "--width", "160")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"serve " + srv.URL, "remote-decode", "25.0%", "50.0%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A daemon that is not there: exit 1 with a hint.
	code, _, errOut = run(t, "top", "--once", "--serve.url", "http://"+testenv.FreeAddr(t))
	if code != exitFailed || !strings.Contains(errOut, "is kvwatch serve running there?") {
		t.Errorf("unreachable serve: exit %d, stderr %q", code, errOut)
	}
}

func TestTopUsage(t *testing.T) {
	for _, args := range [][]string{
		{"top"}, // no targets
		{"top", "--serve.url", "http://127.0.0.1:9477", "http://127.0.0.1:30000"},
		{"top", "--serve.url", "127.0.0.1:9477"},
		{"top", "--refresh", "soon", "http://127.0.0.1:30000"},
		{"top", "--refresh", "0s", "http://127.0.0.1:30000"},
	} {
		if code, _, errOut := run(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, code, errOut, exitUsage)
		}
	}
}
