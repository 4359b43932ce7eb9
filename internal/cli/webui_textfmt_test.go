package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/textfmt"
	"github.com/kvwatch/kvwatch/internal/web"
)

// TestWebUIFormatsAsTextfmt: the web UI's script writes what it formats
// itself as textfmt writes it for status and top. Durations and times to
// full against textfmt's shared cases (internal/textfmt/testdata/
// shared.json, worked out by hand); counts, rates, limiters, hit windows
// and alert counts against textfmt's own output, over inputs that reach
// each of their forms.
func TestWebUIFormatsAsTextfmt(t *testing.T) {
	chromium := chromiumForUI(t)
	b, err := os.ReadFile(filepath.Join("..", "textfmt", "testdata", "shared.json"))
	if err != nil {
		t.Fatal(err)
	}
	var shared struct {
		Duration []struct {
			Seconds float64 `json:"seconds"`
			Text    string  `json:"text"`
		} `json:"duration"`
		TimeToFull []struct {
			State       string  `json:"state"`
			Seconds     float64 `json:"seconds"`
			FullByQueue bool    `json:"full_by_queue"`
			Text        string  `json:"text"`
		} `json:"time_to_full"`
	}
	if err := json.Unmarshal(b, &shared); err != nil || len(shared.Duration) == 0 || len(shared.TimeToFull) == 0 {
		t.Fatalf("shared cases: %v", err)
	}

	// The UI's page and script, and an empty report: the functions are
	// what is tested, not a page.
	mux := http.NewServeMux()
	empty := func() report.Report { return report.Report{Schema: report.SchemaVersion, Time: time.Now()} }
	web.Register(mux, web.Options{Report: empty})
	mux.HandleFunc(serve.PathReport, func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(empty()) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	bctx := headless(t, chromium, 800, 600, time.Minute)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitReady(`body[data-rendered]`)); err != nil {
		t.Fatalf("web UI: %v", err)
	}
	// js evaluates the script's f over args (JSON) and returns its text.
	js := func(f string, args ...any) string {
		t.Helper()
		a, _ := json.Marshal(args)
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf("%s(...%s)", f, a)))
		if err != nil {
			t.Fatalf("%s%s: %v", f, a, err)
		}
		return got
	}
	for _, c := range shared.Duration {
		if got := js("fmtSpan", c.Seconds); got != c.Text {
			t.Errorf("fmtSpan(%v) = %q, want %q as textfmt.Duration", c.Seconds, got, c.Text)
		}
	}
	for _, c := range shared.TimeToFull {
		if got := js("fmtTimeToFull", c.State, c.Seconds, c.FullByQueue); got != c.Text {
			t.Errorf("fmtTimeToFull(%s, %v, %v) = %q, want %q as textfmt.TimeToFull", c.State, c.Seconds, c.FullByQueue, got, c.Text)
		}
	}
	for _, x := range []float64{0, 7, 9999, 9999.4, 9999.5, 10000, 12034, 99949, 99950, 310000, 999499, 999500, 2581504, 25.8e9, 1e12, 1.234e13, -4011, -25800} {
		if got, want := js("fmtCount", x), textfmt.Count(kv.Of(x)); got != want {
			t.Errorf("fmtCount(%v) = %q, textfmt.Count %q", x, got, want)
		}
	}
	for _, x := range []float64{0, 0.25, 9.994, 9.995, 42, 11500} {
		if got, want := js("fmtRate", x), textfmt.Rate(kv.Of(x)); got != want {
			t.Errorf("fmtRate(%v) = %q, textfmt.Rate %q", x, got, want)
		}
	}
	for _, ls := range [][]kv.Limiter{nil, {{Server: "decode-1", Factor: kv.FactorKV}},
		{{Server: "decode-0", Factor: kv.FactorQueue}, {Server: "prefill", Factor: kv.FactorQueue, WaitsOn: kv.WaitsOnDecodePrealloc}}} {
		if got, want := js("limitersText", ls), textfmt.Limiters(ls); got != want {
			t.Errorf("limitersText(%+v) = %q, textfmt.Limiters %q", ls, got, want)
		}
	}
	for _, ws := range [][]string{{}, {"", ""}, {"over the last 5s", "over the last 5s"}, {textfmt.SinceStart, ""},
		{"over the last 5s", textfmt.SinceStart, "over the last 4s"}} {
		if got, want := js("hitWindows", ws), textfmt.HitWindows(ws); got != want {
			t.Errorf("hitWindows(%q) = %q, textfmt.HitWindows %q", ws, got, want)
		}
	}
	for _, c := range [][2]int{{0, 0}, {2, 3}, {0, 4}, {12000, 1}} {
		alerts := []map[string]string{}
		for i := range c[0] + c[1] {
			st := "pending"
			if i < c[0] {
				st = "firing"
			}
			alerts = append(alerts, map[string]string{"state": st})
		}
		if got, want := js("alertCounts", alerts), textfmt.AlertCounts(c[0], c[1]); got != want {
			t.Errorf("alertCounts(%d firing, %d pending) = %q, textfmt.AlertCounts %q", c[0], c[1], got, want)
		}
	}
}
