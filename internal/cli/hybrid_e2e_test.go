package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/web"
)

// TestHybridOneTruth runs a simulated hybrid Mamba model (Qwen3-Next-like:
// 12 state slots per rank, a running limit of 64, KV for far more) under
// more load than its slots take, and checks that status -o json, status,
// top --once, serve's /metrics and the web UI (read in Chromium) name the
// same binding pool in the same words: the concurrency is the 12 state
// slots, not the KV or the running limit; the limiting factor is the state
// pool; and the KV usage every face shows is the full pool's, never
// SGLang's token_usage (the max over pools, here the Mamba pool's).
func TestHybridOneTruth(t *testing.T) {
	chromium := testenv.Tool(t, "chromium", "chromium")
	if err := web.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc, err := sim.BuiltinScenario("sglang-mamba")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(sc, sim.Options{ManualClock: true, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Advance(2 * time.Minute) // the pages hold still from here on
	ep := c.Endpoints()[0]
	target := demoTarget(ep)
	t.Setenv("COLUMNS", "400")

	// The words, written here apart from textfmt: 12 slots bind below the
	// running limit of 64 and the KV's requests.
	const want = "concurrency 12, bound by state slots (mamba)"

	// 1. status -o json: the plan.
	code, out, errs := run(t, "status", "-o", "json", target)
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Servers) != 1 || rep.Servers[0].Plan == nil || rep.Servers[0].Server == nil || rep.Servers[0].Text == nil {
		t.Fatalf("report: %+v", rep.Servers)
	}
	row := rep.Servers[0]
	p := row.Plan
	if p.StatePool == nil || p.StatePool.Type != kv.PoolMamba || p.StatePool.Capacity.V != 12 || p.StatePool.CapacityRequests.V != 12 {
		t.Fatalf("state pool %+v, want 12 Mamba slots holding 12 requests", p.StatePool)
	}
	if p.KVCapacityRequests.V <= 12 || p.MaxRunning.V != 64 || p.Concurrency.V != 12 || p.Binding != kv.BindingMamba {
		t.Fatalf("KV %v requests, max running %v, concurrency %v bound by %q: want 12 bound by mamba_slots", p.KVCapacityRequests, p.MaxRunning, p.Concurrency, p.Binding)
	}
	if p.Limit != kv.FactorState {
		t.Errorf("limiting factor %s (%s), want state", p.Limit, p.Why)
	}
	// 11 or 12 of 12 slots: pressure or full, said of the state slots.
	if (p.State != kv.StateFull && p.State != kv.StatePressure) || !strings.HasPrefix(p.Evidence, "state slots (mamba) ") {
		t.Errorf("state %s: %q; want full or pressure of the state slots", p.State, p.Evidence)
	}
	if row.Text.Binding != want {
		t.Errorf("status -o json says %q, want %q", row.Text.Binding, want)
	}
	usage := pctText(row.Server.UsageRatio.V)
	tr := c.Truth("mamba")
	if fullUsage := float64(tr.UsedTokens) / float64(tr.CapacityTokens); row.Server.UsageRatio.V != fullUsage || fullUsage >= 0.9 {
		t.Fatalf("KV usage %v, the full pool's %v: want the full pool's, below the warning", row.Server.UsageRatio.V, fullUsage)
	}
	// SGLang's token_usage is the Mamba pool's here: no face may show it as KV.
	tokenUsage := pctText(float64(tr.Mamba.UsedSlots) / float64(tr.Mamba.CapacitySlots))
	if tokenUsage == usage {
		t.Fatalf("the Mamba pool's usage %s equals KV's: the test cannot tell them apart", usage)
	}

	// 2. status: the bound line, the plan's limiter, the KV usage.
	code, out, _ = run(t, "status", target)
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	if !regexp.MustCompile(`(?m)^bound +` + regexp.QuoteMeta(row.Name) + ` +` + regexp.QuoteMeta(want) + `  `).MatchString(out) {
		t.Errorf("status has no bound line saying %q:\n%s", want, out)
	}
	if !strings.Contains(out, row.Name+": "+p.Evidence) {
		t.Errorf("status does not give the evidence %q:\n%s", p.Evidence, out)
	}
	if !strings.Contains(out, "limited by "+row.Name+" (state)") || !strings.Contains(out, "("+usage+")") {
		t.Errorf("status does not say the state pool limits, or KV %s:\n%s", usage, out)
	}

	// 3. top --once: the server's line under the fleet, the LIMIT column.
	code, out, errs = run(t, "top", "--once", "--no-color", "--width", "200", target)
	if code != 0 {
		t.Fatalf("top --once: exit %d: %s", code, errs)
	}
	head, table, _ := strings.Cut(out, "SERVER")
	if !strings.Contains(head, want) || !strings.Contains(head, "KV ") || !strings.Contains(head, usage) {
		t.Errorf("top does not say %q with KV %s:\n%s", want, usage, out)
	}
	if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(row.Name) + `\s.*\s` + string(p.State) + `\s+state\s`).MatchString(table) {
		t.Errorf("top's LIMIT column does not say state:\n%s", out)
	}

	// 4. serve: /metrics and the web UI.
	d, _ := runDemoServe(ctx, t, c, scrapingEvery(500*time.Millisecond), io.Discard, true)
	scrapedAgain(t, d, true)
	base := d.URL()
	series := map[string]float64{}
	for _, s := range exported(t, base) {
		switch s.Name {
		case "kvwatch_binding_pool", "kvwatch_concurrency_requests", "kvwatch_limiting_factor", "kvwatch_kv_usage_ratio":
			// kvwatch_binding_pool{mamba_slots: the family, then its
			// binding or factor label's value.
			series[s.Name+"{"+s.Labels["binding"]+s.Labels["factor"]] = s.Value
		}
	}
	if series[`kvwatch_binding_pool{mamba_slots`] != 1 || series[`kvwatch_binding_pool{kv_tokens`] != 0 ||
		series[`kvwatch_concurrency_requests{`] != 12 || series[`kvwatch_limiting_factor{state`] != 1 {
		t.Errorf("/metrics: %v; want mamba_slots binding, 12 requests, factor state", series)
	}
	if got := pctText(series[`kvwatch_kv_usage_ratio{`]); got != usage {
		t.Errorf("/metrics KV usage %s, status -o json %s", got, usage)
	}
	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute)
	type card struct{ Binding, StatePool, Usage, Limit string }
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`[data-bound="`+row.Name+`"]`))); err != nil {
		t.Fatalf("web UI: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[card](`(() => {
			const b = document.querySelector('[data-bound]');
			const text = (sel) => (document.querySelector(sel) || {textContent: ""}).textContent.trim();
			return {Binding: b.querySelector('[data-field="binding"]').textContent.trim(), StatePool: b.querySelector('[data-field="state-pool"]').textContent.trim(),
				Usage: text('[data-pool] [data-field="usage"]'), Limit: text('[data-pool] [data-field="pool-limit"]')};
		})()`))
	if err != nil {
		t.Fatalf("web UI: %v", err)
	}
	serveRep := fetchReport(t, base)
	if got.Binding != want || got.StatePool != serveRep.Servers[0].Text.StatePool || !strings.HasPrefix(got.StatePool, "state slots (mamba) ") {
		t.Errorf("web UI says %q, %q; want %q and the report's %q", got.Binding, got.StatePool, want, serveRep.Servers[0].Text.StatePool)
	}
	if got.Usage != usage || got.Limit != fmt.Sprintf("limited by %s (state)", row.Name) {
		t.Errorf("web UI pool card: KV %q, %q; want %s, limited by %s (state)", got.Usage, got.Limit, usage, row.Name)
	}
}
