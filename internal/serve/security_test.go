package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/signal"
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
	d := start(t, Options{Config: configWith(t, good.URL), WebConfigFile: webCfg})
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
	if _, err := New(Options{Config: emptyConfig(), WebConfigFile: bad, ListenAddresses: []string{"127.0.0.1:0"}}); err == nil {
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
	d := start(t, Options{ConfigFile: cfg})
	waitFor(t, "the first round", d.Ready)
	for _, c := range []struct {
		cluster string
		up      float64
	}{{"secure", 1}, {"plain", 0}} {
		if got := one(t, d.Gatherer(), signal.TargetUp.Name, map[string]string{"cluster": c.cluster}); got != c.up {
			t.Errorf("file_sd target of cluster %s: up = %g, want %g", c.cluster, got, c.up)
		}
	}
	if got := one(t, d.Gatherer(), signal.KVUsedTokens.Name, map[string]string{"cluster": "secure"}); got != 750 {
		t.Errorf("used tokens over TLS with basic auth = %g, want 750", got)
	}
}
