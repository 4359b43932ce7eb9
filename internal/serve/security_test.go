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
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
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
	good := engineServer(t, page(t, "sglang-dp2.prom"))
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
