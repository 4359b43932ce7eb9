package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/web"
)

// TestWebUIBeforeFirstScrape opens the UI while serve has scraped nothing
// yet (every simulated server answers after 20s; the scrape timeout is
// 10s): the report has no servers, and the page must say so calmly, not
// fail with a script error.
func TestWebUIBeforeFirstScrape(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "chromium")
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
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
	cfg := config.Default()
	cfg.Global.ScrapeInterval = model.Duration(10 * time.Second)
	cfg.Global.ScrapeTimeout = model.Duration(10 * time.Second)
	d, _ := runDemoServe(ctx, t, c, cfg, io.Discard, false)
	bctx := headless(t, chromium, 1280, 1000, time.Minute)
	start := time.Now()
	if err := chromedp.Do(bctx, chromedp.Navigate(externalURL(d)), chromedp.WaitVisible(chromedp.CSS(`body[data-rendered], #main p.error`))); err != nil {
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
