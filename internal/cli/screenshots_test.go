package cli

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Screenshot size: the README and docs/web.md show them at this size.
const shotW, shotH = 1280, 800

// TestWebUIScreenshots makes the pictures of the web UI in docs/: the
// default demo scenario (pd-sglang) going into the overload of issue 11
// (router load ×8 after 3 minutes, a KV leak on decode after 6), 20 minutes
// of simulated history 15 s apart, then the fleet overview, the decode
// server's page, the alerts page and the capacity planner in headless
// Chromium at 1280×800. Each capture must be a PNG of that size that is
// not blank, taken while the page shows what it is there to show (read
// from the DOM). With -update they are written to docs/screenshots/, with
// KVWATCH_SCREENSHOTS=DIR to DIR; always to $KVWATCH_ARTIFACTS.
func TestWebUIScreenshots(t *testing.T) {
	chromium := chromiumForUI(t)
	outDirs := []string{artifactsDir(t)}
	if *update {
		outDirs = append(outDirs, filepath.Join("..", "..", "docs", "screenshots"))
	}
	if d := os.Getenv("KVWATCH_SCREENSHOTS"); d != "" {
		outDirs = append(outDirs, d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "pd-sglang", 17)
	defer c.Close()
	cfg := scrapingEvery(200 * time.Millisecond)
	// A history of 8 days: the planner's projection needs 5.
	d, srv := runDemoServeFlags(ctx, t, c, cfg, io.Discard, true, embeddedFlags{history: "8d"})
	post := func(ep, path string) {
		t.Helper()
		for _, x := range c.Endpoints() {
			if x.Name != ep {
				continue
			}
			resp, err := http.Post(x.URL+path, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s %s: %d %s", ep, path, resp.StatusCode, b)
			}
			return
		}
		t.Fatalf("no simulated server %s", ep)
	}

	// 20 minutes of simulated time, 15 s a step, ending now: each step
	// moves the simulator on, waits for serve to scrape every target after
	// it, and appends what serve exports to the history (rules evaluated
	// there), as TestSimulatedKVAlertFiresAndResolves does.
	const step, steps = 15 * time.Second, 80
	t0 := time.Now().Add(-steps * step).Truncate(time.Second)
	for i := range steps {
		switch i {
		case 12:
			post("router", "/-/sim/load?factor=8")
		case 24:
			post("decode", "/-/sim/fault?kind=leak")
		}
		c.Advance(step)
		scrapedAgain(t, d, true)
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		ts := t0.Add(time.Duration(i+1) * step)
		srv.History().AppendFamilies(ts, mfs)
		srv.Rules().EvalAt(ctx, ts)
	}
	// The projection: a decode pool of cluster "history" whose 7 days
	// serve kept, growing 3 % of its capacity a day from a 50 % peak, with
	// a daily cycle and ±3 % noise; the demo's pools, 20 minutes old, are
	// too young for a trend.
	histEnd := t0.Add(steps * step)
	for i := range 2 {
		id := []string{signal.LabelServer, fmt.Sprintf("history-%d", i), signal.LabelRole, "decode", signal.LabelCluster, "history"}
		used := labels.FromStrings(append([]string{"__name__", signal.KVUsedTokens.Name}, id...)...)
		capacity := labels.FromStrings(append([]string{"__name__", signal.KVCapacityTokens.Name}, id...)...)
		for k := 0; ; k++ {
			ts := histEnd.Add(-7*24*time.Hour + time.Duration(k)*5*time.Minute)
			if ts.After(histEnd) {
				break
			}
			// The cycle peaks at 12:00 UTC, in the middle of the plan's
			// days, and the noise follows the clock's 5-minute slots: the
			// daily peaks do not move with the hour the test runs.
			dd := float64(k) * 5 / (24 * 60)
			slot := ts.Unix() / 300
			cycle := 0.7 + 0.3*math.Cos(2*math.Pi*(float64(slot%288)/288-0.5))
			noise := 1 + 0.03*math.Sin(float64(slot*7919%1000))
			srv.History().Append(used, ts.UnixMilli(), (1<<20)*(0.5+0.03*dd)*cycle*noise)
			srv.History().Append(capacity, ts.UnixMilli(), 1<<20)
		}
	}
	srv.Projector().Refresh(ctx)
	firing := 0
	for _, a := range srv.Rules().Alerts() {
		if a.State == "firing" {
			firing++
		}
	}
	if firing == 0 {
		t.Fatalf("no alert fires after 14 minutes of overload: %+v", srv.Rules().Alerts())
	}
	base := d.URL()

	bctx := headless(t, chromium, shotW, shotH, 0,
		chromedp.Flag("hide-scrollbars", true), chromedp.Flag("force-device-scale-factor", "1"))
	var mu sync.Mutex
	var consoleErrors []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				consoleErrors = append(consoleErrors, fmt.Sprintf("console.%s: %v", ev.Type, ev.Args))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, fmt.Sprintf("exception: %s %v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception))
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	bctx, tcancel := context.WithTimeout(bctx, 2*time.Minute)
	defer tcancel()
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(shotW, shotH)); err != nil {
		t.Fatal(err)
	}

	projection := `[data-projection="decode{cluster=history}"] .plot`
	pages := []struct {
		file, route string
		ready       []string // CSS selectors the page must show first
		text        []string // in the page's text
		scroll      string   // the element scrolled into view, if any
	}{
		{"web-overview.png", "#/", []string{`tr[data-server="decode"]`, `#chart-usage[data-state="drawn"]`, `[data-limit="decode"]`},
			[]string{"The limit", "decode pool KV usage · 1 server", "KV usage by server", "workers 2/2 healthy", "firing"}, ""},
		{"web-server-decode.png", "#/server/decode", []string{`#server-title`, `#c-usage[data-state="drawn"]`, `#c-demand[data-state="drawn"]`, `#c-tokens[data-state="drawn"]`},
			[]string{"decode · sglang", "Queued KV demand", "KV tokens: used, capacity, evictable"}, ""},
		{"web-alerts.png", "#/alerts", []string{`#alerts [data-field="alert-value"]`},
			[]string{"Active alerts", "KVCacheUsageCritical", "firing", "Rules", "KVPoolFullSoon", "decode pool"}, ""},
		{"web-planner.png", "#/planner", []string{`#plan-servers tr[data-server="decode"] [data-field="requests"]`},
			[]string{"More requests of 8,192 tokens", "pool · decode", "1 server\t"}, ""},
		{"web-planner-projection.png", "#/planner", []string{projection + `[data-state="drawn"]`},
			[]string{"Projection over days", "decode{cluster=history} growing", "warning 20", "full 20", "decode: ", "a trend needs 5"}, "projection"},
	}
	for _, p := range pages {
		acts := []chromedp.Action[chromedp.Void]{chromedp.Navigate(base + p.route)}
		for _, sel := range p.ready {
			acts = append(acts, chromedp.WaitVisible(chromedp.CSS(sel)))
		}
		if err := chromedp.Do(bctx, acts...); err != nil {
			t.Errorf("%s: %v", p.route, err)
			continue
		}
		if p.scroll != "" {
			if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById(`+strconv.Quote(p.scroll)+`).scrollIntoView(), true`)); err != nil {
				t.Fatalf("%s: scroll to %s: %v", p.route, p.scroll, err)
			}
		}
		// Let uPlot finish its first paint (it draws on the next frame).
		time.Sleep(300 * time.Millisecond)
		if p.file == "web-planner-projection.png" {
			projectionDrawn(t, bctx, projection)
		}
		text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
		if err != nil {
			t.Fatalf("%s: %v", p.route, err)
		}
		for _, w := range p.text {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not show %q:\n%s", p.route, w, text)
			}
		}
		for _, bad := range []string{"Cannot load", "Cannot read", "undefined", "NaN"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s shows %q:\n%s", p.route, bad, text)
			}
		}
		b, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("%s: screenshot: %v", p.route, err)
		}
		dirs := outDirs
		if err := shotProblem(b); err != nil {
			t.Errorf("%s: %v", p.file, err)
		}
		if t.Failed() {
			dirs = outDirs[:1] // a broken page never replaces the docs' picture
		}
		for _, dir := range dirs {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p.file), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d bytes", p.file, len(b))
		// The whole page, for a look at what is below the fold: artifacts only.
		if full, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(outDirs[0], strings.TrimSuffix(p.file, ".png")+"-full.png"), full, 0o644)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("browser console errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
}

// projectionDrawn checks the planner's projection chart at sel: drawn
// from the plan's daily peaks and line with a band (the plan's bounds
// apart somewhere), and the band filled on the canvas: pixels of its fill
// colour, rgba(31,119,180,0.15), where no line is.
func projectionDrawn(t *testing.T, bctx context.Context, sel string) {
	t.Helper()
	got, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]any](`(() => {
		const el = document.querySelector(`+strconv.Quote(sel)+`);
		const c = el.querySelector("canvas");
		const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		let fill = 0;
		for (let i = 0; i < d.length; i += 4) {
			if (Math.abs(d[i] - 31) <= 3 && Math.abs(d[i + 1] - 119) <= 3 && Math.abs(d[i + 2] - 180) <= 3 && d[i + 3] >= 30 && d[i + 3] <= 45) fill++;
		}
		return { peaks: Number(el.dataset.peaks), band: Number(el.dataset.band), fill };
	})()`))
	if err != nil {
		t.Fatalf("projection chart: %v", err)
	}
	t.Logf("projection chart: %v", got)
	// The band's width follows the fit of the last days' peaks: how many
	// pixels it fills depends on the run's hour (the last day is partial);
	// drawn at all is what is checked here, the band's values in forecast.
	if got["peaks"].(float64) < 5 || got["band"].(float64) < 1 || got["fill"].(float64) < 20 {
		t.Errorf("projection chart: %v; want at least 5 daily peaks, a band in the plan's line and at least 20 pixels of its fill", got)
	}
}

// shotProblem says what is wrong with b unless it is a PNG of
// shotW×shotH with something drawn on it: many colours, and no single
// colour covering nearly all of it.
func shotProblem(b []byte) error {
	if len(b) < 20_000 || len(b) > 1_000_000 {
		return fmt.Errorf("%d bytes, want a real page of 20 kB to 1 MB", len(b))
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a PNG: %v", err)
	}
	r := img.Bounds()
	if r.Dx() != shotW || r.Dy() != shotH {
		return fmt.Errorf("%dx%d, want %dx%d", r.Dx(), r.Dy(), shotW, shotH)
	}
	colours := map[uint32]int{}
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			colours[cr>>8<<16|cg>>8<<8|cb>>8]++
		}
	}
	most, n := 0, (r.Dx()/2)*(r.Dy()/2)
	for _, k := range colours {
		most = max(most, k)
	}
	if len(colours) < 50 || most > n*97/100 {
		return fmt.Errorf("%d colours, the commonest on %d of %d pixels: a blank page", len(colours), most, n)
	}
	return nil
}

// TestShotProblem: a blank page, a page with a few lines and a wrong size
// are refused.
func TestShotProblem(t *testing.T) {
	enc := func(img image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	blank := image.NewRGBA(image.Rect(0, 0, shotW, shotH))
	noisy := func(w, h int) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range img.Pix {
			img.Pix[i] = byte(i*7919>>3) | 3
		}
		return img
	}
	lines := image.NewRGBA(image.Rect(0, 0, shotW, shotH))
	for x := range shotW {
		for _, y := range []int{100, 300, 500} {
			lines.Set(x, y, color.RGBA{R: byte(x), A: 255})
		}
	}
	for name, img := range map[string]image.Image{"blank": blank, "lines": lines, "small": noisy(640, 400)} {
		if err := shotProblem(enc(img)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := shotProblem(enc(noisy(shotW, shotH))); err != nil {
		t.Errorf("a full page: %v", err)
	}
	if err := shotProblem([]byte("not a png, but long enough" + strings.Repeat(".", 30_000))); err == nil {
		t.Error("not a PNG: accepted")
	}
}
