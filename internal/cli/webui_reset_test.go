package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestWebUICounterGoesBackwards: a hostile target whose prompt-token
// counter goes back by about 5,000 tokens once (not a restart: it stays
// near 1,000,000) while it otherwise grows 100 tokens a page, 500/s at
// serve's 200 ms scrapes; its generation counter grows 50 a page (250/s)
// throughout. PromQL's rate() counts a decrease as a reset and the new
// reading as the increase: about 995,000 / 4 s = 250,000 tok/s over the
// chart's 4 s rate range. The server page's throughput chart must leave
// the windows with the decrease out (a gap in "prompt" where "generation"
// has points) and draw nothing above the real rates.
func TestWebUICounterGoesBackwards(t *testing.T) {
	chromium := chromiumForUI(t)
	const back = 15 // the page whose prompt counter went back
	var pages atomic.Int64
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		prompt := 1_000_000 + 100*n
		if n >= back {
			prompt = 995_000 + 100*(n-back)
		}
		fmt.Fprintf(w, `# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens 100000
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens 1000
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total %d
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total %d
`, prompt, 50*n)
	}))
	defer engine.Close()
	cfg := writeConfig(t, "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\ntargets:\n  - {name: hostile, url: "+engine.URL+"}\n")
	addr := testenv.FreeAddr(t)
	serve := runBackground(t, "serve", "--config.file", cfg, "--web.listen-address", addr, "--history", "10m")
	stderr := &serve.Stderr
	// 40 pages past the decrease: the chart then has windows before,
	// across and after it.
	for deadline := time.Now().Add(2 * time.Minute); pages.Load() < back+40; {
		if time.Now().After(deadline) {
			t.Fatalf("serve scraped %d pages in 2 minutes:\n%s", pages.Load(), stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+addr+"/#/server/hostile"),
		chromedp.WaitVisible(chromedp.CSS(`#c-tput[data-state="drawn"], #c-tput[data-state="empty"], #main p.error`))); err != nil {
		t.Fatalf("server page: %v\n%s", err, stderr.String())
	}
	js, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => {
		const el = document.getElementById("c-tput");
		const u = state.charts.find((u) => el.contains(u.root));
		return u ? JSON.stringify({labels: u.series.map((s) => s.label), data: u.data, rate: el.dataset.rateInterval}) : el.innerText;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Labels []any        `json:"labels"`
		Data   [][]*float64 `json:"data"`
		Rate   string       `json:"rate"`
	}
	if err := json.Unmarshal([]byte(js), &chart); err != nil {
		t.Fatalf("the throughput chart is not drawn: %s", js)
	}
	series := map[string][]*float64{}
	for i, l := range chart.Labels {
		if s, ok := l.(string); ok && i > 0 {
			series[s] = chart.Data[i]
		}
	}
	prompt, gen := series["prompt"], series["generation"]
	if prompt == nil || gen == nil {
		t.Fatalf("the chart's series are %v, want prompt and generation", chart.Labels)
	}
	drawn, gaps := 0, 0
	for i, v := range prompt {
		switch {
		case v != nil && *v > 2000:
			t.Errorf("prompt tokens/s drawn at %.0f at point %d (rate range %s): a rate across the decrease", *v, i, chart.Rate)
		case v != nil:
			drawn++
		case gen[i] != nil:
			gaps++
		}
	}
	if drawn == 0 || gaps == 0 {
		t.Errorf("prompt rate drawn at %d points, left out at %d where generation is drawn; want both (rate range %s)", drawn, gaps, chart.Rate)
	}
	t.Logf("prompt rate drawn at %d points, left out at %d (rate range %s)", drawn, gaps, chart.Rate)
}
