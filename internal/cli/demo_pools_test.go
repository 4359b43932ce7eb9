package cli

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestBrowserPools runs `kvwatch demo` on the HiCache scenario and opens
// the server page in headless Chromium: the pools table lists the host
// tier with the capacity the scenario gives it, a fill whose usage is its
// used over its capacity, and the hits it served; the chart of further
// pools is there. The numbers of one row come from one report, so they
// must agree with each other while the simulation moves on.
func TestBrowserPools(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "chromium")
	addr := testenv.FreeAddr(t)
	demo := runBackground(t, "demo", "--scenario", "sglang-hicache", "--web.listen-address", addr, "--speed", "40")
	errb := &demo.Stderr
	url := "http://" + addr + "/"

	// Wait until the host tier holds something.
	var host *kv.CachePool
	for i := 0; host == nil || !host.Used.OK() || host.Used.V == 0; i++ {
		if i > 600 {
			t.Fatalf("no filled host tier in the report within a minute; stderr: %s", errb.String())
		}
		time.Sleep(100 * time.Millisecond)
		resp, err := http.Get(url + "api/kvwatch/v1/report")
		if err != nil {
			continue
		}
		var rep report.Report
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil || len(rep.Servers) != 1 || rep.Servers[0].Server == nil {
			continue
		}
		for _, p := range rep.Servers[0].Server.CachePools {
			if p.Tier == kv.TierHost {
				host = &p
			}
		}
	}

	bctx := headless(t, chromium, 1280, 1400, 2*time.Minute)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url+"#/server/hicache"),
		chromedp.WaitVisible(chromedp.CSS(`#cache-pools tbody tr[data-cache-pool="host tier"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#c-cache-pools[data-state]`)),
	); err != nil {
		t.Fatalf("server page: %v", err)
	}
	row := poolRow(t, bctx, "host tier")
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(strings.TrimSuffix(strings.ReplaceAll(s, ",", ""), "%"), 64)
		if err != nil {
			t.Errorf("pools table value %q is not a number", s)
		}
		return f
	}
	if len(row) != 4 {
		t.Fatalf("host tier row = %q, want usage, used, capacity and hits", row)
	}
	usage, used, capa, hits := num(row["usage"]), num(row["used"]), num(row["capacity"]), num(row["hits"])
	// hicache_tokens 2,000,000 per DP rank × 2 DP ranks.
	if capa != 4000000 {
		t.Errorf("host tier capacity %v, want 4,000,000 (2 DP ranks × hicache_tokens 2,000,000)", capa)
	}
	if used <= 0 || used > capa {
		t.Errorf("host tier used %v, want within (0, capacity]", used)
	}
	if want := used / capa * 100; usage < want-0.06 || usage > want+0.06 {
		t.Errorf("host tier usage %v%%, want used / capacity = %.2f%% (to the one decimal shown)", usage, want)
	}
	if hits < 0 {
		t.Errorf("host tier hits %v", hits)
	}
	if ds, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("c-cache-pools").dataset.state`)); err != nil || ds == "" {
		t.Errorf("further-pools chart state %q (%v), want one", ds, err)
	}
}
