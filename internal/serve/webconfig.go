package serve

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"

	"github.com/kvwatch/kvwatch/internal/config"
)

// checkListen enforces serve's listen rule (docs/configuration.md,
// "Listening beyond loopback"): a web config file, when given, must pass
// exporter-toolkit's own validation; a non-loopback listen address also needs
// that file to enable both TLS and authentication (basic_auth_users, or
// client certificates with client_auth_type RequireAndVerifyClientCert), or
// InsecureListen, which is logged as a warning on every start.
func checkListen(opts Options, log *slog.Logger) error {
	var open []string
	for _, a := range opts.ListenAddresses {
		if !isLoopback(a) {
			open = append(open, a)
		}
	}
	var missing []string
	if opts.WebConfigFile != "" {
		if err := web.Validate(opts.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s: %w", opts.WebConfigFile, err)
		}
		c, err := readWebConfig(opts.WebConfigFile)
		if err != nil {
			return fmt.Errorf("--web.config.file %s: %w", opts.WebConfigFile, err)
		}
		if err := checkWebKeys(c.TLSConfig); err != nil {
			return fmt.Errorf("--web.config.file %s: %w", opts.WebConfigFile, err)
		}
		tlsOn, authOn := webConfigProtection(c)
		if !tlsOn {
			missing = append(missing, "TLS (tls_server_config with cert_file and key_file)")
		}
		if !authOn {
			missing = append(missing, "authentication (basic_auth_users, or client_auth_type: RequireAndVerifyClientCert with client_ca_file)")
		}
	}
	if len(open) == 0 || (opts.WebConfigFile != "" && len(missing) == 0) {
		return nil // loopback only, or TLS and authentication in force
	}
	addrs := strings.Join(quoteAll(open), ", ")
	if opts.InsecureListen {
		log.Warn("INSECURE: kvwatch serve listens beyond loopback without TLS and authentication of its own (--web.insecure-listen); anyone who can reach "+addrs+" can read every metric, query the history and reload the config. Use it only behind a proxy or service mesh that terminates TLS and authenticates.",
			"listen", open, "missing", missing)
		return nil
	}
	if opts.WebConfigFile == "" {
		return fmt.Errorf("listen address %s is not loopback and there is no --web.config.file: anyone who can reach it could read kvwatch's metrics and reload it; give --web.config.file with TLS and basic auth (see docs/configuration.md), or --web.insecure-listen when a proxy or service mesh terminates TLS", addrs)
	}
	return fmt.Errorf("listen address %s is not loopback and --web.config.file %s has no %s: a non-loopback listener needs both TLS and authentication (see docs/configuration.md), or --web.insecure-listen when a proxy or service mesh terminates TLS", addrs, opts.WebConfigFile, strings.Join(missing, " and no "))
}

// readWebConfig reads an exporter-toolkit web config file (already
// validated by web.Validate), its relative files resolved against its
// directory as exporter-toolkit resolves them.
func readWebConfig(file string) (*web.Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var c web.Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, err
	}
	c.TLSConfig.SetDirectory(filepath.Dir(file))
	return &c, nil
}

// webConfigProtection reports whether a web config enables TLS and
// authentication.
func webConfigProtection(c *web.Config) (tlsOn, authOn bool) {
	tlsOn = c.TLSConfig.IsEnabled() && (c.TLSConfig.TLSCertPath != "" || c.TLSConfig.TLSCert != "")
	clientCerts := tlsOn && c.TLSConfig.ClientAuth == "RequireAndVerifyClientCert"
	return tlsOn, len(c.Users) > 0 || clientCerts
}

// checkWebKeys refuses a server certificate or key too weak for TLS:
// exporter-toolkit loads it, then every handshake fails.
func checkWebKeys(t web.TLSConfig) error {
	for _, f := range []struct{ key, file string }{{"cert_file", t.TLSCertPath}, {"key_file", t.TLSKeyPath}} {
		if f.file == "" {
			continue
		}
		if err := config.CheckTLSKeyFile(f.file); err != nil {
			return fmt.Errorf("tls_server_config.%s: %w", f.key, err)
		}
	}
	for _, in := range []struct{ key, text string }{{"cert", t.TLSCert}, {"key", string(t.TLSKey)}} {
		if err := config.CheckTLSKeyPEM([]byte(in.text)); err != nil {
			return fmt.Errorf("tls_server_config.%s %w", in.key, err)
		}
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
