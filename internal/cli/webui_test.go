package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// TestWebUIBeforeFirstScrape opens the UI while serve has scraped nothing
// yet (every simulated server answers after 20s; the scrape timeout is
// 10s): the report has no servers, and the page must say so calmly, not
// fail with a script error.
func TestWebUIBeforeFirstScrape(t *testing.T) {
	chromium := chromiumForUI(t)
	sc, err := sim.ParseScenario("slow", []byte(`
servers:
  - name: a
    engine: sglang
    fault: {kind: slow, delay: 20s}
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := scrapingEvery(10 * time.Second)
	d, _ := runDemoServe(ctx, t, c, cfg, io.Discard, false)
	bctx := headless(t, chromium, 1280, 1000, time.Minute)
	start := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL()), chromedp.WaitVisible(chromedp.CSS(`body[data-rendered], #main p.error`))); err != nil {
		t.Fatalf("overview: %v", err)
	}
	main, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if rows := len(d.Report().Servers); rows != 0 || time.Since(start) > 9*time.Second {
		t.Skipf("the first scrape finished before the page was read (%d rows after %v): nothing to test", rows, time.Since(start))
	}
	if strings.Contains(main, "Cannot load") || strings.Contains(main, "Cannot read") {
		t.Errorf("the UI failed on an empty report: %s", main)
	}
	if !strings.Contains(main, "Fleet KV usage · 0 servers") {
		t.Errorf("the UI does not say there are no servers yet: %s", main)
	}
}

// TestWebUIServerPageUnderQueryLimit opens a server's page, which asks
// for a dozen charts at once, from a serve that runs one query at a time
// and queues none (--query.max-concurrency=1 --query.max-queued=0), while
// other clients keep that slot busy: serve refuses the page's queries with 503
// and Retry-After, and the page must send them again and draw every
// chart, not show "Cannot load" (a CI run failed so when the queue was
// off by mistake).
func TestWebUIServerPageUnderQueryLimit(t *testing.T) {
	chromium := chromiumForUI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "pd-sglang", 3)
	cfg := scrapingEvery(200 * time.Millisecond)
	f := embeddedFlags{history: "1h", query: queryFlags{maxConcurrency: 1, maxQueued: 0, queuedGiven: true}}
	d, srv := runDemoServeFlags(ctx, t, c, cfg, io.Discard, true, f)
	// The history records what serve scrapes, as serve's run does.
	hctx, hcancel := context.WithCancel(ctx)
	hdone := make(chan error, 1)
	go func() { hdone <- srv.History().Run(hctx, app.Feeder(d)) }()
	t.Cleanup(func() {
		hcancel()
		if err := <-hdone; err != nil {
			t.Errorf("history: %v", err)
		}
	})
	time.Sleep(2 * time.Second) // a few samples, so that the charts draw

	// The browser reaches serve through a proxy that counts serve's
	// refusals.
	target, err := url.Parse(d.URL())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards refused
	refused := 0
	stopFlood := make(chan struct{})
	var stopOnce sync.Once
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.StatusCode == http.StatusServiceUnavailable {
			mu.Lock()
			refused++
			mu.Unlock()
			stopOnce.Do(func() { close(stopFlood) })
		}
		return nil
	}
	proxy := httptest.NewServer(rp)
	defer proxy.Close()

	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute)
	charts := `#c-usage[data-state="drawn"], #c-demand[data-state="drawn"], #c-tokens[data-state="drawn"]`
	// Three clients keep serve's one slot busy (each query is as costly as
	// serve allows: 2,000,000 evaluation steps) until serve has refused
	// one of the page's queries; then they stop and the page's next try
	// finds the slot free.
	flood := url.Values{"query": {"sum_over_time(vector(1)[10000s:1s])"}, "start": {"0"}, "end": {"199"}, "step": {"1"}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stopFlood:
					return
				default:
				}
				resp, err := http.Get(d.URL() + "api/v1/query_range?" + flood.Encode())
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					time.Sleep(5 * time.Millisecond) // another flood query holds the slot
				}
			}
		}()
	}
	defer wg.Wait()
	defer stopOnce.Do(func() { close(stopFlood) })
	if err := chromedp.Do(bctx, chromedp.Navigate(proxy.URL+"/#/server/decode")); err != nil {
		t.Fatal(err)
	}
	// Every chart drawn, or the page gave up, within the retries' time.
	done := `document.querySelectorAll('` + charts + `').length === 3 || document.querySelector("#main p.error") !== null`
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](done, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		main, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
		t.Fatalf("server page: %v\n%s", err, main)
	}
	main, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(main, "Cannot load") {
		t.Errorf("the page gave up on a busy serve:\n%s", main)
	}
	n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('`+charts+`').length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("%d of the usage, demand and token charts drawn, want 3:\n%s", n, main)
	}
	mu.Lock()
	defer mu.Unlock()
	if refused == 0 {
		t.Error("serve refused none of the page's queries: the retry was not exercised")
	}
	t.Logf("serve refused %d of the page's requests with 503", refused)
}

// TestWebUICacheServer: in the overview, the LMCache server beside vLLM
// shows its tiers in the usage column and is not one of the fleet's KV
// servers ("Fleet KV usage · 1 server"), as status and top say.
func TestWebUICacheServer(t *testing.T) {
	chromium := chromiumForUI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "vllm-lmcache", 5)
	c.Advance(3 * time.Minute)
	cfg := scrapingEvery(time.Second)
	d, _ := runDemoServe(ctx, t, c, cfg, io.Discard, true)
	bctx := headless(t, chromium, 1280, 1000, time.Minute)
	if err := chromedp.Do(bctx, chromedp.Navigate(d.URL()),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-server="lmcache"] [data-field="tiers"]`))); err != nil {
		t.Fatalf("overview: %v", err)
	}
	tiers, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('tr[data-server="lmcache"] [data-field="tiers"]').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	main, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	var l1 string
	for _, s := range d.Report().Servers {
		if s.Role == kv.RoleCache && s.Server != nil {
			for _, p := range s.Server.CachePools {
				if p.Tier == kv.TierLMCacheL1 && p.UsageRatio.OK() {
					l1 = fmt.Sprintf("lmcache-l1 %.1f%%", 100*p.UsageRatio.V)
				}
			}
		}
	}
	if l1 == "" || !strings.Contains(tiers, l1) {
		t.Errorf("the cache server's tiers read %q; want %q (serve's report)", tiers, l1)
	}
	if !strings.Contains(main, "Fleet KV usage · 1 server") {
		t.Errorf("the overview counts the cache server among the KV servers:\n%s", main)
	}
	if strings.Contains(main, "Cannot") || strings.Contains(main, "NaN") || strings.Contains(main, "undefined") {
		t.Errorf("the overview shows an error:\n%s", main)
	}
	// Its own page and the planner show it without a script error.
	for route, ready := range map[string]string{"#/server/lmcache": `#cache-pools`, "#/planner": `#plan-servers tr[data-server="vllm"]`} {
		if err := chromedp.Do(bctx, chromedp.Navigate(d.URL()+route),
			chromedp.WaitVisible(chromedp.CSS(ready+`, #main p.error`))); err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"Cannot", "NaN", "undefined"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s shows %q:\n%s", route, bad, text)
			}
		}
		if route == "#/server/lmcache" && !strings.Contains(text, "lmcache-l1") {
			t.Errorf("the cache server's page lacks its tiers:\n%s", text)
		}
	}
	// The exporter labels it so, which the recording rules leave out of
	// the pool counts (stack's countRuleTests).
	resp, err := http.Get(d.URL() + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	found := false
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "kvwatch_target_up{") && strings.Contains(l, `server="lmcache"`) {
			found = true
			if !strings.Contains(l, `role="cache"`) {
				t.Errorf("exported %s; want role cache", l)
			}
		}
	}
	if !found {
		t.Error("serve exports no kvwatch_target_up for the cache server")
	}
}
