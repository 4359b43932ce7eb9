package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/web"
)

// requireTool returns the path of an external binary, skipping the test
// when it is missing, or failing it when KVWATCH_REQUIRE_TOOLS=1 (as in CI).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := name + " not on PATH; install the Debian package " + pkg
	if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// artifactsDir is $KVWATCH_ARTIFACTS, or test-artifacts/ at the module root.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("KVWATCH_ARTIFACTS")
	if dir == "" {
		wd, _ := os.Getwd()
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "test-artifacts")
				break
			}
			if filepath.Dir(d) == d {
				dir = filepath.Join(wd, "test-artifacts")
				break
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// demoEnv starts the default simulated PD cluster on a manual clock (so its
// pages hold still while the browser and the test read them) and serve with
// history and the built-in rules, as `kvwatch demo` does.
func demoEnv(t *testing.T) (url string, d *serve.Daemon, emb *embedded) {
	t.Helper()
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc, err := sim.BuiltinScenario("pd-sglang")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Minute) // some KV in use
	e := &env{Streams: Streams{Stdout: os.Stdout, Stderr: os.Stderr}, Logger: slog.New(slog.DiscardHandler)}
	d, emb, err = demoDaemon(e, c, nil, "127.0.0.1:0", embeddedFlags{history: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- emb.run(ctx, d) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		c.Close()
	})
	// Wait until every target was scraped and the history holds samples.
	for i := 0; !d.Ready() || emb.store.Stats().Samples == 0; i++ {
		if i > 600 {
			t.Fatal("serve did not become ready with history within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return externalURL(d), d, emb
}

// expectedRow formats a report row the way the UI must show it.
func expectedRow(s report.Server) map[string]string {
	str := func(v kv.Value, f func(float64) string) string {
		if !v.OK() {
			return "--"
		}
		return f(v.V)
	}
	tok := func(x float64) string { return commas(int64(math.Round(x))) }
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }
	row := map[string]string{"role": string(s.Role)}
	if s.Server == nil {
		return row
	}
	sv := s.Server
	row["engine"] = sv.Engine
	row["usage"] = str(sv.UsageRatio, pct)
	row["used"] = str(sv.Used, tok)
	row["capacity"] = str(sv.Capacity, tok)
	row["running"] = str(sv.Running, tok)
	row["queued"] = str(sv.Queued.QueuedTotal(), tok)
	for _, h := range s.Headroom {
		if !h.Context {
			row["headroom"] = str(h.Requests, tok)
			break
		}
	}
	return row
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func TestBrowserOverviewAndServerPage(t *testing.T) {
	chromium := requireTool(t, "chromium", "chromium")
	url, _, _ := demoEnv(t)

	// The report as `kvwatch status --output json` and the UI read it.
	resp, err := http.Get(url + "api/kvwatch/v1/report")
	if err != nil {
		t.Fatal(err)
	}
	var rep report.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Servers) != 3 {
		t.Fatalf("report has %d servers, want the 3 of pd-sglang", len(rep.Servers))
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var mu sync.Mutex
	var consoleErrors []string
	err = chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				consoleErrors = append(consoleErrors, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, fmt.Sprintf("exception: %s %v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception))
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The browser lives as long as bctx; every action gets a deadline.
	bctx, tcancel := context.WithTimeout(bctx, 2*time.Minute)
	defer tcancel()

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(css(`#servers tbody tr`)),
		chromedp.WaitVisible(css(`#chart-usage[data-points]`)),
	); err != nil {
		t.Fatalf("overview: %v", err)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]map[string]string](`(() => {
		const out = {};
		document.querySelectorAll('#servers tbody tr').forEach(tr => {
			const r = {};
			tr.querySelectorAll('[data-field]').forEach(td => r[td.dataset.field] = td.textContent.trim());
			out[tr.dataset.server] = r;
		});
		return out;
	})()`))
	if err != nil {
		t.Fatalf("read overview: %v", err)
	}
	for _, s := range rep.Servers {
		got, ok := rows[s.Name]
		if !ok {
			t.Errorf("server %s of the report is missing from the overview (rows: %v)", s.Name, rows)
			continue
		}
		for k, w := range expectedRow(s) {
			if got[k] != w {
				t.Errorf("overview %s %s = %q, want %q (from the report JSON)", s.Name, k, got[k], w)
			}
		}
	}
	points, err := chromedp.Run(bctx, chromedp.Evaluate[int](`Number(document.getElementById('chart-usage').dataset.points)`))
	if err != nil || points == 0 {
		t.Errorf("the fleet chart drew %d data points (%v), want some", points, err)
	}
	canvases, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#chart-usage canvas').length`))
	if err != nil || canvases == 0 {
		t.Errorf("the fleet chart has no canvas (%v): uPlot did not draw", err)
	}
	shot := func(name string) {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Errorf("screenshot: %v", err)
			return
		}
		p := filepath.Join(artifactsDir(t), name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Error(err)
		}
		t.Logf("screenshot: %s", p)
	}
	shot("web-overview.png")

	// The server page opens from the overview's link and draws its charts.
	if err := chromedp.Do(bctx,
		chromedp.Click(css(`#servers tr[data-server="decode"] a`)),
		chromedp.WaitVisible(css(`#server-title`)),
		chromedp.WaitVisible(css(`#c-tokens[data-points]`)),
	); err != nil {
		t.Fatalf("server page: %v", err)
	}
	title, _ := chromedp.Run(bctx, chromedp.Text(css(`#server-title`)))
	tokPoints, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`Number(document.getElementById('c-tokens').dataset.points)`))
	if !strings.HasPrefix(title, "decode") || tokPoints == 0 {
		t.Errorf("server page title %q, token chart points %d; want decode with points", title, tokPoints)
	}
	shot("web-server.png")

	// The alerts page and the capacity planner render.
	cell := css(`#plan-servers tr[data-server="decode"] [data-field="requests"]`)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url+"#/alerts"),
		chromedp.WaitVisible(css(`#alerts`)),
		chromedp.Navigate(url+"#/planner"),
		chromedp.WaitVisible(cell),
	); err != nil {
		t.Fatalf("alerts and planner pages: %v", err)
	}
	planned, _ := chromedp.Run(bctx, chromedp.Text(cell))
	for _, s := range rep.Servers {
		if s.Name == "decode" {
			if w := commas(int64(s.Server.Headroom(8192).V)); planned != w {
				t.Errorf("planner decode requests of 8192 tokens = %q, want %q", planned, w)
			}
		}
	}
	shot("web-planner.png")

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("browser console errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
}

// TestSimulatedKVAlertFiresAndResolves drives the simulated decode server's
// KV over the warning threshold with 8× load through the whole pipeline
// (simulator → scrape → adapter → exporter → history → the stack's rules),
// sees KVCacheUsageHigh go pending then firing and reach a webhook, then
// restarts the engines (KV freed) and sees it resolve. Simulated time moves
// 15s per step; history and rules get the simulated timestamps.
func TestSimulatedKVAlertFiresAndResolves(t *testing.T) {
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var hooks []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m alerting.WebhookMessage
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		for _, a := range m.Alerts {
			if a.Labels["alertname"] == stack.AlertKVHigh && a.Labels["server"] == "decode" {
				hooks = append(hooks, a.Status)
			}
		}
		mu.Unlock()
	}))
	defer hook.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc, err := sim.BuiltinScenario("pd-sglang")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := config.Default()
	cfg.Global.ScrapeInterval = model.Duration(200 * time.Millisecond)
	cfg.Global.ScrapeTimeout = model.Duration(200 * time.Millisecond)
	cfg.Alerts.KVUsageWarning = 0.8
	cfg.Alerts.KVUsageWarningFor = model.Duration(time.Minute)
	cfg.Alerting.Webhooks = []string{hook.URL}
	e := &env{Streams: Streams{Stdout: os.Stdout, Stderr: os.Stderr}, Logger: slog.New(slog.DiscardHandler)}
	d, emb, err := demoDaemon(e, c, cfg, "127.0.0.1:0", embeddedFlags{history: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	// Only the daemon runs in real time; the test feeds history and rules.
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var states []string // KVCacheUsageHigh state of decode after each step
	c.SetLoad("router", 8)
	for i := range 40 {
		if i == 25 {
			c.SetLoad("router", 1)
			c.SetFault("decode", sim.Fault{Kind: sim.FaultRestart})
			c.SetFault("prefill", sim.Fault{Kind: sim.FaultRestart})
		}
		c.Advance(15 * time.Second)
		mark := time.Now()
		for fresh := false; !fresh; {
			time.Sleep(50 * time.Millisecond)
			fresh = true
			for _, s := range d.Report().Servers {
				fresh = fresh && s.ScrapedAt.After(mark)
			}
		}
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		ts := base.Add(time.Duration(i) * 15 * time.Second)
		emb.store.AppendFamilies(ts, mfs)
		emb.rules.EvalAt(ctx, ts)
		st := "inactive"
		for _, a := range emb.rules.Alerts() {
			if a.Labels.Get("alertname") == stack.AlertKVHigh && a.Labels.Get("server") == "decode" {
				st = a.State
			}
		}
		if len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
	}
	if want := []string{"inactive", "pending", "firing", "inactive"}; !slices.Equal(states, want) {
		t.Errorf("%s state changes = %v, want %v", stack.AlertKVHigh, states, want)
	}
	mu.Lock()
	defer mu.Unlock()
	// Firing is re-sent every resend delay (1m) while it lasts.
	if want := []string{"firing", "resolved"}; !slices.Equal(slices.Compact(slices.Clone(hooks)), want) {
		t.Errorf("webhook got %v, want firing (repeated) then resolved", hooks)
	}
}
