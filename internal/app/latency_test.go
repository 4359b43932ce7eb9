package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// LatencyRunsEnv sets how many fills TestExhaustionAlertLatency measures
// (default 1); docs/benchmarks.md ("KV exhaustion: time to the page")
// records a run of 10.
const latencyRunsEnv = "KVWATCH_ALERT_LATENCY_RUNS"

// latencyFillFactor multiplies the router's load of the pd-sglang
// scenario while the decode server leaks its KV: its cache fills from
// about 5 % to above 99 % in about 25 s and stays full.
const latencyFillFactor = 8

// TestExhaustionAlertLatency (issue 28 item 3) measures how long KV
// exhaustion takes to reach Alertmanager at the default intervals, end to
// end, on both paths the generated rules run on:
//
//   - serve: the simulator's decode server, scraped every 5s by serve
//     (in-process), whose embedded rules, evaluated every 15s, send to an
//     Alertmanager;
//   - Prometheus: Debian's Prometheus from the generated stack (kvwatch
//     stack up), scraping serve every 15s and evaluating the generated
//     rules every 15s, sending to the stack's Alertmanager.
//
// Both Alertmanagers run the generated alertmanager.yml, with a webhook
// receiver here. Each run fills the decode server's cache (the router's
// load times latencyFillFactor and a KV leak on decode) and takes the
// times from the moment the simulator's ground truth passes
// kv_usage_exhausted to KVCacheExhausted's arrival in each Alertmanager's
// API and to its notification at the webhook (after the critical route's
// 10s group_wait). Nothing is asserted on the times (they are logged, and
// docs/benchmarks.md records them); the test asserts that the alert
// arrives on both paths, not before the cache is full, and before
// KVCacheUsageCritical, the slow window. KVWATCH_ALERT_LATENCY_RUNS=N
// measures N fills, each at a random phase against the scrapes and
// evaluations, and logs a table; between fills it waits for the
// Alertmanagers to notify the resolution (up to their group_interval, 5m).
func TestExhaustionAlertLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs at the default intervals for minutes; skipped with -short")
	}
	amBin := testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")
	testenv.Tool(t, "prometheus", "prometheus")
	runs := 1
	if s := os.Getenv(latencyRunsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of runs, 1 or more", latencyRunsEnv, s)
		}
		runs = n
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(runs)*9*time.Minute+3*time.Minute)
	defer cancel()

	cl := testenv.Builtin(t, "pd-sglang", sim.Options{})
	cfg := "alerting:\n  alertmanagers: [%q]\ntargets:\n"
	for _, ep := range cl.Endpoints() {
		cfg += fmt.Sprintf("  - {name: %s, url: %q, role: %s}\n", ep.Name, ep.URL+ep.MetricsPath, ep.Role)
	}
	amServe := testenv.FreeAddr(t)
	cfgPath := filepath.Join(dir, "kvwatch.yml")
	writeFile(t, cfgPath, fmt.Sprintf(cfg, "http://"+amServe))
	parsed, err := config.Parse([]byte(fmt.Sprintf(cfg, "http://"+amServe)), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	thr := parsed.Alerts.KVUsageExhausted
	_, serveURL := started(t, cfgPath)
	u, err := url.Parse(serveURL)
	if err != nil {
		t.Fatal(err)
	}

	hooks := newWebhooks(t)
	// The generated stack around that serve: Prometheus and its
	// Alertmanager under stack up, the default intervals.
	prom, amProm := testenv.FreeAddr(t), testenv.FreeAddr(t)
	o := stack.Options{KVWatchAddress: u.Host, PrometheusAddress: prom, AlertmanagerAddress: amProm,
		GrafanaAddress: testenv.FreeAddr(t), GrafanaAdminPassword: "x", Config: parsed,
		Receivers: stack.Receivers{WebhookURLs: []string{hooks.url("prometheus")}}}
	files, err := stack.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	stackDir := filepath.Join(dir, "stack")
	if err := files.Write(stackDir); err != nil {
		t.Fatal(err)
	}
	upCtx, upCancel := context.WithCancel(context.Background())
	upDone := make(chan error, 1)
	lookPath := func(name string) (string, error) {
		if strings.HasPrefix(name, "grafana") {
			return "", exec.ErrNotFound
		}
		return exec.LookPath(name)
	}
	go func() { upDone <- stack.Up(upCtx, stack.UpOptions{Dir: stackDir, LookPath: lookPath}) }()
	t.Cleanup(func() {
		upCancel()
		if err := <-upDone; err != nil {
			t.Errorf("stack up: %v", err)
		}
	})
	// serve's Alertmanager: the same generated config, its own webhook.
	o.Receivers.WebhookURLs = []string{hooks.url("serve")}
	serveFiles, err := stack.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	amDir := filepath.Join(dir, "am-serve")
	if err := os.MkdirAll(amDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(amDir, "alertmanager.yml"), string(serveFiles.Get("alertmanager.yml")))
	testenv.StartIn(t, amDir, filepath.Join(dir, "alertmanager-serve.log"), amBin, "--config.file=alertmanager.yml",
		"--storage.path="+filepath.Join(amDir, "data"), "--web.listen-address="+amServe, "--cluster.listen-address=")
	testenv.WaitOK(ctx, t, "http://"+amServe+"/-/ready")
	testenv.WaitOK(ctx, t, "http://"+amProm+"/-/ready")
	testenv.WaitOK(ctx, t, "http://"+prom+"/-/ready")
	paths := []latencyPath{{"serve", amServe}, {"prometheus", amProm}}

	// Healthy first: a window of samples on both paths, and no
	// exhaustion alert anywhere.
	waitUntil(ctx, t, "Prometheus has the decode server's KV usage for a window", func() (bool, error) {
		var r struct {
			Data struct{ Result []json.RawMessage }
		}
		q := fmt.Sprintf(`count_over_time(kvwatch_kv_usage_ratio{server="decode"}[%s]) >= 3`, parsed.Alerts.KVUsageExhaustedWindow)
		err := getJSONCtx(ctx, "http://"+prom+"/api/v1/query?query="+url.QueryEscape(q), &r)
		return len(r.Data.Result) == 1, err
	})
	var results []latencyRun
	for i := range runs {
		// A random phase against the scrapes and evaluations.
		time.Sleep(time.Duration(rand.Int64N(int64(15 * time.Second))))
		for _, p := range paths {
			if as, err := amAlerts(ctx, p.am); err != nil || len(as[stack.AlertKVExhausted]) > 0 {
				t.Fatalf("run %d: %s's Alertmanager has %s before the fill: %v (%v)", i+1, p.name, stack.AlertKVExhausted, as, err)
			}
		}
		results = append(results, fillAndWait(ctx, t, cl, thr, paths, hooks))
		r := results[len(results)-1]
		t.Logf("run %d: filled from %.1f %% in %s; %s", i+1, 100*r.from, r.fill.Round(100*time.Millisecond), r)
		// Empty the decode server (a restart drops its requests and the
		// leak), load back to normal, and wait for the alerts to resolve.
		if err := cl.SetFault("decode", sim.Fault{Kind: sim.FaultRestart}); err != nil {
			t.Fatal(err)
		}
		if err := cl.SetLoad("router", 1); err != nil {
			t.Fatal(err)
		}
		// Until each Alertmanager has notified the resolution (at its
		// group_interval, 5m): one that has not would take the next fill
		// for the alert it already notified, and not notify it again.
		for _, p := range paths {
			waitUntil(ctx, t, p.name+": "+stack.AlertKVExhausted+" resolves and is notified resolved", func() (bool, error) {
				as, err := amAlerts(ctx, p.am)
				return err == nil && len(as[stack.AlertKVExhausted]) == 0 && hooks.resolved(p.name, stack.AlertKVExhausted), err
			})
		}
		hooks.reset()
	}
	t.Log(latencyTable(results, paths))
}

// latencyPath is one path to an Alertmanager: its name ("serve",
// "prometheus") and the Alertmanager's address.
type latencyPath struct{ name, am string }

// latencyRun is what one fill measured: how long the cache took from the
// load change to above the threshold, and per path the time from then to
// the alert in Alertmanager's API and to its notification.
type latencyRun struct {
	from              float64 // the usage when the load changed
	fill              time.Duration
	arrived, notified map[string]time.Duration
}

func (r latencyRun) String() string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(r.arrived)) {
		parts = append(parts, fmt.Sprintf("%s: in Alertmanager %s after full, notified %s after full", p,
			r.arrived[p].Round(100*time.Millisecond), r.notified[p].Round(100*time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// fillAndWait fills the decode server's cache and waits for
// KVCacheExhausted on every path, asserting the order of events.
func fillAndWait(ctx context.Context, t *testing.T, cl *sim.Cluster, thr float64, paths []latencyPath, hooks *webhooks) latencyRun {
	t.Helper()
	start := time.Now()
	tr := cl.Truth("decode")
	from := float64(tr.UsedTokens) / float64(tr.CapacityTokens)
	if err := cl.SetFault("decode", sim.Fault{Kind: sim.FaultLeak}); err != nil {
		t.Fatal(err)
	}
	if err := cl.SetLoad("router", latencyFillFactor); err != nil {
		t.Fatal(err)
	}
	var full time.Time
	waitUntilEvery(ctx, t, 20*time.Millisecond, "the decode cache above the threshold", func() (bool, error) {
		tr := cl.Truth("decode")
		if float64(tr.UsedTokens) > thr*float64(tr.CapacityTokens) {
			full = time.Now()
			return true, nil
		}
		return false, nil
	})
	r := latencyRun{from: from, fill: full.Sub(start), arrived: map[string]time.Duration{}, notified: map[string]time.Duration{}}
	// Not before the cache is full: an alert sent during the fill would be
	// in Alertmanager now (it takes longer than this to resolve).
	for _, p := range paths {
		if as, err := amAlerts(ctx, p.am); err != nil || len(as[stack.AlertKVExhausted]) > 0 {
			t.Fatalf("%s: %s in Alertmanager as the cache passes the threshold: %v (%v)", p.name, stack.AlertKVExhausted, as[stack.AlertKVExhausted], err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make([]error, len(paths))
	for i, p := range paths {
		wg.Go(func() {
			var at time.Time
			errs[i] = poll(ctx, 100*time.Millisecond, p.name+": "+stack.AlertKVExhausted+" in Alertmanager", func() (bool, error) {
				as, err := amAlerts(ctx, p.am)
				if err != nil || len(as[stack.AlertKVExhausted]) == 0 {
					return false, err
				}
				at = time.Now()
				// The fast window pages before the slow one: the slow
				// critical alert has not reached Alertmanager yet.
				if c := as[stack.AlertKVCritical]; len(c) > 0 {
					t.Errorf("%s: %s reached Alertmanager no later than %s: %v", p.name, stack.AlertKVCritical, stack.AlertKVExhausted, c)
				}
				return true, nil
			})
			if errs[i] != nil {
				return
			}
			var notified time.Time
			errs[i] = poll(ctx, 50*time.Millisecond, p.name+": "+stack.AlertKVExhausted+" notified", func() (bool, error) {
				notified = hooks.first(p.name, stack.AlertKVExhausted)
				return !notified.IsZero(), nil
			})
			mu.Lock()
			r.arrived[p.name], r.notified[p.name] = at.Sub(full), notified.Sub(full)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// amAlerts returns the alerts in Alertmanager's API (active, suppressed
// or unprocessed) by name.
func amAlerts(ctx context.Context, am string) (map[string][]map[string]string, error) {
	var as []struct{ Labels map[string]string }
	if err := getJSONCtx(ctx, "http://"+am+"/api/v2/alerts", &as); err != nil {
		return nil, err
	}
	out := map[string][]map[string]string{}
	for _, a := range as {
		out[a.Labels["alertname"]] = append(out[a.Labels["alertname"]], a.Labels)
	}
	return out, nil
}

func getJSONCtx(ctx context.Context, u string, v any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func waitUntil(ctx context.Context, t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	waitUntilEvery(ctx, t, 500*time.Millisecond, what, f)
}

// waitUntilEvery polls f every interval until it returns true, failing
// the test when ctx ends first.
func waitUntilEvery(ctx context.Context, t *testing.T, interval time.Duration, what string, f func() (bool, error)) {
	t.Helper()
	if err := poll(ctx, interval, what, f); err != nil {
		t.Fatal(err)
	}
}

// poll polls f every interval until it returns true, or returns an error
// when ctx ends first (from any goroutine, unlike t.Fatal).
func poll(ctx context.Context, interval time.Duration, what string, f func() (bool, error)) error {
	var last error
	for {
		ok, err := f()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up waiting (last error: %v)", what, last)
		case <-time.After(interval):
		}
	}
}

// webhooks receives Alertmanager's webhook notifications on one path per
// Alertmanager and keeps when each alert name was first notified firing.
type webhooks struct {
	srv      *httptest.Server
	mu       sync.Mutex
	firing   map[string]time.Time // "path alertname"
	resolves map[string]bool
}

func newWebhooks(t *testing.T) *webhooks {
	h := &webhooks{firing: map[string]time.Time{}, resolves: map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Alerts []struct {
				Status string
				Labels map[string]string
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		h.mu.Lock()
		for _, a := range msg.Alerts {
			k := strings.TrimPrefix(r.URL.Path, "/") + " " + a.Labels["alertname"]
			if _, ok := h.firing[k]; !ok && a.Status == string(model.AlertFiring) {
				h.firing[k] = now
			}
			if a.Status == string(model.AlertResolved) {
				h.resolves[k] = true
			}
		}
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *webhooks) url(path string) string { return h.srv.URL + "/" + path }

// first is when the webhook at path was first notified of name firing
// (zero: not yet).
func (h *webhooks) first(path, name string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firing[path+" "+name]
}

// resolved says whether the webhook at path was notified of name resolved.
func (h *webhooks) resolved(path, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resolves[path+" "+name]
}

func (h *webhooks) reset() {
	h.mu.Lock()
	clear(h.firing)
	clear(h.resolves)
	h.mu.Unlock()
}

// latencyTable is the runs as a Markdown table with the median and the
// extremes per path, for docs/benchmarks.md.
func latencyTable(runs []latencyRun, paths []latencyPath) string {
	stat := func(ds []time.Duration) string {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		r := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
		median := (ds[(len(ds)-1)/2] + ds[len(ds)/2]) / 2
		return fmt.Sprintf("%s (%s – %s)", r(median), r(ds[0]), r(ds[len(ds)-1]))
	}
	var fills []time.Duration
	lo, hi := 1.0, 0.0
	for _, r := range runs {
		fills = append(fills, r.fill)
		lo, hi = min(lo, r.from), max(hi, r.from)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d fills, from %.1f–%.1f %% to above the threshold in %s (median, min – max)\n\n", len(runs), 100*lo, 100*hi, stat(fills))
	b.WriteString("| path | in Alertmanager after full | notified (webhook) after full |\n| --- | --- | --- |\n")
	for _, p := range paths {
		var in, notified []time.Duration
		for _, r := range runs {
			in, notified = append(in, r.arrived[p.name]), append(notified, r.notified[p.name])
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.name, stat(in), stat(notified))
	}
	return b.String()
}
