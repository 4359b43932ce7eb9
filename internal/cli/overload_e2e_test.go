package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// facts are the decode pool's usage, demand and headroom as one face shows
// them, in the faces' own formats: usage "99.9%", demand "11.9×", headroom
// of 8,192-token requests as a whole number.
type facts struct{ usage, demand, headroom string }

// pctText and timesText format raw numbers (JSON, /metrics, PromQL) the way
// docs/status.md says the faces print them; they are written here, apart
// from the faces' code.
func pctText(r float64) string { return fmt.Sprintf("%.1f%%", r*100) }
func timesText(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100:
		return fmt.Sprintf("%.0f×", x)
	case a >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// TestOverloadOneTruth drives the default simulated PD cluster into the
// overload of issue 11 (router load ×8, then a KV leak on decode) and
// checks that status -o json, status text, top --once, the web UI (read in
// Chromium), /metrics and the recording rules (PromQL over serve's history)
// report the same decode-pool usage, demand and headroom, and that no face
// shows a number that blends prefill and decode. Issue 28: the faces
// also say it in the same words: the decode server's state, its name
// (status given the targets as the demo prints them), the prefix-hit
// window each names, the time to full and alert values in one form, alert
// counts that add up, and the bootstrap queue put on decode's
// pre-allocation.
func TestOverloadOneTruth(t *testing.T) {
	chromium := chromiumForUI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startBuiltin(ctx, t, "pd-sglang", 11)
	defer c.Close()
	eps := map[string]sim.Endpoint{}
	var targets []string
	for _, ep := range c.Endpoints() {
		eps[ep.Name] = ep
		targets = append(targets, demoTarget(ep)) // as the demo prints them
	}
	// Room for every column and one line per plan: the words are what is
	// compared here (TestStatusFitsTheWidth fits the width).
	t.Setenv("COLUMNS", "400")
	post := func(ep, path string) {
		resp, err := http.Post(eps[ep].URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s %s: %d %s", ep, path, resp.StatusCode, b)
		}
	}
	c.Advance(2 * time.Minute)
	post("router", "/-/sim/load?factor=8")
	c.Advance(2 * time.Minute)
	post("decode", "/-/sim/fault?kind=leak")
	c.Advance(4 * time.Minute)

	// serve over the cluster, history and rules on, as kvwatch demo runs it.
	cfg := scrapingEvery(500 * time.Millisecond)
	d, srv := runDemoServe(ctx, t, c, cfg, io.Discard, true)
	// The clock is manual: the pages hold still from here on. Two samples
	// in the history, the rules evaluated at the second.
	now := time.Now().Truncate(time.Second)
	for _, ts := range []time.Time{now.Add(-10 * time.Second), now} {
		// On a busy machine a scrape can time out: gather when every
		// target's last scrape worked.
		for i := 0; ; i++ {
			up := true
			for _, s := range d.Report().Servers {
				up = up && s.OK
			}
			if up {
				break
			}
			if i > 300 {
				t.Fatal("a target stayed down for 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		mfs, err := d.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		srv.History().AppendFamilies(ts, mfs)
		srv.Rules().EvalAt(ctx, ts)
	}
	base := d.URL()

	// 1. status -o json: the reference.
	code, out, errs := run(t, append([]string{"status", "-o", "json"}, targets...)...)
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errs)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var dec, pre *report.Server
	for i := range rep.Servers {
		switch rep.Servers[i].Role {
		case "decode":
			dec = &rep.Servers[i]
		case "prefill":
			pre = &rep.Servers[i]
		}
	}
	if dec == nil || pre == nil || dec.Server == nil || pre.Server == nil || len(rep.Pools) != 2 || rep.Pools[1].Name != "decode" {
		t.Fatalf("report: servers %+v, pools %+v", rep.Servers, rep.Pools)
	}
	dp := rep.Pools[1]
	if rep.Fleet.Limit != "decode" {
		t.Errorf("limit = %q, want decode", rep.Fleet.Limit)
	}
	if dp.UsageRatio.V < 0.99 || dp.DemandRatio.V <= 1 || dp.Headroom[0].Tokens != 8192 || dp.Headroom[0].Requests.V != 0 {
		t.Fatalf("not the overload: decode pool %+v", dp)
	}
	want := facts{pctText(dp.UsageRatio.V), timesText(dp.DemandRatio.V), strconv.Itoa(int(dp.Headroom[0].Requests.V))}
	// The pool is the decode server: its own numbers are the pool's.
	if got := (facts{pctText(dec.Server.UsageRatio.V), timesText(dec.Server.DemandRatio.V),
		strconv.Itoa(int(dec.Headroom[0].Requests.V))}); got != want {
		t.Errorf("decode server %+v, decode pool %+v", got, want)
	}
	t.Logf("decode pool: %+v; prefill %s", want, pctText(pre.Server.UsageRatio.V))
	// The blend no face may show: prefill and decode summed.
	blendCap := pre.Server.Capacity.V + dec.Server.Capacity.V
	blend := pctText((pre.Server.Used.V + dec.Server.Used.V) / blendCap)
	blends := []string{commas(int64(blendCap)), fmt.Sprintf("%.2fM", blendCap/1e6), blend}
	if blend == want.usage || blend == pctText(pre.Server.UsageRatio.V) {
		t.Fatalf("the blend %s equals a pool's usage: the test cannot tell them apart", blend)
	}
	noBlend := func(face, text string) {
		t.Helper()
		for _, b := range blends {
			if strings.Contains(text, b) {
				t.Errorf("%s shows %q, a prefill+decode blend:\n%s", face, b, text)
			}
		}
	}
	noBlend("status -o json", out)
	faces := map[string]facts{}
	// The leak is named on every face, in one word set, whatever the
	// queue (issue 28): the decode server holds 99.9 % with nothing running
	// and thousands waiting.
	states := map[string]string{}
	if dec.Plan != nil {
		states["status -o json"] = string(dec.Plan.State)
	}
	// The decode server's name on every face: the demo's.
	names := map[string]string{"status -o json": dec.Name}
	// The windows of the rows' hit ratios, as status -o json says them.
	var jsonWindows []string
	for _, s := range rep.Servers {
		if s.Text != nil && s.Role != "router" {
			jsonWindows = append(jsonWindows, s.Text.PrefixHitWindow)
		}
	}

	// 2. status text: the decode pool line.
	code, out, _ = run(t, append([]string{"status"}, targets...)...)
	if code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	if m := regexp.MustCompile(`(?m)^pool +decode +1 server +KV [\d,.]+[kMG]? / [\d,.]+[kMG]? tok \(([\d.]+%)\) +headroom (\d+)×8k .*demand ([\d.]+×) +(leak suspected|\S+)$`).FindStringSubmatch(out); m != nil {
		faces["status"] = facts{m[1], m[3], m[2]}
		states["status pool line"] = m[4]
	} else {
		t.Errorf("status has no decode pool line:\n%s", out)
	}
	if m := regexp.MustCompile(`(?m)^state +decode +(leak suspected|\S+)`).FindStringSubmatch(out); m != nil {
		states["status"] = m[1]
	}
	// The server row: its name, then its address, as the demo names it.
	addr := strings.TrimPrefix(eps["decode"].URL, "http://")
	if m := regexp.MustCompile(`(?m)^decode +(\S+) +(\S+) +sglang +KV .*  (leak suspected|\S+)$`).FindStringSubmatch(out); m != nil {
		names["status"], states["status server row"] = m[1], m[3]
		if m[2] != addr {
			t.Errorf("status shows the decode server's address as %q, want %q", m[2], addr)
		}
	} else {
		t.Errorf("status has no decode server row:\n%s", out)
	}
	// The prefix-hit window, named once under the table.
	if w := textfmt.HitWindows(jsonWindows); !strings.Contains(out, "\n"+w) {
		t.Errorf("status does not name the hit ratio's window %q:\n%s", w, out)
	}
	// The prefill pool's queue waits on decode's pre-allocation.
	if !strings.Contains(out, "limited by prefill (queue: waits on decode's pre-allocation)") {
		t.Errorf("status blames prefill for the bootstrap queue:\n%s", out)
	}
	if !strings.Contains(out, "fleet    2 pools") || !strings.Contains(out, "decode pool is the limit: "+want.usage) {
		t.Errorf("status fleet line does not name the decode pool as the limit:\n%s", out)
	}
	noBlend("status", out)

	// 3. top --once: the decode pool line above the table.
	code, out, errs = run(t, append([]string{"top", "--once", "--no-color", "--width", "160"}, targets...)...)
	if code != 0 {
		t.Fatalf("top --once: exit %d: %s", code, errs)
	}
	head, _, _ := strings.Cut(out, "SERVER")
	if m := regexp.MustCompile(`(?m)^  decode +KV \S+ ([\d.]+%) .*headroom (\d+)×8k .*demand ([\d.]+×)`).FindStringSubmatch(head); m != nil {
		faces["top"] = facts{m[1], m[3], m[2]}
	} else {
		t.Errorf("top has no decode pool line:\n%s", out)
	}
	_, table, _ := strings.Cut(out, "SERVER")
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "decode" {
			states["top"] = regexp.MustCompile(`leak suspected|stuck|full|pressure|ok|idle`).FindString(l)
			names["top"] = f[0]
		}
	}
	// top --once scrapes once, as status did: the same windows.
	if w := textfmt.HitWindows(jsonWindows); !strings.Contains(head, w) {
		t.Errorf("top does not name the hit ratio's window %q:\n%s", w, out)
	}
	if !strings.Contains(head, "limit: decode pool "+want.usage) {
		t.Errorf("top does not name the decode pool as the limit:\n%s", out)
	}
	noBlend("top", out)

	// 4. /metrics: the decode server's series (one server in the pool).
	metrics := map[string]float64{}
	for _, s := range exported(t, base) {
		if s.Name == "kvwatch_server_state" && s.Labels["role"] == "decode" && s.Value == 1 {
			states["/metrics"], names["/metrics"] = s.Labels["state"], s.Labels["server"]
		}
		switch s.Name {
		case "kvwatch_kv_usage_ratio", "kvwatch_kv_demand_ratio", "kvwatch_kv_headroom_requests":
			if s.Labels["server"] == "decode" && (s.Name != "kvwatch_kv_headroom_requests" || s.Labels["request_tokens"] == "8192") {
				metrics[s.Name+"{"] = s.Value
			}
		}
	}
	if len(metrics) != 3 {
		t.Errorf("/metrics: decode series %v, want usage, demand and headroom", metrics)
	} else {
		faces["/metrics"] = facts{pctText(metrics["kvwatch_kv_usage_ratio{"]), timesText(metrics["kvwatch_kv_demand_ratio{"]),
			strconv.Itoa(int(metrics["kvwatch_kv_headroom_requests{"]))}
	}

	// 5. PromQL over the recording rules: the pool level, decode.
	query := func(q string) map[string]float64 {
		t.Helper()
		resp, err := http.Get(base + "api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(now.Unix(), 10)}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  [2]any            `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out := map[string]float64{}
		for _, r := range body.Data.Result {
			v, _ := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
			out[r.Metric["role"]] = v
		}
		return out
	}
	usage := query(`pool:kvwatch_kv_used_per_capacity:ratio`)
	demand := query(`pool:kvwatch_kv_demand_per_capacity:ratio{role="decode"}`)
	hr := query(`pool:kvwatch_kv_headroom_requests:sum{request_tokens="8192"}`)
	if _, ok := usage["decode"]; !ok || len(demand) != 1 || len(hr) != 2 {
		t.Errorf("recording rules: usage %v, demand %v, headroom %v", usage, demand, hr)
	} else {
		faces["PromQL"] = facts{pctText(usage["decode"]), timesText(demand["decode"]), strconv.Itoa(int(hr["decode"]))}
	}
	// Every role apart, none without one: the fleet level keeps roles.
	if f := query(`fleet:kvwatch_kv_used_per_capacity:ratio`); len(f) != 2 || f[""] != 0 {
		t.Errorf("fleet-level usage = %v, want one series per role", f)
	}

	// 6. The web UI, read in Chromium, against serve's report and alerts.
	serveRep := fetchReport(t, base)
	var serveWindows []string
	for _, s := range serveRep.Servers {
		if s.Text != nil && s.Role != "router" {
			serveWindows = append(serveWindows, s.Text.PrefixHitWindow)
		}
	}
	alerts := srv.Rules().Alerts()
	firing := 0
	for _, a := range alerts {
		if a.State == alerting.StateFiring {
			firing++
		}
	}
	wantCounts := textfmt.AlertCounts(firing, len(alerts)-firing)
	// The demo's line says the same counts (it is printed from serve's rules).
	if line := statusLine(d.Report(), srv.Rules()); !strings.HasSuffix(line, " | alerts: "+wantCounts) {
		t.Errorf("the demo's line ends %q, want alerts: %s", line, wantCounts)
	}
	bctx := headless(t, chromium, 1280, 1000, 2*time.Minute)
	type card struct{ Usage, Demand, Headroom, Limit, Fleet, State, Name, Addr, HitNote, Badge, PrefillLimit string }
	if err := chromedp.Do(bctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`[data-pool="decode"]`))); err != nil {
		t.Fatalf("web UI: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[card](`(() => {
			const p = document.querySelector('[data-pool="decode"]');
			const f = (n) => p.querySelector('[data-field="' + n + '"]').textContent.trim();
			const text = (sel) => (document.querySelector(sel) || {textContent: ""}).textContent.trim();
			return {Usage: f("usage"), Demand: f("demand"), Headroom: f("headroom"),
				Limit: document.querySelector('[data-limit]').dataset.limit,
				Fleet: document.querySelector('.fleet').textContent,
				State: (p.querySelector('[data-field="pool-state"]') || {textContent: ""}).textContent.trim(),
				Name: text('tr[data-server="decode"] a'), Addr: text('tr[data-server="decode"] [data-field="addr"]'),
				HitNote: text('[data-field="hit-windows"]'), Badge: document.getElementById("alert-count").textContent,
				PrefillLimit: text('[data-pool="prefill"] [data-field="pool-limit"]')};
		})()`))
	if err != nil {
		t.Fatalf("web UI: %v", err)
	}
	// The card's headroom is written as status writes it: 0×8k.
	if h, ok := strings.CutSuffix(got.Headroom, "×8k"); ok {
		faces["web UI"] = facts{got.Usage, got.Demand, h}
	} else {
		t.Errorf("web UI decode card headroom %q, want N×8k", got.Headroom)
	}
	if got.Limit != "decode" {
		t.Errorf("web UI limit card names %q, want decode", got.Limit)
	}
	states["web UI"], _, _ = strings.Cut(got.State, ":")
	for _, face := range []string{"status -o json", "status", "status pool line", "status server row", "top", "/metrics", "web UI"} {
		want := "leak suspected"
		if face == "status -o json" || face == "/metrics" {
			want = "leak_suspected"
		}
		if states[face] != want {
			t.Errorf("%s names the decode server's state %q, want %q (all: %v)", face, states[face], want, states)
		}
	}
	// One name on every face, and its address where there is room.
	names["web UI"] = got.Name
	for _, face := range []string{"status -o json", "status", "top", "/metrics", "web UI"} {
		if names[face] != "decode" {
			t.Errorf("%s names the decode server %q, want decode, the demo's name (all: %v)", face, names[face], names)
		}
	}
	if got.Addr != addr {
		t.Errorf("web UI shows the decode server's address %q, want %q", got.Addr, addr)
	}
	// The hit ratio's window: the report's, in textfmt's words.
	if w := textfmt.HitWindows(serveWindows); w == "" || got.HitNote != w {
		t.Errorf("web UI names the hit ratio's window %q, want %q (the report's windows %q)", got.HitNote, w, serveWindows)
	}
	// Alert counts: the badge says them as the demo's line does, and the
	// rows and pool cards add up to it with the alerts of neither.
	if got.Badge != wantCounts {
		t.Errorf("web UI alert badge %q, want %q", got.Badge, wantCounts)
	}
	counted, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-field="alert-counts"]')].map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	sumF, sumP := 0, 0
	for _, a := range alerts {
		if a.Labels.Get("server") == "" && a.Labels.Get("role") == "" { // on no row or card
			if a.State == alerting.StateFiring {
				sumF++
			} else {
				sumP++
			}
		}
	}
	for _, c := range counted {
		var f, p int
		if _, err := fmt.Sscanf(c, "%d firing, %d pending", &f, &p); err != nil {
			t.Errorf("alert counts %q: %v", c, err)
		}
		sumF, sumP = sumF+f, sumP+p
	}
	if textfmt.AlertCounts(sumF, sumP) != wantCounts || len(counted) == 0 {
		t.Errorf("the rows' and cards' alert counts %q add up to %d firing, %d pending; the badge says %q", counted, sumF, sumP, wantCounts)
	}
	if want := "limited by prefill (queue: waits on decode's pre-allocation)"; got.PrefillLimit != want {
		t.Errorf("web UI prefill card: %q, want %q", got.PrefillLimit, want)
	}
	noBlend("web UI", got.Fleet)
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		p := artifactsDir(t) + "/web-overload.png"
		if err := os.WriteFile(p, png, 0o644); err == nil {
			t.Logf("screenshot: %s", p)
		}
	}

	// The overview's one chart spans the page, not the left half.
	widths, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](`[document.getElementById("chart-usage").clientWidth, document.getElementById("main").clientWidth]`))
	if err != nil || len(widths) != 2 || widths[0] < 0.8*widths[1] {
		t.Errorf("fleet chart and page widths %v px (%v): want the chart across the page", widths, err)
	}
	// The decode page: demand on a chart of its own (× capacity), never on
	// the 0–100 % usage chart.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/decode"), chromedp.WaitVisible(chromedp.CSS(`#c-demand[data-state]`))); err != nil {
		t.Fatalf("decode page: %v", err)
	}
	usageQ, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("c-usage").dataset.state + " " + document.getElementById("c-demand").dataset.state`))
	if err != nil || usageQ != "drawn drawn" {
		t.Errorf("decode usage and demand charts: %q (%v), want both drawn", usageQ, err)
	}
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(artifactsDir(t)+"/web-overload-decode.png", png, 0o644)
	}
	// The router: its worker health in the overview, and "unavailable"
	// (not "no data") for KV on its page.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-server="router"]`))); err != nil {
		t.Fatalf("overview: %v", err)
	}
	workers, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.querySelector('tr[data-server="router"] [data-field="workers"]') || {}).textContent || ""`))
	if err != nil || workers != "2/2" {
		t.Errorf("router workers in the overview = %q (%v), want 2/2", workers, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/router"), chromedp.WaitVisible(chromedp.CSS(`#c-tokens[data-state]`))); err != nil {
		t.Fatalf("router page: %v", err)
	}
	kvText, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("c-tokens").textContent`))
	if err != nil || !strings.Contains(kvText, "unavailable: a router holds no KV cache") {
		t.Errorf("router KV chart says %q (%v), want unavailable", kvText, err)
	}
	// Alerts: each with its description and runbook, its value in its
	// rule's unit (value_unit), worked out here apart from the UI: ratios
	// as status writes a percentage, seconds as a duration, requests as a
	// count; the raw value in the title.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/alerts"), chromedp.WaitVisible(chromedp.CSS(`#alerts`))); err != nil {
		t.Fatalf("alerts page: %v", err)
	}
	type alertRow struct{ Name, Text, Title, Unit, Description, Runbook string }
	readAlerts := func(table string) []alertRow {
		t.Helper()
		rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]alertRow](`[...document.querySelectorAll('#`+table+` tbody tr')].map(tr => {
			const v = tr.querySelector('[data-field="alert-value"]'), d = tr.querySelector('[data-field="alert-description"]'), r = tr.querySelector('[data-field="runbook"]');
			return {Name: tr.dataset.alert, Text: v.textContent, Title: v.title, Unit: v.dataset.unit, Description: d ? d.textContent : "", Runbook: r ? r.href : ""};
		})`))
		if err != nil {
			t.Fatalf("read #%s: %v", table, err)
		}
		return rows
	}
	rows := readAlerts("alerts")
	if len(rows) != len(alerts) {
		t.Errorf("the alerts page lists %d alerts, the rules hold %d", len(rows), len(alerts))
	}
	units := map[string]string{}
	for _, a := range alerts {
		units[a.Labels.Get("alertname")] = a.Annotations.Get("value_unit")
	}
	checkAlert := func(page string, r alertRow) {
		t.Helper()
		raw, err := strconv.ParseFloat(r.Title, 64)
		if err != nil {
			t.Errorf("%s: alert %s value title %q: %v", page, r.Name, r.Title, err)
			return
		}
		var want string
		switch r.Unit {
		case "ratio":
			want = pctText(raw)
		case "seconds":
			want = textfmt.Duration(raw)
		case "requests":
			want = kmg(raw) + " requests"
		default:
			t.Errorf("%s: alert %s has unit %q: every alert of this overload has one", page, r.Name, r.Unit)
		}
		if r.Text != want || r.Unit != units[r.Name] {
			t.Errorf("%s: alert %s value %q (unit %q) shown as %q, want %q (unit %q)", page, r.Name, r.Title, r.Unit, r.Text, want, units[r.Name])
		}
		if r.Description == "" || !strings.HasPrefix(r.Runbook, stack.DefaultRunbookURL+"#") {
			t.Errorf("%s: alert %s shows description %q and runbook %q", page, r.Name, r.Description, r.Runbook)
		}
	}
	for _, r := range rows {
		checkAlert("alerts page", r)
		// KVPoolFullSoon: its value is the pool's time to full, 0 while its
		// queue needs more than is free.
		if r.Name == stack.AlertPoolFullSoon && r.Text != "0s" {
			t.Errorf("KVPoolFullSoon of a pool full by its queue shows %q, want 0s", r.Text)
		}
	}
	t.Logf("alerts: %+v", rows)
	// The decode page lists the decode server's alerts alike.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/server/decode"), chromedp.WaitVisible(chromedp.CSS(`#server-alerts`))); err != nil {
		t.Fatalf("decode page alerts: %v", err)
	}
	serverRows := readAlerts("server-alerts")
	decodeAlerts := 0
	for _, a := range alerts {
		if a.Labels.Get("server") == "decode" {
			decodeAlerts++
		}
	}
	if len(serverRows) != decodeAlerts || decodeAlerts == 0 {
		t.Errorf("the decode page lists %d alerts, the rules hold %d for decode", len(serverRows), decodeAlerts)
	}
	for _, r := range serverRows {
		checkAlert("decode page", r)
	}
	// The planner's time to full, in textfmt's words for what the
	// recording rules say: the decode pool is full by its queue (its KV has
	// room, its demand is beyond it).
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"#/planner"), chromedp.WaitVisible(chromedp.CSS(`#plan-pools tr[data-pool="decode"] [data-field="full"]`))); err != nil {
		t.Fatalf("planner: %v", err)
	}
	full, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#plan-pools tr[data-pool="decode"] [data-field="full"]`)))
	if err != nil {
		t.Fatal(err)
	}
	ttf := query(`pool:kvwatch_kv_seconds_to_full:deriv15m{role="decode"}`)
	sp := serveRep.Pools[1]
	f := &kv.FillForecast{TimeToFullState: kv.FillFull, TimeToFullSeconds: kv.DerivedOf(0),
		FullByQueue: sp.Demand.V > 0 && sp.Capacity.V-sp.Used.V > 0}
	if v, ok := ttf["decode"]; !ok || v != 0 || sp.Name != "decode" {
		t.Errorf("the decode pool's time to full is %v (%v) in the recording rules, pool %s: want 0, full by its queue", v, ok, sp.Name)
	} else if want := textfmt.TimeToFull(f, kv.TrendMinTop); full != want || want != "full now (queue)" {
		t.Errorf("the planner says the decode pool is %q, want %q as status --trend and top say it", full, want)
	}

	for _, face := range []string{"status", "top", "/metrics", "PromQL", "web UI"} {
		if f, ok := faces[face]; ok && f != want {
			t.Errorf("%s shows decode pool %+v, status -o json %+v", face, f, want)
		}
	}
}
