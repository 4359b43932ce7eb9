//go:debug rsa1024min=0
package serve

// rsa1024min=0 lets TestWeakWebCertificate make a 512-bit RSA certificate,
// which Go refuses to make (and, outside tests, to use in a handshake).

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestNonLoopbackNeedsTLSAndAuth (issue 12 item 4): a non-loopback listener
// needs a web config with both TLS and authentication, or
// --web.insecure-listen. 192.0.2.1 (TEST-NET-1) is assigned to no interface
// here, so a New that passes the listen rule fails at bind ("listen on"), and
// the test never opens a socket beyond loopback.
func TestNonLoopbackNeedsTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	tlsYAML := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", certFile, keyFile)
	authYAML := fmt.Sprintf("basic_auth_users:\n  prom: %s\n", hash)
	mtlsYAML := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: %s\n", certFile, keyFile, certFile)
	const (
		accepted = "listen on"
		noTLS    = "no TLS"
		noAuth   = "no authentication"
	)
	for _, c := range []struct {
		name, web string
		insecure  bool
		want      []string // substrings of New's error
		notWant   []string
	}{
		{"empty web config", "{}\n", false, []string{"not loopback", noTLS, noAuth, "--web.insecure-listen"}, []string{accepted}},
		{"basic auth only", authYAML, false, []string{"not loopback", noTLS, "--web.insecure-listen"}, []string{noAuth, accepted}},
		{"TLS only", tlsYAML, false, []string{"not loopback", noAuth, "--web.insecure-listen"}, []string{noTLS, accepted}},
		{"TLS and basic auth", tlsYAML + authYAML, false, []string{accepted}, []string{"not loopback"}},
		{"TLS and client certificates", mtlsYAML, false, []string{accepted}, []string{"not loopback"}},
		{"no web config", "", false, []string{"not loopback", "--web.config.file", "--web.insecure-listen"}, []string{accepted}},
		{"empty web config, insecure listen", "{}\n", true, []string{accepted}, []string{"not loopback"}},
		{"no web config, insecure listen", "", true, []string{accepted}, []string{"not loopback"}},
		// Protected anyway: no warning (the case sets insecure, expects none).
		{"TLS and basic auth, insecure listen", tlsYAML + authYAML, true, []string{accepted}, []string{"not loopback"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := ""
			if c.web != "" {
				file = writeFile(t, t.TempDir(), "web.yml", c.web)
			}
			var logs testenv.Buffer
			_, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"192.0.2.1:0"},
				WebConfigFile: file, InsecureListen: c.insecure, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err == nil {
				t.Fatalf("New bound 192.0.2.1, which this test assumes no interface has")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("New error has %q:\n%v", w, err)
				}
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "INSECURE")
			wantWarn := c.insecure && !strings.HasPrefix(c.name, "TLS and")
			if warned != wantWarn {
				t.Errorf("insecure-listen warning logged = %v, want %v; logs:\n%s", warned, wantWarn, logs.String())
			}
		})
	}
	// Loopback needs neither TLS nor authentication, but a web config that is
	// given must still be valid.
	for _, web := range []string{"", "{}\n", authYAML} {
		file := ""
		if web != "" {
			file = writeFile(t, t.TempDir(), "web.yml", web)
		}
		d, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"}, WebConfigFile: file})
		if err != nil {
			t.Errorf("New on loopback with web config %q: %v", web, err)
			continue
		}
		d.closeListeners()
	}
	bad := writeFile(t, t.TempDir(), "web.yml", "basic_auth_users:\n  prom: not-a-bcrypt-hash\n")
	if _, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"}, WebConfigFile: bad}); err == nil {
		t.Errorf("New accepted a web config whose password is not a bcrypt hash")
	}
}

// TestWeakWebCertificate (issue 31 item 8): a 512-bit RSA certificate in
// --web.config.file passed exporter-toolkit's validation, serve started, and
// every TLS handshake failed with a warning. serve now refuses to start,
// naming the file (relative to the web config, as exporter-toolkit reads
// it), the key size and the fix; a 2048-bit one starts.
func TestWeakWebCertificate(t *testing.T) {
	dir := t.TempDir()
	rsaPair := func(bits int) (string, string) {
		key, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvwatch test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("rsa%d", bits)
		writeFile(t, dir, name+".crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
		writeFile(t, dir, name+".key", string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
		return name + ".crt", name + ".key"
	}
	weakCrt, weakKey := rsaPair(512)
	okCrt, okKey := rsaPair(2048)
	web := func(name, crt, key string) string {
		return writeFile(t, dir, name, fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", crt, key))
	}
	fix := ": TLS needs an RSA key of at least 2048 bits or an elliptic-curve key of at least 256 bits (P-256, P-384, P-521, Ed25519), " +
		"and Go refuses RSA keys under 1024 bits in every handshake, so every connection would fail; " +
		"make a new key (`openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072`, or an ECDSA P-256 key with `-algorithm EC -pkeyopt ec_paramgen_curve:P-256`) and a certificate for it"
	weak := web("weak.yml", weakCrt, weakKey)
	_, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"}, WebConfigFile: weak})
	want := "--web.config.file " + weak + ": tls_server_config.cert_file: " + filepath.Join(dir, weakCrt) +
		" holds a 512-bit RSA key in its certificate (CN=kvwatch test)" + fix
	if err == nil || err.Error() != want {
		t.Errorf("New with a 512-bit web certificate:\n%v\nwant:\n%s", err, want)
	}
	d, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"},
		WebConfigFile: web("ok.yml", okCrt, okKey)})
	if err != nil {
		t.Fatalf("New with a 2048-bit web certificate: %v", err)
	}
	d.closeListeners()
}
