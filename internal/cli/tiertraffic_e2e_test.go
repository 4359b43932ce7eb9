package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/textfmt"
	"github.com/kvwatch/kvwatch/internal/web"
)

// TestTierTrafficMetricsOneTruth runs the simulated trtllm-serve with its
// host cache, held still, and checks that the host tier's traffic is the
// simulator's on every face: status -o json (the pool's load_bytes and
// store_bytes), status -o wide (its words after the pool's row), serve's
// kvwatch_kv_pool_transfer_bytes_total{direction}, serve's report and the
// web UI's pools table (in Chromium, where it is installed).
func TestTierTrafficMetricsOneTruth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testenv.Builtin(t, "trtllm-serve", sim.Options{Seed: 7, ManualClock: true})
	c.Advance(4 * time.Minute) // the pages hold still from here on
	ep := c.Endpoints()[0]
	tr := c.Truth(ep.Name)
	if tr.Host == nil || tr.Host.LoadedBytes == 0 || tr.Host.StoredBytes == 0 {
		t.Fatalf("host tier %+v: want bytes loaded and stored", tr.Host)
	}
	load, store := float64(tr.Host.LoadedBytes), float64(tr.Host.StoredBytes)
	hostOf := func(s *kv.Server) kv.CachePool {
		t.Helper()
		for _, p := range s.CachePools {
			if p.Type == kv.PoolFull && p.Tier == kv.TierHost {
				return p
			}
		}
		t.Fatalf("no host tier among %+v", s.CachePools)
		return kv.CachePool{}
	}

	// 1. status -o json.
	code, out, errs := run(t, "status", "-o", "json", demoTarget(ep))
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Servers) != 1 || rep.Servers[0].Server == nil {
		t.Fatalf("report: %+v", rep.Servers)
	}
	host := hostOf(rep.Servers[0].Server)
	if host.LoadBytes.V != load || host.StoreBytes.V != store || host.LoadBytes.Prov != kv.Direct || host.StoreBytes.Prov != kv.Direct {
		t.Errorf("status -o json: loaded %v, stored %v; want %v and %v, direct", host.LoadBytes, host.StoreBytes, load, store)
	}

	// 2. status -o wide: the same bytes in words after the host tier's row.
	code, out, _ = run(t, "status", "-o", "wide", demoTarget(ep))
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	words := textfmt.Traffic(host)
	if !strings.HasPrefix(words, "loaded ") || !strings.Contains(out, "host tier") || !strings.Contains(out, words) {
		t.Errorf("status does not say %q under the host tier:\n%s", words, out)
	}

	// 3. serve: /metrics and the report.
	d, _ := runDemoServe(ctx, t, c, scrapingEvery(500*time.Millisecond), io.Discard, true)
	scrapedAgain(t, d, true)
	base := d.URL()
	series := map[string]float64{}
	for _, s := range exported(t, base) {
		if s.Name == "kvwatch_kv_pool_transfer_bytes_total" && s.Labels["tier"] == "host" {
			series[s.Labels["direction"]] = s.Value
		}
	}
	if series["load"] != load || series["store"] != store || len(series) != 2 {
		t.Errorf("/metrics host traffic %v; want load %v, store %v", series, load, store)
	}
	serveRep := fetchReport(t, base)
	if len(serveRep.Servers) != 1 || serveRep.Servers[0].Server == nil {
		t.Fatalf("serve's report: %+v", serveRep.Servers)
	}
	if h := hostOf(serveRep.Servers[0].Server); h.LoadBytes != host.LoadBytes || h.StoreBytes != host.StoreBytes {
		t.Errorf("serve's report: loaded %v, stored %v; status -o json %v, %v", h.LoadBytes, h.StoreBytes, host.LoadBytes, host.StoreBytes)
	}

	// 4. The web UI's pools table, read in Chromium: the bytes as status
	// writes them.
	chromium := testenv.Tool(t, "chromium", "chromium")
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	bctx := headless(t, chromium, 1280, 1400, 2*time.Minute)
	row := `#cache-pools tbody tr[data-cache-pool="host tier"]`
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/"+ep.Name), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatalf("web UI: %v", err)
	}
	got := poolRow(t, bctx, "host tier")
	if got["load_bytes"] != textfmt.Bytes(host.LoadBytes) || got["store_bytes"] != textfmt.Bytes(host.StoreBytes) {
		t.Errorf("web UI host tier %v; want loaded %s, stored %s", got, textfmt.Bytes(host.LoadBytes), textfmt.Bytes(host.StoreBytes))
	}
}
