package serve

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

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
