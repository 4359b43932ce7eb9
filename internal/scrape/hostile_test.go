package scrape

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
)

func intp(n int) *int { return &n }

// rankPage is an SGLang page with n dp_rank values.
func rankPage(n int) string {
	var b strings.Builder
	b.WriteString("# TYPE sglang:max_total_num_tokens gauge\n# TYPE sglang:kv_used_tokens gauge\n")
	for i := range n {
		fmt.Fprintf(&b, "sglang:max_total_num_tokens{dp_rank=\"%d\",engine_type=\"decode\",model_name=\"m\",tp_rank=\"0\"} 1000\n", i)
		fmt.Fprintf(&b, "sglang:kv_used_tokens{dp_rank=\"%d\",engine_type=\"decode\",model_name=\"m\",tp_rank=\"0\"} 10\n", i)
	}
	return b.String()
}

func serveText(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Over each limit the scrape fails with reason "limit", a message naming
// the limit and its key, and no server; under it, it succeeds.
func TestScrapeLimits(t *testing.T) {
	manyLabels := `# TYPE sglang:kv_used_tokens gauge
sglang:kv_used_tokens{a="1",b="2",c="3",d="4",engine_type="decode",tp_rank="0"} 1
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{tp_rank="0"} 10
`
	longName := strings.Replace(manyLabels, `a="1"`, strings.Repeat("n", 40)+`="1"`, 1)
	hugeModel := strings.ReplaceAll(sglangPage, `model_name="m"`, `model_name="`+strings.Repeat("m", 1<<20)+`"`)
	for _, c := range []struct {
		name   string
		body   string
		limits config.Limits
		want   string // "" when the scrape succeeds
	}{
		{"samples over", rankPage(50), config.Limits{SampleLimit: intp(99)}, "more than sample_limit 99 samples"},
		{"samples at", rankPage(50), config.Limits{SampleLimit: intp(100)}, ""},
		{"samples off", rankPage(50), config.Limits{SampleLimit: intp(0), RankLimit: intp(0)}, ""},
		{"labels over", manyLabels, config.Limits{LabelLimit: intp(5)}, "has 6 labels, over label_limit 5"},
		{"labels at", manyLabels, config.Limits{LabelLimit: intp(6)}, ""},
		{"label name over", longName, config.Limits{LabelNameLengthLimit: intp(39)}, "label name of 40 bytes, over label_name_length_limit 39"},
		{"label name at", longName, config.Limits{LabelNameLengthLimit: intp(40)}, ""},
		{"1 MiB model label by default", hugeModel, config.Limits{}, "model_name label value of 1048576 bytes, over label_value_length_limit 2048"},
		{"ranks over", rankPage(9), config.Limits{RankLimit: intp(8)}, "9 ranks exceed rank_limit 8"},
		{"ranks at", rankPage(8), config.Limits{RankLimit: intp(8)}, ""},
		{"30,000 dp ranks by default", rankPage(30000), config.Limits{}, "more than sample_limit 20000 samples"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := New(nil2reg(), 64<<20).Scrape(t.Context(), target(t, config.Target{URL: serveText(t, c.body), Limits: c.limits,
				ScrapeTimeout: model.Duration(20 * time.Second)}))
			if c.want == "" {
				if !res.OK() {
					t.Fatalf("scrape failed: %v", res.Err)
				}
				return
			}
			if res.OK() || res.Server != nil {
				t.Fatalf("scrape over the limit succeeded (server %v)", res.Server != nil)
			}
			if res.Reason != signal.ReasonLimit || !strings.Contains(res.Err.Error(), c.want) || !strings.Contains(res.Err.Error(), "nothing of this page is kept") {
				t.Errorf("reason %s, err %v; want limit and %q", res.Reason, res.Err, c.want)
			}
			if len(res.Err.Error()) > 600 {
				t.Errorf("the error is %d bytes long: it must not carry the page", len(res.Err.Error()))
			}
		})
	}
}

// Targets built from a config take the global limits.
func TestTargetsTakeGlobalLimits(t *testing.T) {
	cfg, err := config.Parse([]byte("global:\n  rank_limit: 3\ntargets:\n  - url: "+serveText(t, rankPage(4))+"\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := New(nil2reg(), 0).Scrape(t.Context(), ts[0])
	if res.Reason != signal.ReasonLimit || !strings.Contains(res.Err.Error(), "4 ranks exceed rank_limit 3") {
		t.Errorf("reason %s, err %v", res.Reason, res.Err)
	}
}

// The defaults leave real TP=8 and DP=8 pages alone with room to spare:
// the simulator's SGLang (TP=8, and DP=8 x TP=8 with DP attention) and
// vLLM (DP=8, TP=8) pages, with every histogram and per-rank family the
// engines export, use at most an eighth of each limit.
func TestDefaultLimitsFitRealPages(t *testing.T) {
	sc, err := sim.ParseScenario("limits", []byte(`
model_name: deepseek-ai/DeepSeek-V3-0324-with-a-long-served-model-name
servers:
  - {name: sglang-tp8, engine: sglang, tp: 8}
  - {name: sglang-dp8-tp8, engine: sglang, dp: 8, tp: 8}
  - {name: vllm-dp8, engine: vllm, dp: 8, tp: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sim.NewCluster(sc, sim.Options{Seed: 1, ManualClock: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Advance(time.Minute)
	d := config.DefaultLimits()
	reg := nil2reg()
	for _, ep := range cl.Endpoints() {
		res := New(reg, 0).Scrape(t.Context(), target(t, config.Target{Name: ep.Name, URL: ep.URL + ep.MetricsPath}))
		if !res.OK() {
			t.Fatalf("%s: %v", ep.Name, res.Err)
		}
		// Measure the page as checkPage sees it.
		resp, err := http.Get(ep.URL + ep.MetricsPath)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		resp.Body.Close()
		page, err := expo.Parse(body.Bytes(), resp.Header.Get("Content-Type"), reg.Want)
		if err != nil {
			t.Fatal(err)
		}
		var samples, maxLabels, maxName, maxValue int
		for _, n := range page.Names() {
			for _, smp := range page.Samples(n) {
				samples++
				maxLabels = max(maxLabels, smp.Labels.Len()-1)
				smp.Labels.Range(func(l labels.Label) {
					maxName, maxValue = max(maxName, len(l.Name)), max(maxValue, len(l.Value))
				})
			}
		}
		ranks := len(res.Server.Ranks)
		t.Logf("%s: %d samples, %d labels, names %d B, values %d B, %d ranks", ep.Name, samples, maxLabels, maxName, maxValue, ranks)
		for _, c := range []struct {
			what       string
			got, limit int
		}{{"samples", samples, d.Samples}, {"labels", maxLabels, d.Labels}, {"label name bytes", maxName, d.LabelNameLength},
			{"label value bytes", maxValue, d.LabelValueLength}, {"ranks", ranks, d.Ranks}} {
			if c.got*8 > c.limit {
				t.Errorf("%s: %d %s, more than an eighth of the default limit %d", ep.Name, c.got, c.what, c.limit)
			}
		}
	}
}

func TestScrapeRedirectReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			http.Redirect(w, r, "/real/metrics?token=tk9", http.StatusFound)
			return
		}
		fmt.Fprint(w, sglangPage)
	}))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL})
	if res.Reason != signal.ReasonRedirect {
		t.Fatalf("reason %s (%v), want redirect", res.Reason, res.Err)
	}
	for _, w := range []string{"302 Found", "redirected to " + srv.URL + "/real/metrics?token=xxxxx", "follow_redirects: true"} {
		if !strings.Contains(res.Err.Error(), w) {
			t.Errorf("err %v lacks %q", res.Err, w)
		}
	}
	ct := config.Target{URL: srv.URL}
	ct.HTTPClientConfig.FollowRedirects = true
	if res := scrapeOne(t, ct); !res.OK() {
		t.Errorf("with follow_redirects: true: %v", res.Err)
	}
}

func TestScrapeBadGzip(t *testing.T) {
	var gzBody bytes.Buffer
	gz := gzip.NewWriter(&gzBody)
	fmt.Fprint(gz, sglangPage)
	gz.Close()
	corrupt := append([]byte(nil), gzBody.Bytes()...)
	corrupt[len(corrupt)-6] ^= 0xff // the CRC of the data
	for _, body := range [][]byte{corrupt, []byte("not gzip at all")} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(body)
		}))
		res := scrapeOne(t, config.Target{URL: srv.URL})
		srv.Close()
		if res.Reason != signal.ReasonParse || !strings.Contains(res.Err.Error(), "bad gzip body") || strings.Contains(res.Err.Error(), "cut short") {
			t.Errorf("reason %s, err %v; want parse, bad gzip body", res.Reason, res.Err)
		}
	}
}

func TestScrapeTLSFailureReason(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, sglangPage) }))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL}) // the test CA is not trusted
	if res.Reason != signal.ReasonTLS || !strings.Contains(res.Err.Error(), "tls_config") {
		t.Errorf("untrusted certificate: reason %s, err %v; want tls", res.Reason, res.Err)
	}
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, sglangPage) }))
	defer plain.Close()
	res = scrapeOne(t, config.Target{URL: strings.Replace(plain.URL, "http://", "https://", 1)})
	if res.Reason != signal.ReasonTLS {
		t.Errorf("https to a plain server: reason %s, err %v; want tls", res.Reason, res.Err)
	}
}

func TestScrapeClosedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			c.Read(buf)
			c.Close()
		}
	}()
	res := scrapeOne(t, config.Target{URL: "http://" + ln.Addr().String()})
	if res.Reason != signal.ReasonClosed || !strings.Contains(res.Err.Error(), "closed the connection without an answer") {
		t.Errorf("reason %s, err %v; want closed", res.Reason, res.Err)
	}
}

func TestScrapeTooLargeBodyBytes(t *testing.T) {
	body := strings.Repeat("# filler line\n", 1000) // 14,000 bytes
	res := New(nil2reg(), 4096).Scrape(t.Context(), target(t, config.Target{URL: serveText(t, body)}))
	if res.Reason != signal.ReasonTooLarge {
		t.Fatalf("reason %s (%v)", res.Reason, res.Err)
	}
	// kvwatch stops reading one byte past the limit.
	if res.BodyBytes != 4097 {
		t.Errorf("body bytes = %d, want 4097 (read up to the limit plus one)", res.BodyBytes)
	}
}

// Text from a target reaches no terminal raw: error bodies, status lines
// and the model name have their control characters escaped.
func TestScrapeTextSanitized(t *testing.T) {
	evil := "\x1b[2J\x1b[Hfake: all targets OK\x07"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, evil)
	}))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL})
	if strings.ContainsAny(res.Err.Error(), "\x1b\x07") || !strings.Contains(res.Err.Error(), `\x1b[2J\x1b[Hfake: all targets OK\x07`) {
		t.Errorf("err = %q, want the escapes escaped", res.Err.Error())
	}
	model := strings.ReplaceAll(sglangPage, `model_name="m"`, `model_name="m\x1b]0;owned\x07"`)
	res = scrapeOne(t, config.Target{URL: serveText(t, model)})
	if !res.OK() {
		t.Fatal(res.Err)
	}
	if res.Server.Model != `m\x1b]0;owned\x07` {
		t.Errorf("model = %q, want escaped", res.Server.Model)
	}
}

// Secrets in the URL reach no output: the result's URL and the error.
func TestScrapeSecretsRedacted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://bob:pw-planted@", 1) + "/metrics?token=tk-planted&sig=sg-planted&x=1"
	cfg, err := config.Parse([]byte("global:\n  secret_query_params: [sig]\ntargets:\n  - url: \""+u+"\"\n"), "kvwatch.yml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Targets(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := New(nil2reg(), 0).Scrape(t.Context(), ts[0])
	for _, out := range []string{res.URL, res.Err.Error()} {
		if strings.Contains(out, "planted") {
			t.Errorf("output shows a secret: %s", out)
		}
	}
	if !strings.Contains(res.URL, "x=1") || !strings.Contains(res.URL, "bob:xxxxx@") {
		t.Errorf("URL = %s, want the rest kept", res.URL)
	}
}

// The trtllm-serve fallback is chosen by the JSON sentinel, not the text.
func TestJSONFallbackBySentinel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, `[{"gpuMemUsage": 1}]`)
			return
		}
		w.WriteHeader(404)
	}))
	defer srv.Close()
	res := scrapeOne(t, config.Target{URL: srv.URL})
	if res.Reason != signal.ReasonNotMetrics {
		t.Fatalf("reason %s", res.Reason)
	}
	var inner error = res.Err
	if !errors.Is(inner, errJSONProbe) {
		// The error chain keeps the sentinel through the safe wrapper.
		t.Errorf("errors.Is(err, expo.ErrJSON) is false for %v", res.Err)
	}
}

var errJSONProbe = expo.ErrJSON

func nil2reg() *engine.Registry { return engine.NewRegistry() }
