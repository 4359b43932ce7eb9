package cli

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// namedServers returns the base URLs of test servers by name, and add,
// which starts one serving h under name for the rest of the test.
func namedServers(t *testing.T) (urls map[string]string, add func(name string, h http.HandlerFunc)) {
	urls = map[string]string{}
	return urls, func(name string, h http.HandlerFunc) {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		urls[name] = s.URL
	}
}

// hostileServers serves targets that attack the terminal, leak secrets or
// flood kvwatch, and returns their base URLs by name.
func hostileServers(t *testing.T) map[string]string {
	t.Helper()
	out, add := namedServers(t)
	add("ansi", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, "\x1b[2J\x1b[Hfake: all targets OK\x1b]0;owned\x07")
	})
	add("secret", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		fmt.Fprint(w, "unavailable")
	})
	add("bomb", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE sglang:max_total_num_tokens gauge\n")
		for i := range 30000 {
			fmt.Fprintf(w, "sglang:max_total_num_tokens{dp_rank=\"%d\",tp_rank=\"0\"} 1000\n", i)
		}
	})
	add("hugelabel", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{model_name=%q,tp_rank=\"0\"} 1000\n", strings.Repeat("m", 1<<20))
	})
	add("redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.9.9.9/elsewhere", http.StatusFound)
	})
	add("escmodel", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{model_name=\"m\x1b[31mred\",tp_rank=\"0\"} 1000\n# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens{model_name=\"m\x1b[31mred\",tp_rank=\"0\"} 250\n")
	})
	return out
}

// TestStatusHostileTargets: status beside a healthy target. Every row is
// worked out by hand: the escapes are shown escaped, the secrets masked,
// each limit named with its key; the healthy target is exact.
func TestStatusHostileTargets(t *testing.T) {
	good := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-docs-production_metrics.prom"))
	h := hostileServers(t)
	secretURL := strings.Replace(h["secret"], "http://", "http://bob:pw-planted@", 1) + "/metrics?token=tk-planted&sig=sg-planted&page=1"
	cfg := writeConfig(t, fmt.Sprintf(`global:
  scrape_interval: 20s # the bomb and the huge label are big bodies; -race on a busy machine is slow
  scrape_timeout: 15s
  secret_query_params: [sig]
targets:
  - {name: good, url: %s}
  - {name: ansi, url: %s}
  - {name: secret, url: %q}
  - {name: bomb, url: %s}
  - {name: hugelabel, url: %s}
  - {name: redirect, url: %s}
  - {name: escmodel, url: %s}
`, good.URL, h["ansi"], secretURL, h["bomb"], h["hugelabel"], h["redirect"], h["escmodel"]))
	t.Setenv("COLUMNS", "1000") // every column, no line wrapped
	code, out, errOut := run(t, "status", "--config.file", cfg, "--log.level=debug")
	if code != 1 {
		t.Errorf("exit code %d, want 1 (targets failed)", code)
	}
	for name, u := range h {
		out = strings.ReplaceAll(out, strings.TrimPrefix(u, "http://"), strings.ToUpper(name))
	}
	out = strings.ReplaceAll(out, strings.TrimPrefix(good.URL, "http://"), "GOOD")
	want := []string{
		"unified  good       GOOD  sglang  KV 124k / -- tok (28.0%)", // 123,859 used; its address after its name
		`--  ansi       FAILED  scrape http://ANSI/metrics: 500 Internal Server Error: \x1b[2J\x1b[Hfake: all targets OK\x1b]0;owned\x07`,
		"--  secret     FAILED  scrape http://bob:xxxxx@SECRET/metrics?token=xxxxx&sig=xxxxx&page=1: 503 Service Unavailable: unavailable",
		"--  bomb       FAILED  read http://BOMB/metrics: the page holds more than sample_limit 20000 samples of the families kvwatch reads; nothing of this page is kept (raise sample_limit for this target, or globally, if the page is really like this)",
		"--  hugelabel  FAILED  read http://HUGELABEL/metrics: sglang:max_total_num_tokens has a model_name label value of 1048576 bytes, over label_value_length_limit 2048; nothing of this page is kept",
		"--  redirect   FAILED  scrape http://REDIRECT/metrics: 302 Found: redirected to http://10.9.9.9/elsewhere, not followed",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("status output lacks\n%s\ngot:\n%s", w, out)
		}
	}
	for _, bad := range []string{"\x1b", "\x07", "planted"} {
		if strings.Contains(out+errOut, bad) {
			t.Errorf("status output or log holds %q:\n%s\n%s", bad, out, errOut)
		}
	}
	if len(out) > 5000 {
		t.Errorf("status output is %d bytes: a hostile page leaked into it", len(out))
	}
	// -o json holds no secret either.
	_, js, _ := run(t, "status", "--config.file", cfg, "-o", "json")
	if strings.Contains(js, "planted") || strings.Contains(js, "\x1b") || strings.Contains(js, `\u001b`) {
		t.Errorf("status -o json holds a secret or a raw escape")
	}
	if !strings.Contains(js, `"model": "m\\x1b[31mred"`) {
		t.Errorf("the model's escape is not shown escaped in -o json")
	}
}

// check config prints no password of a bad URL, and warns about a glob
// that looks like an address.
func TestCheckConfigSecretsAndWarnings(t *testing.T) {
	bad := writeConfig(t, "targets:\n  - url: \"http://bob:pw-planted@host:port/metrics?token=tk-planted\"\n")
	code, out, errOut := run(t, "check", "config", bad)
	if code != 2 || strings.Contains(out+errOut, "planted") || !strings.Contains(errOut, "bob:xxxxx@host:port") {
		t.Errorf("check config of a bad URL = %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "kvwatch.yml")
	os.WriteFile(p, []byte("probe:\n  allow: [\"10.0.0.*\"]\ntargets:\n  - url: http://127.0.0.1:9\n"), 0o600)
	code, out, errOut = run(t, "check", "config", p)
	if code != 0 || !strings.Contains(out, "OK (1 targets)") || !strings.Contains(errOut, `warning: probe.allow[0]: "10.0.0.*" looks like an address`) {
		t.Errorf("check config with an address-like glob = %d\n%s%s", code, out, errOut)
	}
}

// serve starts on a damaged snapshot (before, it exited 1 on every start):
// the file is moved aside, the temporary file of a killed write removed,
// and a new snapshot written at shutdown. The --query.* flags reach the
// query API.
func TestServeStartsOnDamagedSnapshot(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 10\n"))
	}))
	defer engine.Close()
	dir := t.TempDir()
	snap := filepath.Join(dir, "history.snap")
	os.WriteFile(snap, []byte("KVWHIST\x03\x05garbage"), 0o600)
	os.WriteFile(snap+".tmp4242", []byte("half a write"), 0o600)
	cfg := writeConfig(t, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\ntargets:\n  - {name: a, url: "+engine.URL+"}\n")
	addr := strings.TrimPrefix(serveAddr(t), "http://")
	serve := runBackground(t, "serve", "--config.file", cfg, "--web.listen-address", addr, "--history", "10m",
		"--history.snapshot-file", snap, "--query.max-length", "10")
	stderr := &serve.Stderr
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape("kvwatch_kv_used_tokens"))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = fmt.Sprint(resp.StatusCode, " ", string(b))
			break
		}
		if code, ok := serve.Exited(); ok {
			t.Fatalf("serve exited with %d on a damaged snapshot:\n%s", code, stderr.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never answered:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(body, "400") || !strings.Contains(body, "over the 10-byte limit") {
		t.Errorf("a 22-byte query with --query.max-length 10 = %s", body)
	}
	if code := serve.Stop(); code != exitOK {
		t.Errorf("serve exit code = %d, want 0; log:\n%s", code, stderr.String())
	}
	log := stderr.String()
	for _, w := range []string{"history snapshot is damaged: recovered 0 series", "moved_to=" + snap + ".corrupt-", "history snapshot written"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if _, err := os.Stat(snap + ".tmp4242"); !os.IsNotExist(err) {
		t.Errorf("the temporary file of a killed write is still there")
	}
	if aside, _ := filepath.Glob(snap + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("set aside: %v, want one file", aside)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Errorf("no new snapshot after shutdown: %v", err)
	}
}

// serveAddr returns a free loopback address.
func serveAddr(t *testing.T) string { return "http://" + testenv.FreeAddr(t) }
