package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key to
// dir and returns their paths and a pool trusting the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kvwatch test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, dir, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, dir, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := writeFile(t, dir, "web.yml", fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prom: %s\n", certFile, keyFile, hash))
	good := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, good.URL)}), WebConfigFile: webCfg})
	base := strings.Replace(d.base, "http://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)

	req := func(path, user, pass string) int {
		r, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Fatalf("GET %s: %v", base+path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name, user, pass string
		want             int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "prom", "nope", http.StatusUnauthorized},
		{"unknown user", "root", "s3cret", http.StatusUnauthorized},
		{"right credentials", "prom", "s3cret", http.StatusOK},
	} {
		for _, path := range []string{PathMetrics, PathPprof + "heap"} {
			if got := req(path, c.user, c.pass); got != c.want {
				t.Errorf("%s: GET %s = %d, want %d", c.name, path, got, c.want)
			}
		}
	}
	// Plain HTTP gets no metrics.
	plain := &http.Client{}
	if resp, err := plain.Get(d.base + PathMetrics); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP /metrics = 200 on a TLS listener")
		}
	}

	// A bad web config file is refused at start with its problem.
	bad := writeFile(t, dir, "bad.yml", "tls_server_config:\n  cert_file: /nonexistent.pem\n")
	if _, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), WebConfigFile: bad, ListenAddresses: []string{"127.0.0.1:0"}}); err == nil {
		t.Errorf("New accepted a web config with a missing key file")
	}
}

// file_sd targets are scraped with their file_sd_configs entry's scheme,
// TLS and auth (relative files resolved against the config's directory);
// targets of an entry without them get refused by the same server.
func TestFileSDTLSAndAuth(t *testing.T) {
	body := page(t, "sglang-dp2.prom")
	auth := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "kv" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="metrics"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write(body)
	})
	// Two servers (target names are unique) with httptest's one certificate.
	eng, other := httptest.NewTLSServer(auth), httptest.NewTLSServer(auth)
	t.Cleanup(eng.Close)
	t.Cleanup(other.Close)
	dir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: eng.Certificate().Raw})
	writeFile(t, dir, "ca.pem", string(ca))
	writeFile(t, dir, "password", "s3cret\n")
	addr := strings.TrimPrefix(eng.URL, "https://")
	writeFile(t, dir, "secure.json", fmt.Sprintf(`[{"targets": [%q], "labels": {"cluster": "secure"}}]`, addr))
	writeFile(t, dir, "plain.json", fmt.Sprintf(`[{"targets": [%q], "labels": {"__scheme__": "https", "cluster": "plain"}}]`, strings.TrimPrefix(other.URL, "https://")))
	cfg := writeFile(t, dir, "kvwatch.yml", `file_sd_configs:
  - files: [secure.json]
    scheme: https
    basic_auth: {username: kv, password_file: password}
    tls_config: {ca_file: ca.pem}
  - files: [plain.json]
    tls_config: {ca_file: ca.pem}
`)
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})
	waitFor(t, "the first round", d.Ready)
	for _, c := range []struct {
		cluster string
		up      float64
	}{{"secure", 1}, {"plain", 0}} {
		if got := one(t, d.Gatherer(), signal.TargetUp.Name, map[string]string{"kv_cluster": c.cluster}); got != c.up {
			t.Errorf("file_sd target of cluster %s: up = %g, want %g", c.cluster, got, c.up)
		}
	}
	if got := one(t, d.Gatherer(), signal.KVUsedTokens.Name, map[string]string{"kv_cluster": "secure"}); got != 750 {
		t.Errorf("used tokens over TLS with basic auth = %g, want 750", got)
	}
}

// TestServeHostileTargets runs serve over the simulator's healthy PD
// cluster beside hostile targets. Each hostile target fails with its
// reason and exports nothing but its health; the healthy targets stay
// exactly the simulator's truth; no face (metrics, report, logs, reload)
// shows a planted secret or a raw escape, and /metrics stays small.
func TestServeHostileTargets(t *testing.T) {
	cl := testenv.Builtin(t, "pd-sglang", sim.Options{Seed: 1, ManualClock: true, ListenHost: "127.0.0.1"})
	cl.Advance(time.Minute)

	hostile := map[string]http.HandlerFunc{
		"ansi": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			fmt.Fprint(w, "\x1b[2J\x1b[Hfake: all targets OK")
		},
		"secret": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) },
		"bomb": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "# TYPE sglang:max_total_num_tokens gauge\n")
			for i := range 25000 {
				fmt.Fprintf(w, "sglang:max_total_num_tokens{dp_rank=\"%d\",tp_rank=\"0\"} 1000\n", i)
			}
		},
		"hugelabel": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens{model_name=%q,tp_rank=\"0\"} 1000\n", strings.Repeat("m", 1<<20))
		},
		"redirect": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://10.9.9.9/x", http.StatusFound)
		},
		// Slow loris: a valid page, one line every 200ms, for ever.
		"slowloris": testenv.SlowLoris,
		// Closes the connection without an answer.
		"hangup": testenv.HangUp,
	}
	wantReason := map[string]string{"ansi": signal.ReasonHTTPError, "secret": signal.ReasonHTTPError, "bomb": signal.ReasonLimit,
		"hugelabel": signal.ReasonLimit, "redirect": signal.ReasonRedirect, "badtls": signal.ReasonTLS, "slowloris": signal.ReasonTimeout,
		"hangup": signal.ReasonClosed}
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 5s\n  scrape_timeout: 4s\n  body_size_limit: 64MiB\n  secret_query_params: [sig]\ntargets:\n")
	for _, ep := range cl.Endpoints() {
		fmt.Fprintf(&b, "  - {name: %s, url: %q}\n", ep.Name, ep.URL+ep.MetricsPath)
	}
	for name, h := range hostile {
		u := engineServerFunc(t, h).URL
		if name == "secret" {
			u = strings.Replace(u, "http://", "http://bob:pw-planted@", 1) + "/metrics?token=tk-planted&sig=sg-planted"
		}
		fmt.Fprintf(&b, "  - {name: %s, url: %q}\n", name, u)
	}
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(tlsSrv.Close)
	fmt.Fprintf(&b, "  - {name: badtls, url: %q}\n", tlsSrv.URL)
	dir := t.TempDir()
	cfgFile := writeFile(t, dir, "kvwatch.yml", b.String())
	var logs testenv.Buffer
	// The reload route calls what the runtime gives it (package app's
	// Reload): here the config file loaded into a pipeline for the daemon.
	var d *running
	reloadFn := func(ctx context.Context) error {
		p, err := pipeline.Load(config.Sources{File: cfgFile}, nil)
		if err != nil {
			return err
		}
		return d.ApplyConfig(ctx, p)
	}
	d = start(t, Options{Pipeline: pipe(t, config.Sources{File: cfgFile}), Reload: reloadFn, Logger: slog.New(safetext.Handler(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))})
	g := d.Gatherer()
	for name, reason := range wantReason {
		waitFor(t, name+" to fail with "+reason, func() bool {
			return len(series(t, g, signal.TargetScrapeError.Name, map[string]string{"server": name, signal.LabelReason: reason})) == 1
		})
	}
	for _, ep := range cl.Endpoints() {
		waitFor(t, ep.Name+" up", func() bool {
			for _, v := range series(t, g, signal.TargetUp.Name, map[string]string{"server": ep.Name}) {
				return v == 1
			}
			return false
		})
	}
	// The healthy targets are exactly the simulator's truth.
	for _, ep := range cl.Endpoints() {
		if ep.Role == "router" {
			continue
		}
		tr := cl.Truth(ep.Name)
		if got := one(t, g, signal.KVCapacityTokens.Name, map[string]string{"server": ep.Name}); got != float64(tr.CapacityTokens) {
			t.Errorf("%s capacity = %g, want %d", ep.Name, got, tr.CapacityTokens)
		}
		if got := one(t, g, signal.KVUsedTokens.Name, map[string]string{"server": ep.Name}); got != float64(tr.UsedTokens) {
			t.Errorf("%s used = %g, want %d", ep.Name, got, tr.UsedTokens)
		}
	}
	// The hostile ones export only their health.
	for name := range wantReason {
		if s := series(t, g, signal.KVCapacityTokens.Name, map[string]string{"server": name}); len(s) != 0 {
			t.Errorf("%s exports capacity %v while failing", name, s)
		}
	}
	_, metrics := get(t, nil, d.base+PathMetrics)
	if len(metrics) > 200<<10 {
		t.Errorf("/metrics is %d bytes with a 25,000-rank target: the bomb got through", len(metrics))
	}
	_, rep := get(t, nil, d.base+PathReport)
	for _, want := range []string{`\\x1b[2J\\x1b[Hfake: all targets OK`, "sample_limit 20000", "label_value_length_limit 2048", "redirected to http://10.9.9.9/x", "bob:xxxxx@", "token=xxxxx", "sig=xxxxx"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// A reload with a bad URL holding a password.
	writeFile(t, dir, "kvwatch.yml", "targets:\n  - url: \"http://bob:pw-planted@host:bad/\"\n")
	resp, err := http.Post(d.base+PathReload, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	reload, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(reload), "bob:xxxxx@host:bad") {
		t.Errorf("reload = %d %s, want 500 naming the redacted URL", resp.StatusCode, reload)
	}
	faces := map[string]string{"/metrics": metrics, "report": rep, "reload": string(reload), "logs": logs.String()}
	for face, text := range faces {
		for _, bad := range []string{"planted", "\x1b", `\u001b`} {
			if strings.Contains(text, bad) {
				t.Errorf("%s holds %q", face, bad)
			}
		}
	}
}
