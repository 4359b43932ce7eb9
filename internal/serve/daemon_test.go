package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestMetricsAndReport(t *testing.T) {
	good := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	dead := testenv.FreeAddr(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "kvwatch.yml", fmt.Sprintf(`
global:
  scrape_interval: 1s
  headroom_tokens: [100, 400]
targets:
  - name: dp2
    url: %s
    role: decode
    labels: {cluster: c1, pool: p1}
  - name: dead
    url: http://%s
`, good.URL, dead))
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})
	waitFor(t, "the first round", d.Ready)

	g := d.Gatherer()
	dp2 := map[string]string{"server": "dp2", "role": "decode", "kv_cluster": "c1", "pool": "p1"}
	// Worked out by hand from testdata/sglang-dp2.prom.
	for _, c := range []struct {
		m     signal.Metric
		extra map[string]string
		want  float64
	}{
		{signal.KVCapacityTokens, nil, 2000},
		{signal.KVUsedTokens, nil, 750},
		{signal.KVAvailableTokens, nil, 1250},
		{signal.KVUsageRatio, nil, 0.375},
		{signal.RankSpreadRatio, nil, 0.25},
		{signal.KVHeadroomRequests, map[string]string{signal.LabelRequest: "100"}, 7 + 5},
		{signal.KVHeadroomRequests, map[string]string{signal.LabelRequest: "400"}, 1 + 1},
		{signal.KVHeadroomRequests, map[string]string{signal.LabelRequest: "4096"}, 0},
		{signal.ContextLengthTokens, nil, 4096},
		{signal.RequestsRunning, nil, 9},
		{signal.RequestsQueued, map[string]string{signal.LabelQueue: signal.QueueWaiting}, 3},
		{signal.PromptTokens, nil, 3000},
		{signal.PrefixCacheHitTokens, nil, 800},
		{signal.PrefixCacheQueryTokens, nil, 3000},
		{signal.RankKVUsageRatio, map[string]string{signal.LabelDPRank: "1"}, 0.5},
		{signal.RankKVUsedTokens, map[string]string{signal.LabelDPRank: "0"}, 250},
		{signal.ServerInfo, map[string]string{signal.LabelEngine: "sglang", signal.LabelGen: "current", signal.LabelModel: "test-model"}, 1},
		{signal.SignalInfo, map[string]string{signal.LabelSignal: signal.SigUsed, signal.LabelProv: "direct"}, 1},
		{signal.SignalInfo, map[string]string{signal.LabelSignal: signal.SigPreemptions, signal.LabelProv: "unavailable"}, 1},
		{signal.TargetUp, nil, 1},
	} {
		want := map[string]string{}
		for k, v := range dp2 {
			want[k] = v
		}
		for k, v := range c.extra {
			want[k] = v
		}
		if got := one(t, g, c.m.Name, want); got != c.want {
			t.Errorf("%s%v = %g, want %g", c.m.Name, c.extra, got, c.want)
		}
	}
	// Unavailable is absent, never 0.
	for _, m := range []signal.Metric{signal.KVEvictableTokens, signal.KVReservedRatio, signal.Preemptions, signal.GenerationTokens} {
		if s := series(t, g, m.Name, dp2); len(s) != 0 {
			t.Errorf("%s = %v, want absent (the page does not report it)", m.Name, s)
		}
	}
	// The dead target: down, with its reason, and no signals.
	deadL := map[string]string{"server": "dead", "role": "unified"}
	if got := one(t, g, signal.TargetUp.Name, deadL); got != 0 {
		t.Errorf("dead target up = %g, want 0", got)
	}
	if got := one(t, g, signal.TargetScrapeError.Name, map[string]string{"server": "dead", signal.LabelReason: signal.ReasonRefused}); got != 1 {
		t.Errorf("dead target scrape_error{reason=refused} = %g, want 1", got)
	}
	if s := series(t, g, signal.KVCapacityTokens.Name, deadL); len(s) != 0 {
		t.Errorf("dead target exports capacity %v, want absent", s)
	}
	if s := series(t, g, signal.TargetLastSuccess.Name, deadL); len(s) != 0 {
		t.Errorf("dead target exports last success %v, want absent", s)
	}
	// Gatherer holds only kvwatch_* families.
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "kvwatch_") {
			t.Errorf("Gatherer has %s, want only kvwatch_* families", mf.GetName())
		}
	}

	// /metrics adds kvwatch's own metrics.
	code, body := get(t, nil, d.base+PathMetrics)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"go_goroutines ", signal.ConfigReloadSuccess.Name + " 1", signal.Targets.Name + " 2",
		signal.ScrapeDeadlineMisses.Name + " ", `kvwatch_kv_used_tokens{kv_cluster="c1",pool="p1",role="decode",server="dp2"} 750`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The report API: the status --output json schema.
	code, body = get(t, nil, d.base+PathReport)
	if code != http.StatusOK {
		t.Fatalf("report: %d %s", code, body)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if rep.Schema != report.SchemaVersion || len(rep.Servers) != 2 {
		t.Fatalf("report: schema %d, %d servers; want %d, 2", rep.Schema, len(rep.Servers), report.SchemaVersion)
	}
	if s := rep.Servers[0]; s.Name != "dp2" || !s.OK || s.Server.Used.V != 750 {
		t.Errorf("report row 0 = %s ok=%v, want dp2 ok with 750 used", s.Name, s.OK)
	}
	if s := rep.Servers[1]; s.Name != "dead" || s.OK || s.Reason != signal.ReasonRefused {
		t.Errorf("report row 1 = %s ok=%v reason=%s, want dead, failed, refused", s.Name, s.OK, s.Reason)
	}
	if len(rep.Pools) != 1 || rep.Pools[0].Used.V != 750 || rep.Pools[0].Capacity.V != 2000 {
		t.Errorf("pools = %+v, want one with 750 used of 2000", rep.Pools)
	}

	for _, p := range []string{signal.PathHealthy, signal.PathReady} {
		if code, body := get(t, nil, d.base+p); code != http.StatusOK {
			t.Errorf("%s = %d %s, want 200", p, code, body)
		}
	}
	if code, body := get(t, nil, d.base+"/"); code != http.StatusOK || !strings.Contains(body, PathReport) {
		t.Errorf("GET / = %d, want 200 with a landing page linking %s:\n%s", code, PathReport, body)
	}
	if code, body := get(t, nil, d.base+PathPprof+"heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile:") {
		t.Errorf("GET %sheap?debug=1 = %d, want 200 with a heap profile:\n%.200s", PathPprof, code, body)
	}
	if code, _ := get(t, nil, d.base+PathReload); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", PathReload, code)
	}
}

func TestFileSD(t *testing.T) {
	a := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	b := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	dir := t.TempDir()
	writeFile(t, dir, "engines.json", fmt.Sprintf(`[{"targets": [%q], "labels": {"role": "prefill", "cluster": "east", "engine": "sglang", "job": "ignored"}}]`, host(a.URL)))
	cfg := writeFile(t, dir, "kvwatch.yml", "file_sd_configs:\n  - files: ['*.json', '*.yml.sd']\n    refresh_interval: 1s\n")
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})
	waitFor(t, "the first round", d.Ready)
	if got := one(t, d.Gatherer(), signal.KVUsedTokens.Name, map[string]string{"server": host(a.URL), "role": "prefill", "kv_cluster": "east"}); got != 750 {
		t.Errorf("file_sd target used = %g, want 750", got)
	}

	// A new YAML file appears: its target is picked up without a reload.
	writeFile(t, dir, "more.yml.sd", fmt.Sprintf("- targets: [%q]\n  labels: {__metrics_path__: /metrics, pool: west}\n", host(b.URL)))
	waitFor(t, "the new file_sd target", func() bool {
		return len(series(t, d.Gatherer(), signal.TargetUp.Name, map[string]string{"server": host(b.URL), "pool": "west"})) == 1
	})

	// A broken file keeps the previous targets.
	writeFile(t, dir, "more.yml.sd", "- targets: [a/b]\n")
	waitFor(t, "the failed refresh", func() bool { return one(t, d.opts.Registry, signal.ConfigReloadSuccess.Name, nil) == 0 })
	if got := one(t, d.opts.Registry, signal.Targets.Name, nil); got != 2 {
		t.Errorf("targets after a broken file_sd file = %g, want 2 (unchanged)", got)
	}
}

func TestNonLoopbackNeedsWebConfig(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:9477", true}, {"[::1]:9477", true}, {"localhost:9477", true},
		{":9477", false}, {"0.0.0.0:9477", false}, {"10.1.2.3:9477", false}, {"gpu-1:9477", false},
	} {
		if got := isLoopback(c.addr); got != c.want {
			t.Errorf("isLoopback(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
	_, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"0.0.0.0:0"}})
	if err == nil || !strings.Contains(err.Error(), "--web.config.file") || !strings.Contains(err.Error(), "--web.insecure-listen") {
		t.Errorf("New on 0.0.0.0 without web config: err = %v, want one naming --web.config.file and --web.insecure-listen", err)
	}
}

// TestNonLoopbackWebConfigNeedsTLSAndAuth: a web config that exporter-toolkit
// accepts but that lacks TLS or authentication does not open a non-loopback
// listener (issue 12, case 4: `{}`, basic auth without TLS, TLS without auth
// were accepted on 0.0.0.0).
func TestNonLoopbackWebConfigNeedsTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	tlsPart := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", certFile, keyFile)
	hash, err := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("basic_auth_users:\n  prom: %s\n", hash)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		name, file string
		insecure   bool
		// want is a text the error holds; "" means accepted.
		want string
	}{
		{"empty", "{}\n", false, "has no TLS (tls_server_config with cert_file and key_file) and no authentication"},
		{"basic auth, no TLS", users, false, "has no TLS (tls_server_config with cert_file and key_file):"},
		{"TLS, no auth", tlsPart, false, "has no authentication (basic_auth_users"},
		{"TLS, client certificates requested only", tlsPart + "  client_auth_type: RequestClientCert\n  client_ca_file: " + certFile + "\n", false, "has no authentication"},
		{"TLS and basic auth", tlsPart + users, false, ""},
		{"TLS and verified client certificates", tlsPart + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " + certFile + "\n", false, ""},
		{"empty, but the network is trusted", "{}\n", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "_")+".yml", c.file)
			for _, addr := range []string{"0.0.0.0:9477", ":9477", "10.1.2.3:9477"} {
				err := checkListen(Options{ListenAddresses: []string{"127.0.0.1:9477", addr}, WebConfigFile: f, InsecureListen: c.insecure}, quiet)
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v, want accepted", addr, err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--web.insecure-listen")):
					t.Errorf("%s: err = %v, want one with %q naming --web.insecure-listen", addr, err, c.want)
				}
			}
			// Loopback needs neither.
			if err := checkListen(Options{ListenAddresses: []string{"127.0.0.1:9477", "[::1]:9477"}, WebConfigFile: f}, quiet); err != nil {
				t.Errorf("loopback: %v", err)
			}
		})
	}
	// Through New, before anything binds.
	f := writeFile(t, dir, "empty.yml", "{}\n")
	if _, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"0.0.0.0:0"}, WebConfigFile: f}); err == nil ||
		!strings.Contains(err.Error(), "no TLS") {
		t.Errorf("New on 0.0.0.0 with web config {}: err = %v, want a refusal", err)
	}
}

func TestReadyAfterFirstRound(t *testing.T) {
	release := make(chan struct{})
	slow := engineServerFunc(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Write(page(t, "sglang-dp2.prom"))
	})
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, slow.URL)})})
	if code, _ := get(t, nil, d.base+signal.PathReady); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready before the first scrape = %d, want 503", code)
	}
	close(release)
	waitFor(t, "readiness", d.Ready)
	if code, _ := get(t, nil, d.base+signal.PathReady); code != http.StatusOK {
		t.Errorf("/-/ready after the first scrape = %d, want 200", code)
	}
}

func TestNoSecretsInLogsMetricsOrReport(t *testing.T) {
	dead := testenv.FreeAddr(t)
	var logs testenv.Buffer
	d := start(t, Options{
		Pipeline: pipe(t, config.Sources{Config: configWith(t, "http://kvwatch:hunter2@"+dead+"/metrics")}),
		Logger:   slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	waitFor(t, "the first round", d.Ready)
	_, metrics := get(t, nil, d.base+PathMetrics)
	_, rep := get(t, nil, d.base+PathReport)
	for where, s := range map[string]string{"logs": logs.String(), "/metrics": metrics, "report": rep} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s contain the target's password:\n%s", where, s)
		}
	}
	if !strings.Contains(logs.String(), "target down") {
		t.Errorf("no 'target down' log for the dead target:\n%s", logs.String())
	}
}

// TestEngineChangeLogged: a target whose engine changes once (SGLang's
// pages, then vLLM's) is logged once, at the change, and keeps its
// configured role.
func TestEngineChangeLogged(t *testing.T) {
	sglang := page(t, "sglang-dp2.prom")
	vllm := "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"1000\"} 1.0\n" +
		"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"
	var n atomic.Int64
	srv := engineServerFunc(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 {
			w.Write(sglang)
			return
		}
		io.WriteString(w, vllm)
	})
	cfg := configWith(t, srv.URL)
	cfg.Global.ScrapeInterval, cfg.Global.ScrapeTimeout = model.Duration(50*time.Millisecond), model.Duration(50*time.Millisecond)
	cfg.Targets[0].Role = "prefill"
	var logs testenv.Buffer
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg}), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	g := d.Gatherer()
	waitFor(t, "six scrapes", func() bool {
		s := series(t, g, signal.TargetScrapes.Name, map[string]string{"server": "t0"})
		return len(s) == 1 && one(t, g, signal.TargetScrapes.Name, map[string]string{"server": "t0"}) >= 6
	})
	if got := strings.Count(logs.String(), "target's engine changed"); got != 1 {
		t.Errorf("%d engine change logs, want 1:\n%s", got, logs.String())
	}
	for _, w := range []string{"from=sglang to=vllm role=prefill"} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("logs lack %q:\n%s", w, logs.String())
		}
	}
	if got := one(t, g, signal.ServerInfo.Name, map[string]string{"server": "t0", "role": "prefill"}); got != 1 {
		t.Errorf("server info with role prefill = %g, want 1", got)
	}
}

func TestHandleAddsRoutesBehindTheSameServer(t *testing.T) {
	opts := Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"}, Logger: testLogger(t)}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	d.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("web ui")) }))
	d.Handle("/api/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("query api")) }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + d.Addrs()[0].String()
	waitFor(t, "the daemon", func() bool { return d.running.Load() })
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/", 200, "web ui"},
		{"/api/v1/query", 200, "query api"},
		{"/nothing-here", 404, ""},
		{signal.PathHealthy, 200, "healthy"},
	} {
		code, body := get(t, nil, base+c.path)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("GET %s = %d %q, want %d with %q", c.path, code, body, c.code, c.body)
		}
	}
}
