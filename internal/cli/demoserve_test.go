package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/web"
)

// runDemoServe starts serve over c with cfg as kvwatch demo runs it
// (history and the built-in rules on), until ctx ends or the test does;
// the test fails if serve returns an error. With ready it returns once
// serve has scraped every target.
func runDemoServe(ctx context.Context, t *testing.T, c *sim.Cluster, cfg *config.Config, stdout io.Writer, ready bool) (*serve.Daemon, *app.Serve) {
	t.Helper()
	return runDemoServeFlags(ctx, t, c, cfg, stdout, ready, embeddedFlags{history: "1h"})
}

// runDemoServeFlags is runDemoServe with serve's embedded flags f.
func runDemoServeFlags(ctx context.Context, t *testing.T, c *sim.Cluster, cfg *config.Config, stdout io.Writer, ready bool, f embeddedFlags) (*serve.Daemon, *app.Serve) {
	t.Helper()
	e := &env{Streams: Streams{Stdout: stdout, Stderr: os.Stderr}, Logger: slog.New(slog.DiscardHandler)}
	srv, err := demoServe(e, c, cfg, "127.0.0.1:0", f)
	if err != nil {
		t.Fatal(err)
	}
	d := srv.Daemon()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for i := 0; ready && !d.Ready(); i++ {
		if i > 600 {
			t.Fatal("serve did not scrape every target within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d, srv
}

// scrapedAgain waits until serve has scraped every target of d since the
// call (successfully, with ok), for a minute at most: after a simulated
// cluster advanced, the report and the exporter hold its new state.
func scrapedAgain(t *testing.T, d *serve.Daemon, ok bool) {
	t.Helper()
	mark := time.Now()
	for deadline := mark.Add(time.Minute); ; {
		time.Sleep(10 * time.Millisecond)
		rep := d.Report()
		fresh := len(rep.Servers) > 0
		for _, s := range rep.Servers {
			fresh = fresh && (s.OK || !ok) && s.ScrapedAt.After(mark)
		}
		if fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not scrape every target again within a minute")
		}
	}
}

// chromiumForUI returns the path of Chromium for a test that loads the web
// UI, once the UI's assets are built (`make assets`).
func chromiumForUI(t *testing.T) string {
	t.Helper()
	chromium := testenv.Tool(t, "chromium", "chromium")
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	return chromium
}

// scrapingEvery returns the default config with every target scraped each
// d, with a timeout of d.
func scrapingEvery(d time.Duration) *config.Config {
	cfg := config.Default()
	cfg.Global.ScrapeInterval = model.Duration(d)
	cfg.Global.ScrapeTimeout = model.Duration(d)
	return cfg
}

// headless starts the Chromium at path, headless with a w×h window and no
// background traffic, for the rest of the test, and returns a browser
// context for it; with timeout > 0 the context ends after it.
func headless(t *testing.T, path string, w, h int, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(w, h),
	}, extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if timeout > 0 {
		var tcancel context.CancelFunc
		bctx, tcancel = context.WithTimeout(bctx, timeout)
		t.Cleanup(tcancel)
	}
	return bctx
}

// exportedSample is one sample of serve's /metrics.
type exportedSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// exported reads serve's /metrics at base (the web root, ending in /)
// with Prometheus' text parser, as a scraper of the exporter reads it;
// only gauges and counters, which are all the families the tests ask
// about.
func exported(t *testing.T, base string) []exportedSample {
	t.Helper()
	resp, err := http.Get(base + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("serve's /metrics: %v", err)
	}
	var out []exportedSample
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			s := exportedSample{Name: name, Labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				s.Value = m.Gauge.GetValue()
			case m.Counter != nil:
				s.Value = m.Counter.GetValue()
			default:
				continue
			}
			out = append(out, s)
		}
	}
	return out
}

// poolRow reads the cells (data-field → text) of the web UI's pools-table
// row of pool ("host tier", ...) on the page bctx shows.
func poolRow(t *testing.T, bctx context.Context, pool string) map[string]string {
	t.Helper()
	row, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => {
		const r = {};
		document.querySelectorAll('#cache-pools tr[data-cache-pool="`+pool+`"] [data-field]').forEach(e => r[e.dataset.field] = e.textContent.trim());
		return r;
	})()`))
	if err != nil {
		t.Fatalf("read the pools table: %v", err)
	}
	return row
}
