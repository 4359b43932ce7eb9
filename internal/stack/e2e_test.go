package stack

// End-to-end test of the generated stack (issue 5, item 9): the kvwatch
// simulator and `kvwatch serve` as subprocesses, the real Debian Prometheus
// and Alertmanager started by Up from generated files, all on loopback.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// e2eScenario is a small PD cluster whose decode KV cache fills quickly
// when the router's load is multiplied. The decode server runs DP=2 (each
// DP rank with TP=2, 75,000 tokens and 512 running requests), so the
// per-DP-rank panels have series (servers with one DP rank export none).
const e2eScenario = `model_name: e2e
servers:
  - name: router
    engine: sglang-router
    workers: [prefill, decode]
    load: {rate: 1}
  - name: prefill
    engine: sglang
    role: prefill
    capacity_tokens: 400000
  - name: decode
    engine: sglang
    role: decode
    dp: 2
    tp: 2
    capacity_tokens: 75000
    max_running_requests: 512
`

// e2eOptions are the test-only stack options: 1s scrapes and evaluations,
// a critical KV threshold the simulator reaches, and a 1s for-duration.
func e2eOptions(kvwatch, prom, am string) Options {
	cfg := config.Default()
	a := &cfg.Alerts
	a.KVUsageWarning, a.KVUsageCritical, a.KVUsageCriticalFor, a.KVUsageWarningFor = 0.3, 0.5, dur("1s"), dur("1s")
	return Options{
		KVWatchAddress: kvwatch, PrometheusAddress: prom, AlertmanagerAddress: am, GrafanaAddress: "127.0.0.1:1",
		ScrapeInterval: dur("1s"), EvaluationInterval: dur("1s"), GrafanaAdminPassword: "x", Config: cfg,
	}
}

// buildKVWatch builds ./cmd/kvwatch into dir.
func buildKVWatch(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "kvwatch")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kvwatch")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kvwatch: %v\n%s", err, b)
	}
	return bin
}

// startProc starts a subprocess that is killed (and waited for) at cleanup.
func startProc(t *testing.T, stdout io.Writer, logPath, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	cmd.Stdout = logf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
}

func getJSON(ctx context.Context, u string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// promQuery runs an instant query and returns the number of series.
func promQuery(ctx context.Context, prom, q string) (int, error) {
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []json.RawMessage
		}
	}
	if err := getJSON(ctx, "http://"+prom+"/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %q: %s", q, r.Error)
	}
	return len(r.Data.Result), nil
}

// amAlert is the part of Alertmanager's /api/v2/alerts answer we check.
type amAlert struct {
	Labels map[string]string
	Status struct{ State string }
}

// activeAlerts returns the active alerts named name in Alertmanager.
func activeAlerts(ctx context.Context, am, name string) ([]amAlert, error) {
	var as []amAlert
	if err := getJSON(ctx, "http://"+am+"/api/v2/alerts", &as); err != nil {
		return nil, err
	}
	var out []amAlert
	for _, a := range as {
		if a.Labels["alertname"] == name && a.Status.State == "active" {
			out = append(out, a)
		}
	}
	return out, nil
}

// eventually polls f every 500ms until it returns true or ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	var last error
	for {
		ok, err := f()
		if ok {
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: gave up waiting (last error: %v)", what, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func postLoad(ctx context.Context, base string, factor int) error {
	u, err := url.Parse(base) // the simulator prints metrics URLs
	if err != nil {
		return err
	}
	u.Path, u.RawQuery = "/-/sim/load", fmt.Sprintf("factor=%d", factor)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST load factor %d: %s: %s", factor, resp.Status, b)
	}
	return nil
}

// e2eProbeScenario is one more engine that only the Prometheus probe job
// knows about (found by Prometheus' discovery, not in kvwatch's config).
const e2eProbeScenario = `model_name: e2e-probe
servers:
  - name: solo
    engine: vllm
    capacity_tokens: 100000
`

// startSim starts `kvwatch simulate` on scenario and returns its endpoints
// by role (the simulator prints "role engine URL" per endpoint).
func startSim(t *testing.T, bin, dir, name, scenario string, names ...string) map[string]string {
	t.Helper()
	scen := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(scen, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	startProc(t, pw, filepath.Join(dir, name+".log"), bin, "simulate", "--scenario", scen, "--speed", "4", "--tick", "250ms")
	endpoints := map[string]string{}
	sc := bufio.NewScanner(pr)
	for len(endpoints) < len(names) && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 {
			endpoints[f[0]] = f[2]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	for _, n := range names {
		if endpoints[n] == "" {
			t.Fatalf("simulator printed no %s endpoint (got %v); see %s", n, endpoints, filepath.Join(dir, name+".log"))
		}
	}
	return endpoints
}

// promValue runs an instant query that must return one series and returns
// its value.
func promValue(ctx context.Context, prom, q string) (float64, error) {
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := getJSON(ctx, "http://"+prom+"/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return 0, err
	}
	if r.Status != "success" || len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("query %q: status %s, %d series, error %q", q, r.Status, len(r.Data.Result), r.Error)
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	var f float64
	_, err := fmt.Sscan(v, &f)
	return f, err
}

// TestEndToEnd runs the generated stack (with --probe) against each
// Prometheus of the version matrix: Debian's 2.x and 3.x built from the Go
// module (docs/stack.md, "Version matrix").
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
	testenv.StateDir(t)
	versions := promVersions(t)
	testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")
	bin := buildKVWatch(t, t.TempDir())
	for _, v := range versions {
		t.Run("prometheus"+v.name, func(t *testing.T) { endToEnd(t, bin, v) })
	}
}

func endToEnd(t *testing.T, bin string, v promVersion) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 420*time.Second)
	defer cancel()

	endpoints := startSim(t, bin, dir, "simulate", e2eScenario, "router", "prefill", "decode")
	probeOnly := startSim(t, bin, dir, "simulate-probe", e2eProbeScenario, "unified")["unified"]
	cfg := "global: {scrape_interval: 1s, scrape_timeout: 1s}\nprobe: {allow: [127.0.0.1]}\ntargets:\n"
	for _, role := range []string{"router", "prefill", "decode"} {
		cfg += fmt.Sprintf("  - {name: %s, url: %q, role: %s, labels: {cluster: e2e, pool: p1}}\n", role, endpoints[role], role)
	}
	cfgPath := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	kv, prom, am := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	startProc(t, nil, filepath.Join(dir, "serve.log"), bin, "serve", "--config.file", cfgPath, "--web.listen-address", kv)

	stackDir := filepath.Join(dir, "stack")
	o := e2eOptions(kv, prom, am)
	o.Probe = true
	// The targets from the stack's kvwatch.yml, the thresholds of e2eOptions.
	parsed := mustParseConfig(t, cfg)
	parsed.Alerts = o.Config.Alerts
	o.Config = parsed
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.Write(stackDir); err != nil {
		t.Fatal(err)
	}
	// The probe targets: the engine only Prometheus knows, plus serve's own
	// decode server, listed again as someone might: the probe job must drop
	// it, or every decode series and alert would count twice.
	probeFile := fmt.Sprintf("- targets: [%q, %q]\n  labels: {cluster: e2e, pool: p2}\n", probeOnly, endpoints["decode"])
	if err := os.WriteFile(filepath.Join(stackDir, filepath.FromSlash(ProbeTargetsFile)), []byte(probeFile), 0o644); err != nil {
		t.Fatal(err)
	}
	upCtx, upCancel := context.WithCancel(context.Background())
	upDone := make(chan error, 1)
	lookPath := func(name string) (string, error) {
		switch {
		case strings.HasPrefix(name, "grafana"):
			return "", exec.ErrNotFound
		case name == "prometheus":
			return v.prometheus, nil
		}
		return exec.LookPath(name)
	}
	go func() { upDone <- Up(upCtx, UpOptions{Dir: stackDir, LookPath: lookPath}) }()
	defer func() {
		upCancel()
		if err := <-upDone; err != nil {
			t.Errorf("stack up: %v", err)
		}
	}()
	testenv.WaitOK(ctx, t, "http://"+prom+"/-/ready")
	testenv.WaitOK(ctx, t, "http://"+am+"/-/ready")
	eventually(ctx, t, "Prometheus scrapes kvwatch with the decode server's KV usage", func() (bool, error) {
		n, err := promQuery(ctx, prom, `kvwatch_kv_usage_ratio{role="decode"}`)
		return n == 1, err
	})
	// Prometheus scrapes the decode engine itself, labelled as kvwatch's
	// series are, so the engine's own families join kvwatch's.
	eventually(ctx, t, "the engine job scrapes the decode server under kvwatch's labels", func() (bool, error) {
		n, err := promQuery(ctx, prom, `up{job="engines-decode",server="decode",role="decode",kv_cluster="e2e",pool="p1"} == 1`)
		return n == 1, err
	})
	// The probe job scrapes the probe-only engine through /probe...
	eventually(ctx, t, "the probe job scrapes the engine only Prometheus knows", func() (bool, error) {
		n, err := promQuery(ctx, prom, fmt.Sprintf(`kvwatch_kv_capacity_tokens{job="kvwatch-probe",instance=%q}`, probeOnly))
		return n > 0, err
	})
	// ...and not serve's decode server: it is counted once.
	for _, q := range []string{
		`count(kvwatch_kv_usage_ratio{role="decode"})`,
		`count(up{job="kvwatch-probe"})`,
	} {
		if n, err := promValue(ctx, prom, q); err != nil || n != 1 {
			t.Errorf("%s = %v (%v), want 1: the probe job double counts serve's targets", q, n, err)
		}
	}
	q := `sum(kvwatch_kv_used_tokens{role="decode"}) - sum(kvwatch_kv_used_tokens{role="decode",job="kvwatch"})`
	if d, err := promValue(ctx, prom, q); err != nil || d != 0 {
		t.Errorf("%s = %v (%v), want 0: decode KV counted beyond serve's own job", q, d, err)
	}

	// Overload: the decode KV cache passes the critical threshold and the
	// alert reaches Alertmanager, once.
	// Factor 15 passes the 50 % threshold; at 40 the simulated decode cache
	// reached 94 % and in some runs never drained after the load stopped
	// (a simulator behaviour, reported), so the alert could not resolve.
	if err := postLoad(ctx, endpoints["router"], 15); err != nil {
		t.Fatal(err)
	}
	var decodeAlerts []amAlert
	eventually(ctx, t, "KVCacheUsageCritical for decode in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(ctx, am, AlertKVCritical)
		decodeAlerts = decodeAlerts[:0]
		for _, a := range as {
			if a.Labels["role"] == "decode" && a.Labels["severity"] == SeverityCritical && a.Labels["kv_cluster"] == "e2e" {
				decodeAlerts = append(decodeAlerts, a)
			}
		}
		return len(decodeAlerts) > 0, err
	})
	if len(decodeAlerts) != 1 {
		t.Errorf("%d active %s alerts for the one decode server, want 1: %v", len(decodeAlerts), AlertKVCritical, decodeAlerts)
	}
	// The watchdog reaches Alertmanager; kvwatch is present, so
	// KVWatchAbsent does not.
	eventually(ctx, t, "KVWatchWatchdog in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(ctx, am, AlertWatchdog)
		return len(as) == 1, err
	})
	if as, err := activeAlerts(ctx, am, AlertExporterAbsent); err != nil || len(as) != 0 {
		t.Errorf("%s active while kvwatch is scraped: %v (%v)", AlertExporterAbsent, as, err)
	}

	// Every dashboard query returns data on the live stack, except panels
	// that are legitimately empty (their spec says why).
	for _, d := range Dashboards(Options{}) {
		for _, q := range d.Queries() {
			if q.EmptyOK != "" {
				continue
			}
			expr := grafanaVars.Replace(q.Expr)
			var n int
			eventually(ctx, t, fmt.Sprintf("%s / %s: %s returns data", q.Dashboard, q.Panel, expr), func() (bool, error) {
				var err error
				n, err = promQuery(ctx, prom, expr)
				return n > 0, err
			})
		}
	}

	// Load off: KV drains and the alert resolves.
	t.Logf("dashboards checked; load off at %s", time.Now().Format(time.TimeOnly))
	if err := postLoad(context.Background(), endpoints["router"], 0); err != nil {
		t.Fatal(err)
	}
	// Draining takes the simulated requests' time (about 100 s here, more
	// under -race on a busy machine): its own deadline.
	rctx, rcancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer rcancel()
	eventually(rctx, t, "KVCacheUsageCritical resolves in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(rctx, am, AlertKVCritical)
		if err == nil && len(as) > 0 {
			u, _ := promValue(rctx, prom, `max(kvwatch_kv_usage_ratio{role="decode"})`)
			err = fmt.Errorf("still active: %v; decode usage now %v", as, u)
		}
		return err == nil && len(as) == 0, err
	})
	t.Logf("resolved at %s", time.Now().Format(time.TimeOnly))
}

func mustParseConfig(t *testing.T, s string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(s), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}
