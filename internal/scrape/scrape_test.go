package scrape

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
)

const sglangPage = `# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{engine_type="decode",model_name="m",tp_rank="0"} 100000.0
# HELP sglang:kv_used_tokens Number of actively used token slots in the KV cache pool.
# TYPE sglang:kv_used_tokens gauge
sglang:kv_used_tokens{engine_type="decode",model_name="m",tp_rank="0"} 25000.0
`

func target(t *testing.T, ct config.Target) *Target {
	t.Helper()
	if ct.ScrapeTimeout == 0 {
		ct.ScrapeTimeout = model.Duration(2 * time.Second)
	}
	tg, err := NewTarget(&ct)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func scrapeOne(t *testing.T, ct config.Target) Result {
	t.Helper()
	return New(engine.NewRegistry(), 1<<20).Scrape(context.Background(), target(t, ct))
}

func TestScrapeGzipAndHeaders(t *testing.T) {
	var accept, encoding string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept, encoding = r.Header.Get("Accept"), r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		fmt.Fprint(gz, sglangPage)
		gz.Close()
	}))
	defer srv.Close()
	// By default kvwatch asks for no compression, but reads a gzip body
	// that a server sends anyway.
	res := scrapeOne(t, config.Target{URL: srv.URL})
	if !res.OK() {
		t.Fatalf("scrape failed: %v", res.Err)
	}
	if encoding != "identity" {
		t.Errorf("Accept-Encoding = %q, want identity by default", encoding)
	}
	on := true
	res = scrapeOne(t, config.Target{URL: srv.URL, EnableCompression: &on})
	if !res.OK() {
		t.Fatalf("scrape failed: %v", res.Err)
	}
	if accept != acceptHeader { // Prometheus 3's: TestAcceptHeaderIsPrometheus3s
		t.Errorf("Accept = %q, want %q", accept, acceptHeader)
	}
	if encoding != "gzip" {
		t.Errorf("Accept-Encoding = %q with enable_compression: true", encoding)
	}
	if res.Server.Used.V != 25000 || res.Server.Capacity.V != 100000 || res.Server.Role != "decode" {
		t.Errorf("server = %+v", res.Server)
	}
	if res.BodyBytes != int64(len(sglangPage)) {
		t.Errorf("body bytes = %d, want decompressed size %d", res.BodyBytes, len(sglangPage))
	}
}

func TestScrapeOpenMetrics(t *testing.T) {
	page := strings.Replace(sglangPage, "# HELP sglang:kv_used", "# HELP sglang:kv_used", 1) + "# EOF\n"
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"complete", page, ""},
		{"cut short", sglangPage, "ends without '# EOF'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			res := scrapeOne(t, config.Target{URL: srv.URL})
			if tc.wantErr == "" {
				if !res.OK() || res.Server.Used.V != 25000 {
					t.Errorf("got %+v, %v", res.Server, res.Err)
				}
				return
			}
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) || res.Reason != "parse" {
				t.Errorf("err = %v (reason %s), want %q", res.Err, res.Reason, tc.wantErr)
			}
		})
	}
}

func TestScrapeRoleOverride(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, sglangPage) }))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL, Role: "prefill"})
	if res.Server.Role != "prefill" {
		t.Errorf("role = %q, want the configured prefill", res.Server.Role)
	}
}

func TestScrapeBearerAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	passFile := filepath.Join(dir, "pass")
	os.WriteFile(passFile, []byte("hunter2"), 0o600)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if r.Header.Get("Authorization") == "Bearer s3cret" || (ok && u == "ops" && p == "hunter2") {
			fmt.Fprint(w, sglangPage)
			return
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		yaml string
		ok   bool
	}{
		{"bearer", "bearer_token_file: " + tokenFile, true},
		{"basic", "basic_auth: {username: ops, password_file: " + passFile + "}", true},
		{"none", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - url: %s\n    %s\n", srv.URL, tc.yaml)), "t.yml")
			if err != nil {
				t.Fatal(err)
			}
			res := scrapeOne(t, c.Targets[0])
			if res.OK() != tc.ok {
				t.Fatalf("ok = %v (%v), want %v", res.OK(), res.Err, tc.ok)
			}
			if !tc.ok && (res.Reason != "auth" || !strings.Contains(res.Err.Error(), "401 Unauthorized: the server wants credentials and the target sends none")) {
				t.Errorf("err = %v", res.Err)
			}
			if res.Err != nil && strings.Contains(res.Err.Error(), "hunter2") {
				t.Errorf("secret in error: %v", res.Err)
			}
		})
	}
}

func TestScrapeTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, sglangPage) }))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	var ca bytes.Buffer
	pem.Encode(&ca, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	os.WriteFile(caFile, ca.Bytes(), 0o600)

	res := scrapeOne(t, config.Target{URL: srv.URL})
	if res.OK() || !strings.Contains(res.Err.Error(), "certificate") {
		t.Errorf("unknown CA must fail, got %v", res.Err)
	}
	c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - url: %s\n    tls_config: {ca_file: %s}\n", srv.URL, caFile)), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	res = scrapeOne(t, c.Targets[0])
	if !res.OK() {
		t.Errorf("with ca_file: %v", res.Err)
	}
}

// TestScrapeTRTLLMServeFallback: trtllm-serve answers /metrics with JSON
// and serves Prometheus metrics at /prometheus/metrics.
func TestScrapeTRTLLMServeFallback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `[{"gpuMemUsage": 1, "iter": 3}]`)
		case "/prometheus/metrics":
			fmt.Fprint(w, sglangPage)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL})
	if !res.OK() || res.URL != srv.URL+"/prometheus/metrics" {
		t.Fatalf("fallback failed: %v", res.Err)
	}
	res = scrapeOne(t, config.Target{URL: srv.URL + "/metrics"})
	if res.OK() || res.Reason != "not_metrics" || !strings.Contains(res.Err.Error(), "the body is JSON") {
		t.Errorf("an explicit /metrics path is not retried: %v", res.Err)
	}
}

func TestScrapeAllKeepsOrderAndIsolatesSlowTargets(t *testing.T) {
	var hits atomic.Int32
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, sglangPage)
	}))
	defer fast.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	var targets []*Target
	for i := 0; i < 20; i++ {
		u := fast.URL
		if i%5 == 0 {
			u = slow.URL
		}
		targets = append(targets, target(t, config.Target{Name: fmt.Sprint(i), URL: u, ScrapeTimeout: model.Duration(300 * time.Millisecond)}))
	}
	res := New(engine.NewRegistry(), 1<<20).ScrapeAll(context.Background(), targets, 4)
	for i, r := range res {
		if r.Target.Name != fmt.Sprint(i) {
			t.Fatalf("result %d is for target %s", i, r.Target.Name)
		}
		if wantOK := i%5 != 0; r.OK() != wantOK {
			t.Errorf("target %d ok = %v (%v)", i, r.OK(), r.Err)
		}
		if i%5 == 0 && r.Reason != "timeout" {
			t.Errorf("slow target reason = %q", r.Reason)
		}
	}
	if hits.Load() != 16 {
		t.Errorf("fast targets scraped %d times, want 16", hits.Load())
	}
}

func TestSharedClients(t *testing.T) {
	c, err := config.Parse([]byte("targets:\n  - url: http://a:1\n  - url: http://b:2\n  - url: http://c:3\n    bearer_token: x\n"), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Targets(c)
	if err != nil {
		t.Fatal(err)
	}
	if ts[0].client != ts[1].client || ts[0].client == ts[2].client {
		t.Errorf("targets with equal HTTP settings share a client; others do not")
	}
}

// global.enable_compression applies to every target that does not set its
// own enable_compression.
func TestCompressionInherited(t *testing.T) {
	off := false
	cfg := &config.Config{Global: config.Global{EnableCompression: true},
		Targets: []config.Target{{URL: "http://127.0.0.1:1"}, {URL: "http://127.0.0.1:2", EnableCompression: &off}}}
	ts, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !ts[0].Compression || ts[1].Compression {
		t.Errorf("compression = %v, %v; want true (global), false (target)", ts[0].Compression, ts[1].Compression)
	}
	cfg.Global.EnableCompression = false
	if ts, _ = Targets(cfg); ts[0].Compression {
		t.Error("compression on without enable_compression")
	}
}

// A target scraped again and again reads its page through the layout of
// the one before; every result is what a fresh target (no layout) gets
// from the same page, through pages of changed values and structure,
// cut bodies and the trtllm-serve fallback.
func TestScrapeThroughLayout(t *testing.T) {
	var page, alt atomic.Pointer[string]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprint(w, *page.Load())
		case "/prometheus/metrics":
			fmt.Fprint(w, *alt.Load())
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	values := func(used string) string {
		return strings.Replace(sglangPage, "25000.0", used, 1) + "# HELP sglang:x_seconds Histogram.\n# TYPE sglang:x_seconds histogram\n" +
			`sglang:x_seconds_bucket{le="1",model_name="m"} ` + used + "\nsglang:x_seconds_count{model_name=\"m\"} 3\n"
	}
	jsonPage := `[{"gpuMemUsage": 1, "iter": 3}]`
	pages := []struct{ page, alt string }{
		{values("25000.0"), ""},
		{values("26000.0"), ""},
		{values("27000.0"), ""},
		{strings.Replace(values("27000.0"), `tp_rank="0"} 27000.0`, `tp_rank="0"} 27000.0`+"\nsglang:kv_used_tokens{engine_type=\"decode\",model_name=\"m\",tp_rank=\"1\"} 5.0", 1), ""},
		{values("28000.0")[:len(values("28000.0"))-30], ""},
		{values("29000.0") + "garbage!\n", ""},
		{values("30000.0"), ""},
		{"", ""},
		{values("31000.0"), ""},
		{jsonPage, values("1000.0")},
		{jsonPage, values("2000.0")},
		{jsonPage, values("3000.0")},
		{values("32000.0"), ""},
	}
	s := New(engine.NewRegistry(), 1<<20)
	tg := target(t, config.Target{URL: srv.URL})
	result := func(res Result) string {
		b, err := json.Marshal(res.Server)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("url=%s bytes=%d reason=%s err=%v server=%s", res.URL, res.BodyBytes, res.Reason, res.Err, b)
	}
	for i, p := range pages {
		page.Store(&p.page)
		alt.Store(&p.alt)
		got := s.Scrape(context.Background(), tg)
		want := s.Scrape(context.Background(), target(t, config.Target{URL: srv.URL}))
		if diff := cmp.Diff(result(want), result(got)); diff != "" {
			t.Errorf("page %d: the target with a layout differs from a fresh one (-fresh +layout):\n%s", i, diff)
		}
		if tg.layout.Load() == nil {
			t.Errorf("page %d: the target has no layout after its scrape", i)
		}
	}
}

// Scrapes of one target at once (serve, /probe, status) each read with a
// layout of their own or the target's.
func TestScrapeLayoutConcurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, sglangPage)
	}))
	defer srv.Close()
	s := New(engine.NewRegistry(), 1<<20)
	tg := target(t, config.Target{URL: srv.URL})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if res := s.Scrape(context.Background(), tg); !res.OK() || res.Server.Used.V != 25000 {
					t.Errorf("scrape: %v, %+v", res.Err, res.Server)
					return
				}
			}
		})
	}
	wg.Wait()
}
