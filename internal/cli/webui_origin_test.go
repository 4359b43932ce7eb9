package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// refusedByReason reads kvwatch_web_requests_refused_total from serve's
// /metrics at base, by reason.
func refusedByReason(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	prefix := signal.WebRequestsRefused.Name + `{` + signal.LabelReason + `="`
	for sc.Scan() {
		l, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		reason, val, _ := strings.Cut(l, `"} `)
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out[reason] = v
	}
	return out
}

// TestWebUIRefusesOtherOrigins: a page of another origin sent two no-cors
// fetches of serve's query API and burned 42.9 CPU-seconds; a host name
// pointed at 127.0.0.1 (DNS rebinding) makes serve the page's own origin.
// In Chromium, the fetches of pages from another port of 127.0.0.1 (the
// same site) and from localhost (another site) are refused before a query
// runs, and a page under the rebound name is refused; serve's own UI
// loads with none of its requests refused.
func TestWebUIRefusesOtherOrigins(t *testing.T) {
	chromium := chromiumForUI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "pd-sglang", 3)
	cfg := scrapingEvery(time.Second)
	d, _ := runDemoServe(ctx, t, c, cfg, io.Discard, true)
	base := d.URL() // http://127.0.0.1:PORT/
	_, port, err := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}

	// The attacker's page asks for the costliest query serve allows, once
	// without CORS (the response is opaque, the query runs all the same)
	// and once with.
	costly := base + "api/v1/query_range?" + url.Values{"query": {"sum_over_time(vector(1)[10000s:1s])"}, "start": {"0"}, "end": {"199"}, "step": {"1"}}.Encode()
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>elsewhere</title><script>
window.settled = 0;
for (const mode of ["no-cors", "cors"]) fetch(%q, {mode}).catch(() => {}).finally(() => window.settled++);
</script>`, costly)
	}))
	defer attacker.Close()
	_, attackerPort, _ := net.SplitHostPort(strings.TrimPrefix(attacker.URL, "http://"))

	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute, chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"))
	// serve's own UI: every request of it answered.
	before := refusedByReason(t, base)
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`tr[data-server="decode"], #main p.error`))); err != nil {
		t.Fatalf("serve's UI: %v", err)
	}
	main, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("main").innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(main, "Cannot") || !strings.Contains(main, "decode pool KV usage") {
		t.Errorf("serve's own UI does not load:\n%s", main)
	}
	if after := refusedByReason(t, base); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("serve refused requests of its own UI: before %v, after %v", before, after)
	}

	for _, page := range []struct{ name, url string }{
		{"another port of 127.0.0.1 (the same site)", attacker.URL + "/"},
		{"localhost (another site)", "http://localhost:" + attackerPort + "/"},
	} {
		before := refusedByReason(t, base)
		if err := chromedp.Do(bctx, chromedp.Navigate(page.url)); err != nil {
			t.Fatalf("%s: %v", page.name, err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`window.settled === 2`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: the fetches did not settle: %v", page.name, err)
		}
		after := refusedByReason(t, base)
		if got := after[signal.RefusedCrossOrigin] - before[signal.RefusedCrossOrigin]; got != 2 {
			t.Errorf("a page from %s fetched serve's query API twice: %v requests refused as cross_origin, want 2", page.name, got)
		}
	}

	before = refusedByReason(t, base)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://rebind.test:"+port+"/")); err != nil {
		t.Fatalf("rebound name: %v", err)
	}
	text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `does not answer to the host name "rebind.test"`) || !strings.Contains(text, "--web.allowed-hosts=rebind.test") {
		t.Errorf("serve under a rebound name shows:\n%s", text)
	}
	if after := refusedByReason(t, base); after[signal.RefusedHost] <= before[signal.RefusedHost] {
		t.Errorf("no request refused for its host name: before %v, after %v", before, after)
	}

}
