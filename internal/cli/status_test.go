package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// run runs kvwatch in-process and returns its exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// writeConfig writes a kvwatch config naming each target, so output does
// not depend on random ports.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kvwatch.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

// pdCluster serves the PD example: SGLang prefill (DP=2, TP=2), decode
// (TP=2) and an SGLang model gateway.
func pdCluster(t *testing.T) string {
	prefill := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-prefill-dp2-tp2.prom"))
	decode := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	router := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "smg-router.prom"))
	return fmt.Sprintf(`targets:
  - name: prefill-0
    url: %s
  - name: decode-0
    url: %s
  - name: router
    url: %s
`, prefill.URL, decode.URL, router.URL)
}

func TestStatusPD(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	code, out, errs := run(t, "status", "--config.file", cfg)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	golden(t, "status_pd.golden", out)

	code, out, _ = run(t, "status", "--config.file", cfg, "--ranks", "--headroom", "4096,8192,32768")
	if code != 0 {
		t.Fatalf("--ranks: exit %d", code)
	}
	golden(t, "status_pd_ranks.golden", out)

	code, out, _ = run(t, "status", "--config.file", cfg, "-o", "wide")
	if code != 0 {
		t.Fatalf("wide: exit %d", code)
	}
	golden(t, "status_pd_wide.golden", maskPorts(regexp.MustCompile(`scrape=\d+ms`).ReplaceAllString(out, "scrape=Nms")))
}

// TestStatusJSON checks the JSON schema against values worked out by hand
// from the testdata pages.
func TestStatusJSON(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	code, out, errs := run(t, "status", "--config.file", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	if rep.Schema != report.SchemaVersion || len(rep.Servers) != 3 {
		t.Fatalf("schema %d, %d servers", rep.Schema, len(rep.Servers))
	}
	pre, dec, rt := rep.Servers[0], rep.Servers[1], rep.Servers[2]
	type want struct {
		name  string
		got   float64
		want  float64
		known bool
	}
	checks := []want{
		// prefill: 2 DP ranks × 1,290,752 tokens, each 155,056 used; TP duplicates collapsed.
		{"prefill capacity", pre.Server.Capacity.V, 2581504, pre.Server.Capacity.OK()},
		{"prefill used", pre.Server.Used.V, 310112, pre.Server.Used.OK()},
		{"prefill evictable", pre.Server.Evictable.V, 71392, pre.Server.Evictable.OK()},
		{"prefill running", pre.Server.Running.V, 4, pre.Server.Running.OK()},
		// headroom per DP rank: floor((1,290,752-155,056)/8192) = 138, twice.
		{"prefill headroom 8k", pre.Headroom[0].Requests.V, 276, pre.Headroom[0].Requests.OK()},
		// prefix hit: device_hit 4130 of 4130+5870 on dp0, nothing on dp1.
		{"prefill hit tokens", pre.Server.Counters.PrefixHitTokens.V, 4130, pre.Server.Counters.PrefixHitTokens.OK()},
		{"prefill query tokens", pre.Server.Counters.PrefixQueryTokens.V, 10000, pre.Server.Counters.PrefixQueryTokens.OK()},
		{"decode capacity", dec.Server.Capacity.V, 2581504, dec.Server.Capacity.OK()},
		{"decode used", dec.Server.Used.V, 12034, dec.Server.Used.OK()},
		{"decode prealloc queue", dec.Server.Queued.Prealloc.V, 2, dec.Server.Queued.Prealloc.OK()},
		{"decode transfer queue", dec.Server.Queued.Transfer.V, 1, dec.Server.Queued.Transfer.OK()},
		// pending_prealloc_token_usage 0.01: demand, 0.01 × 2,581,504 = 25,815.04 tokens.
		{"decode demand ratio", dec.Server.DemandRatio.V, 0.01, dec.Server.DemandRatio.OK()},
		{"decode demand", dec.Server.Demand.V, 25815, dec.Server.Demand.OK()},
		{"decode retractions", dec.Server.Counters.Preemptions.V, 5, dec.Server.Counters.Preemptions.OK()},
		// floor((2,581,504-12,034)/8192) = 313; the context length 524,288 fits 4 times.
		{"decode headroom 8k", dec.Headroom[0].Requests.V, 313, dec.Headroom[0].Requests.OK()},
		{"decode headroom ctx", dec.Headroom[1].Requests.V, 4, dec.Headroom[1].Requests.OK() && dec.Headroom[1].Context && dec.Headroom[1].Tokens == 524288},
		{"router healthy", rt.Server.Router.WorkersHealthy.V, 2, rt.Server.Router.WorkersHealthy.OK()},
	}
	// One pool per role, never summed: prefill 310,112 / 2,581,504 =
	// 12.01%, decode 12,034 / 2,581,504 = 0.47%; prefill is the limit.
	if len(rep.Pools) != 2 {
		t.Fatalf("pools = %+v, want prefill and decode", rep.Pools)
	}
	pp, dp := rep.Pools[0], rep.Pools[1]
	checks = append(checks,
		want{"prefill pool used", pp.Used.V, 310112, pp.Used.OK() && pp.Name == "prefill"},
		want{"decode pool used", dp.Used.V, 12034, dp.Used.OK() && dp.Name == "decode"},
		want{"decode pool capacity", dp.Capacity.V, 2581504, dp.Capacity.OK()},
		// waiting 0 + prealloc 2 + transfer 1: the decode queues only.
		want{"decode pool queued", dp.Queued.V, 3, dp.Queued.OK()},
		want{"decode pool headroom 8k", dp.Headroom[0].Requests.V, 313, dp.Headroom[0].Requests.OK()},
		want{"fleet servers", float64(rep.Fleet.Servers), 2, rep.Fleet.Limit == "prefill"})
	for _, c := range checks {
		if !c.known || c.got != c.want {
			t.Errorf("%s = %v (known %v), want %v", c.name, c.got, c.known, c.want)
		}
	}
	if pre.Role != "prefill" || dec.Role != "decode" || rt.Role != "router" {
		t.Errorf("roles = %s %s %s", pre.Role, dec.Role, rt.Role)
	}
	if rt.Server.ReservedRatio.OK() || dec.Server.ReservedRatio.OK() {
		t.Errorf("SGLang reports no reservation: %+v", dec.Server.ReservedRatio)
	}
	if rt.Server.Capacity.OK() || rt.Server.Used.OK() {
		t.Errorf("router KV must be unavailable, got %+v / %+v", rt.Server.Used, rt.Server.Capacity)
	}
	if !strings.Contains(out, `"capacity_tokens": {`) || !strings.Contains(out, `"value": null`) {
		t.Errorf("JSON must show unavailable values as null with provenance")
	}
}

// TestStatusBadTargets: every failing target is a row with its reason, the
// others still show, and the exit code is 1.
func TestStatusBadTargets(t *testing.T) {
	good := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-docs-production_metrics.prom"))
	// SGLang without --enable-metrics: FastAPI's 404 on /metrics.
	notFound := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	}))
	t.Cleanup(notFound.Close)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><html><body>Login</body></html>")
	}))
	t.Cleanup(html.Close)
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello world, this is not metrics\n")
	}))
	t.Cleanup(garbage.Close)
	unknown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE node_load1 gauge\nnode_load1 0.5\n")
	}))
	t.Cleanup(unknown.Close)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	truncated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000")
		fmt.Fprint(w, "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 3\n")
	}))
	t.Cleanup(truncated.Close)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		line := []byte("sglang:num_running_reqs 3\n")
		for i := 0; i < 100000; i++ {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	t.Cleanup(big.Close)
	var bombBody bytes.Buffer // 16 MiB of zeros, 16 KiB on the wire
	gz := gzip.NewWriter(&bombBody)
	gz.Write(make([]byte, 16<<20))
	gz.Close()
	bomb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bombBody.Bytes())
	}))
	t.Cleanup(bomb.Close)
	nan := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens NaN\n# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens +Inf\n# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 2\n")
	}))
	t.Cleanup(nan.Close)

	cfg := writeConfig(t, fmt.Sprintf(`global:
  scrape_timeout: 1s
  body_size_limit: 1MiB
targets:
  - {name: good, url: %s}
  - {name: refused, url: http://%s}
  - {name: metrics-off, url: %s, engine: sglang}
  - {name: html, url: %s}
  - {name: garbage, url: %s}
  - {name: unknown, url: %s}
  - {name: slow, url: %s}
  - {name: truncated, url: %s}
  - {name: too-big, url: %s}
  - {name: gzip-bomb, url: %s}
  - {name: nan, url: %s}
`, good.URL, testenv.FreeAddr(t), notFound.URL, html.URL, garbage.URL, unknown.URL, slow.URL, truncated.URL, big.URL, bomb.URL, nan.URL))
	code, out, _ := run(t, "status", "--config.file", cfg, "-o", "json")
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ reason, text string }{
		"good":        {"", ""},
		"refused":     {"refused", "connection refused: is the server running"},
		"metrics-off": {"http_404", "metrics are off; start SGLang with --enable-metrics"},
		"html":        {"not_metrics", "the body is HTML"},
		"garbage":     {"not_metrics", `line 1: "hello world, this is not metrics" is not a metric line`},
		"unknown":     {"unknown_engine", "no known engine metrics among the page's 1 families (e.g. node_load1)"},
		"slow":        {"timeout", "no complete answer within 1s"},
		"truncated":   {"truncated", "the body was cut short"},
		"too-big":     {"too_large", "body is over the 1MiB limit"},
		"gzip-bomb":   {"too_large", "body is over the 1MiB limit (after decompression)"},
		"nan":         {"", ""},
	}
	for _, s := range rep.Servers {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected server %q", s.Name)
			continue
		}
		if s.Reason != w.reason || !strings.Contains(s.Error, w.text) {
			t.Errorf("%s: reason %q error %q; want reason %q containing %q", s.Name, s.Reason, s.Error, w.reason, w.text)
		}
	}
	nanRow := rep.Servers[len(rep.Servers)-1]
	if nanRow.Server == nil || nanRow.Server.Used.OK() || nanRow.Server.Capacity.OK() || nanRow.Server.Running.V != 2 {
		t.Errorf("NaN/Inf must be unavailable, not 0: %+v", nanRow.Server)
	}
	// The text form shows the same rows; golden with the ports masked.
	_, text, _ := run(t, "status", "--config.file", cfg)
	for _, s := range []*httptest.Server{good, notFound, html, garbage, unknown, slow, truncated, big, bomb, nan} {
		text = strings.ReplaceAll(text, strings.TrimPrefix(s.URL, "http://"), "HOST")
	}
	text = regexp.MustCompile(`kvwatch reads [^;]*;`).ReplaceAllString(text, "kvwatch reads ENGINES;")
	golden(t, "status_bad.golden", maskPorts(text))
}

// maskPorts replaces 127.0.0.1:PORT with 127.0.0.1:PORT for stable goldens.
func maskPorts(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "127.0.0.1:")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len("127.0.0.1:")])
		s = s[i+len("127.0.0.1:"):]
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		b.WriteString("PORT")
		s = s[j:]
	}
}

func TestStatusUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "no targets"},
		{[]string{"status", "ftp://x"}, "scheme must be http or https"},
		{[]string{"status", "http://127.0.0.1:1", "--engine", "nope"}, `unknown engine "nope"`},
		{[]string{"status", "http://127.0.0.1:1", "--headroom", "8k,abc"}, `"abc" is not a positive number of tokens`},
		{[]string{"status", "--config.file", "/nonexistent/kvwatch.yml"}, "no such file"},
		{[]string{"status", "wizard:w=http://127.0.0.1:1"}, `unknown role "wizard"`},
		{[]string{"nosuchcommand"}, "expected command"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestStatusConfigErrorsAllAtOnce(t *testing.T) {
	cfg := writeConfig(t, `global:
  scrape_timeout: 10s
targets:
  - url: http://127.0.0.1:30000
    role: wizard
    colour: blue
  - name: x
`)
	code, _, errs := run(t, "status", "--config.file", cfg)
	if code != 2 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`line 6: targets[0].colour: unknown key "colour"`, "kvwatch.yml"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	cfg = writeConfig(t, `global:
  scrape_timeout: 10s
targets:
  - url: http://127.0.0.1:30000
    role: wizard
  - name: x
`)
	_, _, errs = run(t, "status", "--config.file", cfg)
	for _, want := range []string{
		"line 2: global.scrape_timeout: 10s is longer than scrape_interval 5s",
		`line 5: targets[0].role: unknown role "wizard"`,
		"line 6: targets[1]: url is missing",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
}

// TestStatusWatch: with --watch, the second refresh has rates computed
// from counter deltas, and a counter that went down (restart) is a reset,
// not a negative rate.
func TestStatusWatch(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		hit, query, retract := 1000*n, 4000*n, 10*n
		if n == 3 { // restart: counters start again from small values
			hit, query, retract = 100, 200, 1
		}
		fmt.Fprintf(w, `# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{engine_type="unified",model_name="m",tp_rank="0"} 100000
# TYPE sglang:kv_used_tokens gauge
sglang:kv_used_tokens{engine_type="unified",model_name="m",tp_rank="0"} 5000
# TYPE sglang:num_retracted_requests counter
sglang:num_retracted_requests_total{engine_type="unified",model_name="m",tp_rank="0"} %d
# TYPE sglang:prefill_effective_tokens counter
sglang:prefill_effective_tokens_total{engine_type="unified",mode="device_hit",model_name="m",tp_rank="0"} %d
sglang:prefill_effective_tokens_total{engine_type="unified",mode="input",model_name="m",tp_rank="0"} %d
`, retract, hit, query-hit)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	w := &lineCounter{Buffer: &out, n: 3, cancel: cancel}
	code := Run(ctx, []string{"status", srv.URL, "--watch", "50ms", "-o", "json"}, Streams{Stdout: w, Stderr: &bytes.Buffer{}})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("want 3 JSON lines, got %d", len(lines))
	}
	var reps [3]report.Report
	for i := range reps {
		if err := json.Unmarshal([]byte(lines[i]), &reps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if reps[0].Servers[0].Rates != nil {
		t.Errorf("first refresh has no previous counters, so no rates")
	}
	r := reps[1].Servers[0].Rates
	if r == nil || !r.PrefixHitRatio.OK() || r.PrefixHitRatio.V != 0.25 || r.Reset {
		t.Fatalf("second refresh rates = %+v, want hit ratio 1000/4000 = 0.25", r)
	}
	if !r.PreemptionsPerSec.OK() || r.PreemptionsPerSec.V <= 0 {
		t.Errorf("preemptions/s = %+v, want > 0", r.PreemptionsPerSec)
	}
	// Over a window in which the counters went down (a restart), no rate
	// of them is shown: a rate across a reset is unavailable, never a
	// guess (docs/status.md), and the next window has rates again.
	r = reps[2].Servers[0].Rates
	if r == nil || !r.Reset || r.PreemptionsPerSec.OK() || r.PrefixHitRatio.OK() {
		t.Errorf("after restart rates = %+v, want reset and no rate of the counters that went down", r)
	}
}

// lineCounter cancels the context after n lines are written.
type lineCounter struct {
	*bytes.Buffer
	n      int
	cancel context.CancelFunc
}

func (l *lineCounter) Write(p []byte) (int, error) {
	n, err := l.Buffer.Write(p)
	if strings.Count(l.Buffer.String(), "\n") >= l.n {
		l.cancel()
	}
	return n, err
}

// TestStatusImplausible: negative and absurd values are flagged with a
// warning, never shown as a plausible percentage, and nothing overflows.
func TestStatusImplausible(t *testing.T) {
	page := func(body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	neg := page("sglang:max_total_num_tokens -100000\nsglang:kv_used_tokens -5000\nsglang:num_running_reqs 1\n")
	huge := page("sglang:max_total_num_tokens 1e30\nsglang:kv_used_tokens 0\nsglang:context_len 1e30\nsglang:num_running_reqs 1\n")
	cfg := writeConfig(t, fmt.Sprintf("targets:\n  - name: neg\n    url: %s\n  - name: huge\n    url: %s\n", neg.URL, huge.URL))
	code, out, errs := run(t, "status", "--config.file", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"KV !-5,000 / !-100k tok (implausible)",
		"negative: capacity is -100000",
		"negative: used is -5000",
		"KV 0 / !1e+30 tok (implausible)",
		"too_large: capacity is 1e+30, beyond 2^53",
		"too_large: context length is 1e+30, beyond 2^53",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "warning "); n != 4 {
		t.Errorf("%d warning lines, want 4:\n%s", n, out)
	}
	if strings.Contains(out, "9,223,372") || strings.Contains(out, "5.0%") {
		t.Errorf("an overflow or a plausible percentage:\n%s", out)
	}
	code, out, _ = run(t, "status", "--config.file", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("json: exit %d", code)
	}
	if strings.Contains(out, "-9223372036854775808") || !strings.Contains(out, `"provenance": "implausible"`) ||
		!strings.Contains(out, `"reason": "too_large"`) {
		t.Errorf("JSON overflowed or lacks the implausible marks:\n%s", out)
	}
}

// TestStatusWideAllSizes: -o wide shows headroom for every --headroom size
// and the context length; text shows the smallest and the context length
// where the width allows (TestStatusFitsTheWidth: else the smallest).
func TestStatusWideAllSizes(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	_, out, _ := run(t, "status", "--config.file", cfg, "-o", "wide", "--headroom", "4096,8192,32768")
	// prefill: per DP rank (1,290,752 − 155,056) = 1,135,696 free; /4096 →
	// 277, /8192 → 138, /32768 → 34, /524,288 → 2; twice.
	if !strings.Contains(out, "headroom 554×4k 276×8k 68×32k 4×512k") {
		t.Errorf("wide lacks every headroom size:\n%s", out)
	}
	t.Setenv("COLUMNS", "1000") // room for every column
	_, out, _ = run(t, "status", "--config.file", cfg, "--headroom", "4096,8192,32768")
	if !strings.Contains(out, "headroom 554×4k 4×512k ") {
		t.Errorf("text headroom is not the smallest size and the context length:\n%s", out)
	}
}

// TestStatusWatchText: every --watch frame starts with its time.
func TestStatusWatchText(t *testing.T) {
	srv := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	w := &lineCounter{Buffer: &out, n: 12, cancel: cancel}
	if code := Run(ctx, []string{"status", srv.URL, "--watch", "50ms"}, Streams{Stdout: w, Stderr: &bytes.Buffer{}}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	stamps := regexp.MustCompile(`(?m)^kvwatch status at (\S+)$`).FindAllStringSubmatch(out.String(), -1)
	if len(stamps) < 2 {
		t.Fatalf("want a timestamp per frame, got %d:\n%s", len(stamps), out.String())
	}
	for _, s := range stamps {
		if _, err := time.Parse(time.RFC3339, s[1]); err != nil {
			t.Errorf("frame time %q: %v", s[1], err)
		}
	}
}

// TestStatus501IsNot404: llama.cpp without --metrics answers 501; the
// reason says so instead of http_404.
func TestStatus501IsNot404(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "This server does not support metrics endpoint. Start it with `--metrics`", http.StatusNotImplemented)
	}))
	t.Cleanup(srv.Close)
	code, out, _ := run(t, "status", srv.URL, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Servers) != 1 || rep.Servers[0].Reason != "http_501" || !strings.Contains(rep.Servers[0].Error, "501 Not Implemented: metrics are off") {
		t.Errorf("row = %+v, want reason http_501 saying metrics are off", rep.Servers)
	}
}

// TestStatusRouterRoleWithoutWorkerView: a target given role router whose
// page has no router's worker view (a Dynamo frontend, read by the dynamo
// adapter) shows its workers as unknown; it used to crash status.
func TestStatusRouterRoleWithoutWorkerView(t *testing.T) {
	fe := testenv.EngineFileServer(t, "/metrics", filepath.Join("..", "engine", "testdata", "fixtures", "dynamo-src-frontend-kv-router.prom"))
	code, out, errs := run(t, "status", "router:frontend="+fe.URL+"/metrics")
	if code != 0 || !strings.Contains(out, "workers --/-- healthy") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit 0 and the router's workers unknown", code, out, errs)
	}
}

// TestStatusNamedTargets: NAME=URL names a target, ROLE:NAME=URL names it
// and sets its role; a role alone stays [ROLE=]URL.
func TestStatusNamedTargets(t *testing.T) {
	srv := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	code, out, errs := run(t, "status", "-o", "json", "leaky="+srv.URL, "prefill:p0="+srv.URL, "unified="+srv.URL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	// The page says engine_type decode: the role when none is given.
	want := [][2]string{{"leaky", "decode"}, {"p0", "prefill"}, {host, "unified"}}
	if len(rep.Servers) != 3 {
		t.Fatalf("%d rows, want 3", len(rep.Servers))
	}
	for i, w := range want {
		if got := [2]string{rep.Servers[i].Name, string(rep.Servers[i].Role)}; got != w {
			t.Errorf("row %d = %v, want %v", i, got, w)
		}
	}
}

// TestStatusFitsTheWidth: status's text fits $COLUMNS (stdout is no
// terminal here), dropping and shortening columns in statusFit's order;
// -o wide keeps every column whatever the width. Worked out by hand from
// the PD pages' cells (the prefill row is 7+9+15+10+27+22+5+8+10+12+2
// characters and 20 of gaps, its decode neighbour's queues 24 longer):
// 171 wide in all; 154 without the address; 142 without the engine; 118
// with the queues' total only; 111 with the smallest headroom only; 99
// without the hit ratio; 85 without demand; 78 without running; 68
// without the queues.
func TestStatusFitsTheWidth(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	const addr, engine, pdQueues, context, hit, demand, run_, queued = "127.0.0.1:", "sglang", "(prealloc=2 transfer=1)", "4×512k", "hit ", "demand ", "run=", "queued="
	all := []string{addr, engine, pdQueues, context, hit, demand, run_, queued}
	for _, tt := range []struct {
		width   int
		without []string
	}{
		{250, nil},
		{171, nil},
		{170, []string{addr}},
		{160, []string{addr}},
		{120, []string{addr, engine, pdQueues}},
		{100, []string{addr, engine, pdQueues, context, hit}},
		{80, []string{addr, engine, pdQueues, context, hit, demand, run_}},
		{70, all},
	} {
		t.Run(fmt.Sprint(tt.width), func(t *testing.T) {
			t.Setenv("COLUMNS", fmt.Sprint(tt.width))
			code, out, errs := run(t, "status", "--config.file", cfg)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var row string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if n := utf8.RuneCountInString(l); n > tt.width {
					t.Errorf("%d characters, over %d: %q", n, tt.width, l)
				}
				if strings.HasPrefix(l, "decode  ") {
					row = l
				}
			}
			for _, cell := range all {
				if want := !slices.Contains(tt.without, cell); strings.Contains(row, cell) != want {
					t.Errorf("%q in the decode row: %v, want %v:\n%s", cell, !want, want, out)
				}
			}
			for _, cell := range []string{"decode-0", "KV 12.0k / 2.58M tok (0.5%)", "headroom 313×8k", "ok"} {
				if !strings.Contains(row, cell) {
					t.Errorf("the decode row lacks %q, which no width drops:\n%s", cell, out)
				}
			}
		})
	}
	t.Setenv("COLUMNS", "80")
	_, out, _ := run(t, "status", "--config.file", cfg, "-o", "wide")
	for _, cell := range append(all, "evictable=", "scrape=") {
		if !strings.Contains(out, cell) {
			t.Errorf("-o wide at 80 columns lacks %q:\n%s", cell, out)
		}
	}
}

// TestStatusOutputLine: -o line is the whole fleet in one line (the
// demo's), and with --watch one line per refresh; values as the PD pages'
// text rows show them (status_pd.golden).
func TestStatusOutputLine(t *testing.T) {
	cfg := writeConfig(t, pdCluster(t))
	const want = "prefill-0 (prefill) KV 12.0% 310k tok, run=4 queue=0, fits 276×8k | decode-0 (decode) KV 0.5% 12.0k tok, run=3 queue=3, fits 313×8k | limit: prefill pool KV 12.0%"
	line := regexp.MustCompile(`^\d\d:\d\d:\d\d  (.*)$`)
	code, out, errs := run(t, "status", "--config.file", cfg, "-o", "line")
	if m := line.FindStringSubmatch(strings.TrimSuffix(out, "\n")); code != 0 || m == nil || m[1] != want || strings.Count(out, "\n") != 1 {
		t.Errorf("status -o line: exit %d (%s), got\n%q\nwant a time and\n%q", code, errs, out, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var b bytes.Buffer
	w := &lineCounter{Buffer: &b, n: 2, cancel: cancel}
	if code := Run(ctx, []string{"status", "--config.file", cfg, "-o", "line", "--watch", "50ms"}, Streams{Stdout: w, Stderr: &bytes.Buffer{}}); code != 0 {
		t.Fatalf("--watch: exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("--watch -o line: %d lines, want one per refresh (2):\n%s", len(lines), b.String())
	}
	for _, l := range lines {
		if m := line.FindStringSubmatch(l); m == nil || m[1] != want {
			t.Errorf("--watch line %q, want a time and %q", l, want)
		}
	}
}

// asleepVLLMPage is a vLLM page of one engine in sleep mode (level 1): its
// KV gauges still read 0, but sleep mode released the KV cache
// (vllm:engine_sleep_state), so KV is unavailable, never 0 % used.
const asleepVLLMPage = `# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1
`

// asleepDetail is what kvwatch says of asleepVLLMPage's engine.
const asleepDetail = "KV unavailable: the engine is asleep (engine 0 weights_offloaded): vLLM's sleep mode released its KV cache (vllm:engine_sleep_state)"

// TestStatusSaysWhyUnavailable: status says why an asleep engine's KV is
// unavailable, in a note of its own, and never shows it 0 % used.
func TestStatusSaysWhyUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, asleepVLLMPage)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("COLUMNS", "400")
	code, out, errs := run(t, "status", "sleep="+srv.URL+"/metrics")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if want := "unavailable  sleep  asleep: " + asleepDetail; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "KV -- / -- tok (--)") || strings.Contains(out, "0.0%") {
		t.Errorf("an asleep engine's KV shown as a number:\n%s", out)
	}
	code, out, _ = run(t, "status", "-o", "json", "sleep="+srv.URL+"/metrics")
	if code != 0 || !strings.Contains(out, `"reason": "asleep"`) {
		t.Errorf("JSON (exit %d) lacks the asleep reason:\n%s", code, out)
	}
}
