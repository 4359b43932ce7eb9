package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// Every class of path under /static/ answers a file, 404 or a redirect,
// never 500: the request line is written by hand, so that encoded and
// invalid paths reach the server as they are.
func TestStaticPaths(t *testing.T) {
	if err := CheckAssets(); err != nil {
		t.Fatalf("%v", err)
	}
	mux := http.NewServeMux()
	Register(mux, Options{Report: testReport})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		code         int
		// typ is the Content-Type of a 200, location that of a redirect.
		typ, location string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", ""},
		{"GET", "/static/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"HEAD", "/static/app.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/static/app.css", 200, "text/css; charset=utf-8", ""},
		{"GET", "/static/index.html", 200, "text/html; charset=utf-8", ""},
		{"GET", "/static/vendor/uPlot.iife.min.js", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/static/vendor/uPlot.min.css", 200, "text/css; charset=utf-8", ""},
		// an encoded slash is a slash of the same file's path
		{"GET", "/static/vendor%2fuPlot.min.css", 200, "text/css; charset=utf-8", ""},
		{"POST", "/static/app.js", 405, "", ""},
		// missing files
		{"GET", "/index.html", 404, "", ""},
		{"GET", "/static/missing.js", 404, "", ""},
		{"GET", "/static/app.js/x", 404, "", ""},
		// directories: no listing, no index
		{"GET", "/static", 307, "", "/static/"},
		{"GET", "/static/", 404, "", ""},
		{"GET", "/static/vendor", 404, "", ""},
		{"GET", "/static/vendor/", 404, "", ""},
		{"GET", "/static/%2e", 404, "", ""},
		// a trailing slash or an empty element
		{"GET", "/static/app.js/", 404, "", ""},
		{"GET", "/static/%2fapp.js", 404, "", ""},
		{"GET", "/static/vendor%2f%2fuPlot.min.css", 404, "", ""},
		// "..", plain (the mux cleans it) and encoded (never resolved)
		{"GET", "/static/../web.go", 307, "", "/web.go"},
		{"GET", "/static/%2e%2e/web.go", 404, "", ""},
		{"GET", "/static/%2e%2e%2fweb.go", 404, "", ""},
		{"GET", "/static/vendor/%2e%2e/app.js", 404, "", ""},
		{"GET", "/static/vendor/..%2fapp.js", 404, "", ""},
		// invalid UTF-8 and control characters (a 500 before)
		{"GET", "/static/%ff", 404, "", ""},
		{"GET", "/static/%c0%ae%c0%ae/", 404, "", ""},
		{"GET", "/static/vendor/%ffuPlot.min.css", 404, "", ""},
		{"GET", "/static/a%00b", 404, "", ""},
		{"GET", "/static/a\\b", 404, "", ""},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: kvwatch\r\nConnection: close\r\n\r\n", c.method, c.path)
			req := &http.Request{Method: c.method}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.code {
				t.Errorf("%s %s = %d %.100s, want %d", c.method, c.path, resp.StatusCode, body, c.code)
			}
			if got := resp.Header.Get("Content-Type"); c.typ != "" && got != c.typ {
				t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, got, c.typ)
			}
			if got := resp.Header.Get("Location"); got != c.location {
				t.Errorf("%s %s: Location %q, want %q", c.method, c.path, got, c.location)
			}
			if c.code == 200 && c.method == "GET" && len(body) < 100 {
				t.Errorf("%s %s: %d bytes, want the file", c.method, c.path, len(body))
			}
		})
	}
}
