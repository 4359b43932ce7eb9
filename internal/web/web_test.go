package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

func TestAssetsInstalled(t *testing.T) {
	if err := CheckAssets(); err != nil {
		t.Fatalf("%v", err)
	}
}

// twoRanks is a decode server with two DP ranks: rank 0 has 8,000 tokens
// free, rank 1 has 1,000; 40,000 context length.
func twoRanks() *kv.Server {
	s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, ContextLength: kv.Of(40000)}
	s.Ranks = []kv.Rank{
		{RankID: kv.RankID{DP: "0"}, Signals: kv.Signals{Capacity: kv.Of(10000), Used: kv.Of(2000)}},
		{RankID: kv.RankID{DP: "1"}, Signals: kv.Signals{Capacity: kv.Of(10000), Used: kv.Of(9000)}},
	}
	s.Rollup()
	return s
}

func testReport() report.Report {
	return report.Report{Servers: []report.Server{
		{Name: "d1", Role: kv.RoleDecode, OK: true, Server: twoRanks()},
		{Name: "d2", Role: kv.RoleDecode, OK: false, Error: "connection refused"},
		{Name: "p1", Role: kv.RolePrefill, OK: true, Server: &kv.Server{Role: kv.RolePrefill,
			Signals: kv.Signals{Capacity: kv.Of(50000), Used: kv.Of(5000)}}},
		{Name: "r", Role: kv.RoleRouter, OK: true, Server: &kv.Server{Role: kv.RoleRouter}},
	}}
}

func TestPlan(t *testing.T) {
	c := Plan(testReport(), 3000)
	got := map[string]kv.Value{}
	for _, s := range c.Servers {
		got[s.Name] = s.Requests
	}
	// d1: floor(8000/3000) + floor(1000/3000) = 2 + 0 (a request cannot
	// span DP ranks, so not floor(9000/3000) = 3); d2 failed: unknown;
	// p1: floor(45000/3000) = 15; the router holds no KV.
	want := map[string]kv.Value{"d1": kv.DerivedOf(2), "d2": {}, "p1": kv.DerivedOf(15)}
	if len(got) != len(want) {
		t.Fatalf("Plan servers = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Plan(3000)[%s] = %+v, want %+v", k, got[k], w)
		}
	}
	roles := map[kv.Role]kv.Value{}
	for _, r := range c.Roles {
		roles[r.Role] = r.Requests
	}
	// decode: one server unknown makes the sum unknown, never a partial count.
	if roles[kv.RoleDecode].OK() || roles[kv.RolePrefill] != kv.DerivedOf(15) {
		t.Errorf("Plan roles = %+v, want decode unavailable, prefill 15", roles)
	}
	// Over the context length nothing fits.
	c = Plan(testReport(), 50000)
	if s := c.Servers[0]; s.Requests != kv.DerivedOf(0) || s.FitsContext == nil || *s.FitsContext {
		t.Errorf("Plan(50000)[d1] = %+v, want 0 requests, fits_context false", s)
	}
}

func TestHandlers(t *testing.T) {
	if err := CheckAssets(); err != nil {
		t.Fatalf("%v", err)
	}
	mux := http.NewServeMux()
	Register(mux, Options{Report: testReport, Warning: 0.9, Critical: 0.97})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, string) {
		r, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "static/app.js") {
		t.Errorf("GET / = %d %.80s", code, body)
	}
	if code, body := get("/static/vendor/uPlot.iife.min.js"); code != 200 || !strings.Contains(body, "uPlot") {
		t.Errorf("GET uPlot = %d %.80s", code, body)
	}
	if code, body := get(PathCapacity + "?tokens=x"); code != 400 || !strings.Contains(body, "positive integer") {
		t.Errorf("capacity?tokens=x = %d %s", code, body)
	}
	code, body := get(PathCapacity + "?tokens=3000")
	var c Capacity
	if code != 200 || json.Unmarshal([]byte(body), &c) != nil || len(c.Servers) != 3 {
		t.Errorf("capacity?tokens=3000 = %d %s", code, body)
	}
	if !strings.Contains(body, `"name":"d2","role":"decode","requests":{"value":null,"provenance":"unavailable"}`) {
		t.Errorf("capacity: a failed server must be unavailable, not 0: %s", body)
	}
	// Unset intervals get history's defaults and a safe scrape interval:
	// the UI sizes rate() ranges from them.
	code, body = get(PathSettings)
	for _, want := range []string{`"kv_usage_warning":0.9`, `"scrape_interval_seconds":15`,
		`"history_full_resolution_seconds":3600`, `"history_downsample_step_seconds":60`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("settings = %d %s, want %s in it", code, body, want)
		}
	}
}
