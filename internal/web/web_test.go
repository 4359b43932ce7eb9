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
	var c report.Capacity
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
