package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
	"github.com/kvwatch/kvwatch/internal/web"
)

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
// history and the built-in rules, as `kvwatch demo` does, scraping every
// 200ms. Only the daemon runs in real time: the test fills the history
// with feed, so what the charts hold is known.
func demoEnv(t *testing.T) (url string, d *serve.Daemon, feed func(ts time.Time, advance time.Duration) []*dto.MetricFamily) {
	t.Helper()
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := startPD(ctx, t)
	c.Advance(10 * time.Minute) // some KV in use
	cfg := scrapingEvery(200 * time.Millisecond)
	t.Cleanup(func() { cancel(); c.Close() }) // after serve's (cleanups run last first)
	d, srv := runDemoServe(ctx, t, c, cfg, os.Stdout, true)
	// feed moves the simulated clock on, waits until every target was
	// scraped after that, and appends what serve exports to the history
	// at ts (and evaluates the rules there).
	feed = func(ts time.Time, advance time.Duration) []*dto.MetricFamily {
		t.Helper()
		c.Advance(advance)
		scrapedAgain(t, d, false)
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		srv.History().AppendFamilies(ts, mfs)
		srv.Rules().EvalAt(ctx, ts)
		return mfs
	}
	return d.URL(), d, feed
}

// expectedRow formats a report row the way the UI must show it: as
// docs/status.md says status writes it (kmg, one decimal for a ratio, the
// smallest configured headroom size).
func expectedRow(s report.Server) map[string]string {
	str := func(v kv.Value, f func(float64) string) string {
		if !v.OK() {
			return "--"
		}
		return f(v.V)
	}
	pct := func(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }
	row := map[string]string{"role": string(s.Role)}
	if s.Server == nil {
		return row
	}
	sv := s.Server
	row["engine"] = sv.Engine
	row["usage"] = str(sv.UsageRatio, pct)
	row["used"] = str(sv.Used, kmg)
	row["capacity"] = str(sv.Capacity, kmg)
	row["running"] = str(sv.Running, kmg)
	row["queued"] = str(sv.Queued.QueuedTotal(), kmg)
	for _, h := range s.Headroom {
		if !h.Context && h.Tokens%1024 == 0 {
			row["headroom"] = str(h.Requests, kmg) + fmt.Sprintf("×%dk", h.Tokens/1024)
			break
		}
	}
	return row
}

// kmg writes a count as docs/status.md says the faces do: exact with
// thousands separators below 10,000, else three significant digits with
// k, M or G (written here apart from the faces' code).
func kmg(x float64) string {
	if math.Abs(x) < 9999.5 {
		return commas(int64(math.Round(x)))
	}
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(x) >= u.div*0.9995 {
			return strings.TrimSuffix(fmt.Sprintf("%#.3g", x/u.div), ".") + u.suffix
		}
	}
	panic("unreachable")
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

// TestBrowserOverviewAndServerPage opens the UI in headless Chromium
// twice: with one sample in the history (charts say they are collecting
// data; the rows match the report JSON), then with eight samples 10s apart
// (charts draw over a range chosen from the data, the prefill server's
// prefix hit ratio is the report's, its window named as status names it, rates have data,
// per-DP-rank lines are named dp0, dp1; a server with one DP rank gets a
// note instead of an empty chart).
func TestBrowserOverviewAndServerPage(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "chromium")
	url, daemon, feed := demoEnv(t)
	t0 := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	feed(t0, 0)

	// The report as `kvwatch status --output json` and the UI read it.
	rep := fetchReport(t, url)
	if len(rep.Servers) != 3 {
		t.Fatalf("report has %d servers, want the 3 of pd-sglang", len(rep.Servers))
	}

	bctx := headless(t, chromium, 1280, 1000, 0)

	var mu sync.Mutex
	var consoleErrors []string
	err := chromedp.Listen(bctx, func(ev any) {
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
	type field struct{ Text, Title string }
	readRows := func() map[string]map[string]field {
		rows, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]map[string]field](`(() => {
			const out = {};
			document.querySelectorAll('#servers tbody tr').forEach(tr => {
				const r = {};
				tr.querySelectorAll('[data-field]').forEach(td => r[td.dataset.field] = {text: td.textContent.trim(), title: td.title});
				out[tr.dataset.server] = r;
			});
			return out;
		})()`))
		if err != nil {
			t.Fatalf("read overview: %v", err)
		}
		return rows
	}
	dataset := func(id string) map[string]string {
		ds, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](fmt.Sprintf("Object.assign({}, document.getElementById(%q).dataset)", id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return ds
	}

	// One sample: the rows match the report, the charts wait for a second.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(css(`#servers tbody tr`)),
		chromedp.WaitVisible(css(`#chart-usage[data-state]`)),
	); err != nil {
		t.Fatalf("overview: %v", err)
	}
	rows := readRows()
	for _, s := range rep.Servers {
		got, ok := rows[s.Name]
		if !ok {
			t.Errorf("server %s of the report is missing from the overview (rows: %v)", s.Name, rows)
			continue
		}
		for k, w := range expectedRow(s) {
			if got[k].Text != w {
				t.Errorf("overview %s %s = %q, want %q (from the report JSON)", s.Name, k, got[k].Text, w)
			}
		}
	}
	// No window yet in the history: the ratio since the engine started,
	// marked, or -- with the reason when nothing was ever queried.
	firstHit, wantWhy := "--", "no prefix-cache traffic"
	for _, s := range rep.Servers {
		if c := s.Server; s.Name == "prefill" && c != nil && c.Counters.PrefixQueryTokens.V > 0 {
			firstHit = fmt.Sprintf("%.1f%%†", 100*c.Counters.PrefixHitTokens.V/c.Counters.PrefixQueryTokens.V)
			wantWhy = "since engine start"
		}
	}
	if hit := rows["prefill"]["hit"]; hit.Text != firstHit || !strings.Contains(hit.Title, wantWhy) {
		t.Errorf("prefill prefix hit with one sample and a still clock = %q (title %q), want %q (title saying %q)", hit.Text, hit.Title, firstHit, wantWhy)
	}
	if ds := dataset("chart-usage"); ds["state"] != "collecting" {
		t.Errorf("fleet chart with one sample in the history: state %q, want collecting (a lone dot says nothing)", ds["state"])
	}
	text, _ := chromedp.Run(bctx, chromedp.Text(css(`#chart-usage`)))
	if !strings.Contains(text, "collecting data") {
		t.Errorf("fleet chart with one sample says %q, want it to say it is collecting data", text)
	}
	shot("web-overview-collecting.png")

	// Seven more samples, 10s of simulated time apart.
	for i := 1; i <= 7; i++ {
		feed(t0.Add(time.Duration(i)*10*time.Second), 10*time.Second)
	}
	// One more scrape with the clock still, so that the report the page
	// loads and the one fetched below agree: the scrape right after an
	// advance saw the counters move (a ratio over its interval), the next
	// one sees none (since engine start).
	scrapedAgain(t, daemon, false)
	if err := chromedp.Do(bctx,
		chromedp.Reload(),
		chromedp.WaitVisible(css(`#servers tbody tr`)),
		chromedp.WaitVisible(css(`#chart-usage[data-state="drawn"]`)),
	); err != nil {
		t.Fatalf("overview with history: %v", err)
	}
	// The hit ratio is the report's, its window named under the table as
	// status and top name it (the clock stands still: serve's last scrapes
	// saw no traffic, so the ratio is since engine start).
	rows = readRows()
	rep = fetchReport(t, url)
	var windows []string
	for _, s := range rep.Servers {
		if s.Text != nil && s.Role != kv.RoleRouter {
			windows = append(windows, s.Text.PrefixHitWindow)
		}
		if s.Name == "prefill" && (s.Text == nil || rows["prefill"]["hit"].Text != s.Text.PrefixHitRatio) {
			t.Errorf("prefill prefix hit = %q, want the report's %+v", rows["prefill"]["hit"].Text, s.Text)
		}
	}
	note, _ := chromedp.Run(bctx, chromedp.Text(css(`[data-field="hit-windows"]`)))
	if want := textfmt.HitWindows(windows); want == "" || note != want {
		t.Errorf("the overview names the hit ratio's window %q, want %q (the report's windows %q)", note, want, windows)
	}
	ds := dataset("chart-usage")
	var points, start, end float64
	fmt.Sscan(ds["points"], &points)
	fmt.Sscan(ds["rangeStart"], &start)
	fmt.Sscan(ds["rangeEnd"], &end)
	if points < 2*2 {
		t.Errorf("the fleet chart drew %v points, want at least two per server", points)
	}
	// 80s of data, ending about 50s ago: the axis spans 5 minutes, not the
	// 1h range chosen.
	if span := end - start; span < 299 || span > 310 {
		t.Errorf("fleet chart x range spans %.0fs, want 5 minutes (the data is 80s long)", span)
	}
	if float64(t0.Unix()) < start {
		t.Errorf("fleet chart x range starts at %v, after the first sample at %v", start, t0.Unix())
	}
	canvases, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#chart-usage canvas').length`))
	if err != nil || canvases == 0 {
		t.Errorf("the fleet chart has no canvas (%v): uPlot did not draw", err)
	}
	shot("web-overview.png")

	// The server page opens from the overview's link and draws its charts;
	// rates have data although samples are 10s apart and serve scrapes
	// every 200ms.
	if err := chromedp.Do(bctx,
		chromedp.Click(css(`#servers tr[data-server="decode"] a`)),
		chromedp.WaitVisible(css(`#server-title`)),
		chromedp.WaitVisible(css(`#c-tokens[data-state="drawn"]`)),
		chromedp.WaitVisible(css(`#c-tput[data-state]`)),
	); err != nil {
		t.Fatalf("server page: %v", err)
	}
	title, _ := chromedp.Run(bctx, chromedp.Text(css(`#server-title`)))
	if !strings.HasPrefix(title, "decode") {
		t.Errorf("server page title %q, want decode", title)
	}
	for _, id := range []string{"c-usage", "c-tokens", "c-ranks", "c-queues", "c-tput"} {
		if ds := dataset(id); ds["state"] != "drawn" || ds["points"] == "0" {
			t.Errorf("decode chart %s: state %q, %s points (rate range %s); want drawn points", id, ds["state"], ds["points"], ds["rateInterval"])
		}
	}
	// pd-sglang-dp's decode server has 2 DP ranks of 4 TP ranks each: one
	// line per DP rank.
	legend, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#c-ranks .u-legend .u-series .u-label')].slice(1).map(e => e.textContent)`))
	if want := []string{"dp0", "dp1"}; err != nil || !slices.Equal(legend, want) {
		t.Errorf("per-DP-rank legend = %q (%v), want %q", legend, err, want)
	}
	shot("web-server.png")

	// The prefill server has 4 TP ranks and one DP rank: no per-DP-rank
	// series, and the chart says why.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url+"#/server/prefill"),
		chromedp.WaitVisible(css(`#c-ranks[data-state="empty"]`)),
	); err != nil {
		t.Fatalf("prefill server page: %v", err)
	}
	if note, _ := chromedp.Run(bctx, chromedp.Text(css(`#c-ranks`))); note != "one DP rank: same as the server's usage" {
		t.Errorf("prefill per-DP-rank chart says %q, want the one-DP-rank note", note)
	}

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
	var headroom kv.Value
	for _, s := range fetchReport(t, url).Servers {
		if s.Name == "decode" {
			headroom = s.Server.Headroom(8192)
		}
	}
	if w := commas(int64(headroom.V)); !headroom.OK() || planned != w {
		t.Errorf("planner decode requests of 8192 tokens = %q, want %q", planned, w)
	}
	// The overview's decode pool card says what limits it and its N−1 answer.
	if err := chromedp.Do(bctx, chromedp.Navigate(url+"#/"), chromedp.WaitVisible(css(`.card.pool[data-pool="decode"] [data-field="pool-n1"]`))); err != nil {
		t.Fatalf("overview pool card planning line: %v", err)
	}
	if card, _ := chromedp.Run(bctx, chromedp.Text(css(`.card.pool[data-pool="decode"] [data-field="pool-n1"]`))); card != "single server: draining decode leaves no capacity" {
		t.Errorf("decode pool card N−1 = %q, want the single-server note", card)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url+"#/planner"), chromedp.WaitVisible(css(`#plan-pools tr[data-pool="decode"] [data-field="n1"]`))); err != nil {
		t.Fatalf("back to the planner: %v", err)
	}
	// Today's mix: the decode pool (one server) is never N−1 safe and says
	// so; its row and the decode server's limit come from the report.
	n1, _ := chromedp.Run(bctx, chromedp.Text(css(`#plan-pools tr[data-pool="decode"] [data-field="n1"]`)))
	if want := "single server: draining decode leaves no capacity"; n1 != want {
		t.Errorf("planner decode N−1 = %q, want %q", n1, want)
	}
	limit, _ := chromedp.Run(bctx, chromedp.Text(css(`#plan-limits tr[data-server="decode"] [data-field="limit"]`)))
	if limit == "" {
		t.Errorf("planner shows no limiting factor for decode")
	}
	// Servers needed: the report's desired servers of the decode pool.
	desired, _ := chromedp.Run(bctx, chromedp.Text(css(`#plan-pools tr[data-pool="decode"] [data-field="desired"]`)))
	var needed kv.Value
	for _, p := range fetchReport(t, url).Planning {
		if p.Name == "decode" {
			needed = p.DesiredServers
		}
	}
	if w := commas(int64(needed.V)); !needed.Trusted() || desired != w {
		t.Errorf("planner decode servers needed = %q, want the report's %+v", desired, needed)
	}
	// The decode pool is the decode server alone: the same number, in a
	// row of its own (pools, never roles summed across clusters).
	if pooled, err := chromedp.Run(bctx, chromedp.Text(css(`#plan-servers tr[data-pool="decode"] [data-field="requests"]`))); err != nil || pooled != planned {
		t.Errorf("planner decode pool row = %q (%v), want %q", pooled, err, planned)
	}
	shot("web-planner.png")

	// Narrow: the overview still reads at 800px.
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(800, 900),
		chromedp.Navigate(url+"#/"),
		chromedp.WaitVisible(css(`#chart-usage[data-state="drawn"]`)),
	); err != nil {
		t.Fatalf("overview at 800px: %v", err)
	}
	shot("web-overview-800.png")

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("browser console errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
}

// fetchReport reads the report as `kvwatch status --output json` and the
// UI do.
func fetchReport(t *testing.T, url string) report.Report {
	t.Helper()
	resp, err := http.Get(url + "api/kvwatch/v1/report")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep report.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep
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
	c := startPD(ctx, t)
	defer c.Close()
	cfg := scrapingEvery(200 * time.Millisecond)
	cfg.Alerts.KVUsageWarning = 0.8
	cfg.Alerts.KVUsageWarningFor = model.Duration(time.Minute)
	cfg.Alerting.Webhooks = []string{hook.URL}
	// Only the daemon runs in real time; the test feeds history and rules.
	d, srv := runDemoServe(ctx, t, c, cfg, os.Stdout, false)

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
		scrapedAgain(t, d, false)
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		ts := base.Add(time.Duration(i) * 15 * time.Second)
		srv.History().AppendFamilies(ts, mfs)
		srv.Rules().EvalAt(ctx, ts)
		st := "inactive"
		for _, a := range srv.Rules().Alerts() {
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
	// serve's /metrics tells how big the history is.
	resp, err := http.Get("http://" + d.Addrs()[0].String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n := srv.History().Stats().Series
	if n == 0 {
		t.Fatal("the history holds no series after 40 gathers")
	}
	if want := fmt.Sprintf("\nkvwatch_history_series %d\n", n); !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
	}
	mu.Lock()
	defer mu.Unlock()
	// Firing is re-sent every resend delay (1m) while it lasts.
	if want := []string{"firing", "resolved"}; !slices.Equal(slices.Compact(slices.Clone(hooks)), want) {
		t.Errorf("webhook got %v, want firing (repeated) then resolved", hooks)
	}
}

// startPD starts the simulated PD cluster with DP attention on decode
// (pd-sglang-dp: per-DP-rank views have data) on a manual clock until ctx
// ends.
func startPD(ctx context.Context, t *testing.T) *sim.Cluster {
	t.Helper()
	return startBuiltin(ctx, t, "pd-sglang-dp", 7)
}

// startBuiltin starts the built-in scenario name on a manual clock with
// seed until ctx ends.
func startBuiltin(ctx context.Context, t *testing.T, name string, seed uint64) *sim.Cluster {
	t.Helper()
	sc, err := sim.BuiltinScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
