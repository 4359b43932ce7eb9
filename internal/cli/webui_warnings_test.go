package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestBrowserWarningsAndMarks: serve over an implausible page (negative
// capacity and used) and a DP-2 page whose used only dp0 reports; the web
// UI, read in Chromium, lists the plausibility warnings of issue 11 in the
// overview and on the server page, shows the implausible value as such
// (never a plausible 5.0 %), and the partial sum as ~900? over a capacity
// of 2,000 (dp0 900 of 1,000, dp1 1,000 without used); and says why an
// asleep vLLM engine's KV is unavailable.
func TestBrowserWarningsAndMarks(t *testing.T) {
	testenv.StateDir(t)
	chromium := testenv.Tool(t, "chromium", "chromium")
	page := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	neg := page("sglang:max_total_num_tokens -100000\nsglang:num_used_tokens -5000\nsglang:num_running_reqs 1\nsglang:num_queue_reqs -3\nsglang:num_prefill_prealloc_queue_reqs 7\n")
	half := page(`sglang:max_total_num_tokens{dp_rank="0",tp_rank="0"} 1000
sglang:max_total_num_tokens{dp_rank="1",tp_rank="0"} 1000
sglang:num_used_tokens{dp_rank="0",tp_rank="0"} 900
`)
	addr := testenv.FreeAddr(t)
	serve := runBackground(t, "serve", "--web.listen-address", addr, "neg="+neg, "half="+half, "sleep="+page(asleepVLLMPage))
	errb := &serve.Stderr
	base := "http://" + addr + "/"
	for i := 0; ; i++ {
		resp, err := http.Get(base + "-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 300 {
			t.Fatalf("serve not ready within 30s; stderr: %s", errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute)

	type row struct{ Warnings, Usage, UsageProv, Used, UsedProv, Capacity, Queued, QueuedProv string }
	read := func(sel string) row {
		t.Helper()
		r, err := chromedp.Run(bctx, chromedp.Evaluate[row](`(() => {
			const tr = document.querySelector(`+"`"+sel+"`"+`);
			const f = (n) => tr.querySelector('[data-field="' + n + '"]');
			return {Warnings: [...tr.querySelectorAll('[data-warning]')].map(e => e.textContent).join("|"),
				Usage: f("usage").textContent, UsageProv: f("usage").dataset.provenance,
				Used: f("used").textContent, UsedProv: f("used").dataset.provenance,
				Capacity: f("capacity").textContent,
				Queued: f("queued").textContent, QueuedProv: f("queued").dataset.provenance || ""};
		})()`))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return r
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`tr[data-server="neg"] [data-warning]`))); err != nil {
		t.Fatalf("overview: %v; stderr: %s", err, errb.String())
	}
	n := read(`tr[data-server="neg"]`)
	for _, w := range []string{"warning negative: capacity is -100000", "warning negative: used is -5000", "warning negative: waiting queue is -3"} {
		if !strings.Contains(n.Warnings, w) {
			t.Errorf("overview row of neg: warnings %q lack %q", n.Warnings, w)
		}
	}
	// Flagged as status writes them: the engine's numbers marked !, a ratio
	// never as a plausible percentage.
	if n.Used != "!-5,000" || n.UsedProv != "implausible" || n.Capacity != "!-100k" || n.Usage != "implausible" {
		t.Errorf("overview row of neg = %+v, want used !-5,000 and capacity !-100k, usage implausible (no 5.0%%)", n)
	}
	// A queue of -3 beside one of 7 is not 4 queued requests: the sum is
	// flagged with its part.
	if n.Queued != "!4" || n.QueuedProv != "implausible" {
		t.Errorf("overview row of neg: queued %q (%s), want !4 (implausible), never a plain 4", n.Queued, n.QueuedProv)
	}
	h := read(`tr[data-server="half"]`)
	if h.Used != "~900?" || h.UsedProv != "partial" || h.Capacity != "2,000" || h.Usage != "~90.0%?" || h.UsageProv != "partial" || h.Warnings != "" {
		t.Errorf("overview row of half = %+v, want used ~900? (partial), capacity 2,000, usage ~90.0%%? (partial), no warning", h)
	}

	// The server page lists the same warnings.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/neg"), chromedp.WaitVisible(chromedp.CSS(`#server-title`))); err != nil {
		t.Fatalf("server page: %v", err)
	}
	ws, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#main [data-warning]')].map(e => e.dataset.warning + ": " + e.textContent)`))
	if err != nil || len(ws) != 3 || !strings.HasPrefix(ws[0], "negative: ") || !strings.HasPrefix(ws[2], "negative: ") {
		t.Errorf("server page warnings = %q (%v), want the three negative warnings", ws, err)
	}
	// Why the asleep engine's KV is unavailable, in status's words, on
	// its overview row and its server page.
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`tr[data-server="sleep"] [data-unavailable]`))); err != nil {
		t.Fatalf("overview: %v", err)
	}
	sleepRow, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`tr[data-server="sleep"] [data-unavailable]`)))
	if want := "unavailable asleep: " + asleepDetail; err != nil || sleepRow != want {
		t.Errorf("overview row of sleep: %q (%v), want %q", sleepRow, err, want)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/sleep")); err != nil {
		t.Fatalf("server page: %v", err)
	}
	sleepPage, err := chromedp.Run(bctx, chromedp.Poll[string](`(() => {
		const h = document.querySelector('#server-title'), u = document.querySelector('#main [data-unavailable]');
		return h && h.textContent.startsWith('sleep') && u ? u.textContent : false;
	})()`, chromedp.WithPollingTimeout(30*time.Second)))
	if want := "unavailable asleep: " + asleepDetail; err != nil || sleepPage != want {
		t.Errorf("server page of sleep: %q (%v), want %q", sleepPage, err, want)
	}
}
