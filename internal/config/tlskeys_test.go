//go:debug rsa1024min=0
package config

// rsa1024min=0 lets the test make and sign with 512-bit RSA keys, which Go
// refuses by default: the keys the check must refuse.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// keyPair writes a self-signed certificate for key and the key (PKCS #8) to
// dir as name.crt and name.key and returns their paths.
func keyPair(t *testing.T, dir, name string, key crypto.Signer) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kb)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func rsaKey(t *testing.T, bits int) crypto.Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ecKey(t *testing.T, c elliptic.Curve) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// weakText is the problem text after "<file> holds <weak> in its <what>".
const weakText = ": TLS needs an RSA key of at least 2048 bits or an elliptic-curve key of at least 256 bits (P-256, P-384, P-521, Ed25519), " +
	"and Go refuses RSA keys under 1024 bits in every handshake, so every connection would fail; " +
	"make a new key (`openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072`, or an ECDSA P-256 key with `-algorithm EC -pkeyopt ec_paramgen_curve:P-256`) and a certificate for it"

// TestWeakTLSKeys (issue 31 item 8): a 512-bit RSA certificate passed check
// config, then every handshake failed. Certificates and keys too weak for
// TLS are refused with their key, file, size and the fix, wherever the
// config names them: a target's tls_config, its oauth2 token endpoint's,
// file_sd_configs, remote_write (relative files from the config's
// directory) and inline PEM.
func TestWeakTLSKeys(t *testing.T) {
	dir := t.TempDir()
	weakCrt, weakKey := keyPair(t, dir, "rsa512", rsaKey(t, 512))
	okCrt, okKey := keyPair(t, dir, "rsa2048", rsaKey(t, 2048))
	p224Crt, p224Key := keyPair(t, dir, "p224", ecKey(t, elliptic.P224()))
	p256Crt, p256Key := keyPair(t, dir, "p256", ecKey(t, elliptic.P256()))
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edCrt, edKey := keyPair(t, dir, "ed25519", edPriv)
	// DSA: x509 neither writes DSA certificates nor parses DSA keys; the
	// two forms OpenSSL writes a DSA key in are refused by their type.
	dsaTrad := filepath.Join(dir, "dsa-trad.key")
	writePEM(t, dsaTrad, "DSA PRIVATE KEY", []byte{0x30, 0x00})
	p8, err := asn1.Marshal(struct {
		Version int
		Algo    pkix.AlgorithmIdentifier
		Key     []byte
	}{0, pkix.AlgorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 10040, 4, 1}}, []byte{0x02, 0x01, 0x01}})
	if err != nil {
		t.Fatal(err)
	}
	dsaP8 := filepath.Join(dir, "dsa-p8.key")
	writePEM(t, dsaP8, "PRIVATE KEY", p8)
	weakPEM, err := os.ReadFile(weakCrt)
	if err != nil {
		t.Fatal(err)
	}
	indent := func(b []byte) string {
		return "        " + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", "\n        ")
	}

	rsa512 := func(file, what string) string { return file + " holds a 512-bit RSA key in its " + what + weakText }
	for _, c := range []struct {
		name, body string
		want       []string // the problems, in order, without the file name
	}{
		{"RSA 2048, P-256 and Ed25519 pass", fmt.Sprintf(`targets:
  - url: https://a:1
    tls_config: {cert_file: %s, key_file: %s}
  - url: https://b:1
    tls_config: {cert_file: %s, key_file: %s}
  - url: https://c:1
    tls_config: {cert_file: %s, key_file: %s}
`, okCrt, okKey, p256Crt, p256Key, edCrt, edKey), nil},
		{"RSA 512 certificate and key of a target", fmt.Sprintf(`targets:
  - url: https://a:1
  - url: https://b:1
    tls_config:
      cert_file: %s
      key_file: %s
`, weakCrt, weakKey), []string{
			"line 5: targets[1].tls_config.cert_file: " + rsa512(weakCrt, "certificate (CN=rsa512)"),
			"line 6: targets[1].tls_config.key_file: " + rsa512(weakKey, "private key"),
		}},
		{"P-224", fmt.Sprintf("targets:\n  - url: https://a:1\n    tls_config: {cert_file: %s, key_file: %s}\n", p224Crt, p224Key), []string{
			"line 3: targets[0].tls_config.cert_file: " + p224Crt + " holds a 224-bit elliptic-curve key (P-224) in its certificate (CN=p224)" + weakText,
			"line 3: targets[0].tls_config.key_file: " + p224Key + " holds a 224-bit elliptic-curve key (P-224) in its private key" + weakText,
		}},
		{"DSA keys", fmt.Sprintf(`targets:
  - url: https://a:1
    tls_config: {cert_file: %s, key_file: %s}
  - url: https://b:1
    tls_config: {cert_file: %s, key_file: %s}
`, okCrt, dsaTrad, okCrt, dsaP8), []string{
			"line 3: targets[0].tls_config.key_file: " + dsaTrad + " holds a DSA key in its private key" + weakText,
			"line 5: targets[1].tls_config.key_file: " + dsaP8 + " holds a DSA key in its private key" + weakText,
		}},
		{"oauth2 token endpoint and file_sd_configs", fmt.Sprintf(`targets:
  - url: https://a:1
    oauth2:
      client_id: c
      client_secret_file: %s
      token_url: https://idp:1/token
      tls_config: {cert_file: %s, key_file: %s}
file_sd_configs:
  - files: [sd/*.yml]
    tls_config: {cert_file: %s, key_file: %s}
`, okKey, weakCrt, okKey, okCrt, weakKey), []string{
			"line 7: targets[0].oauth2.tls_config.cert_file: " + rsa512(weakCrt, "certificate (CN=rsa512)"),
			"line 10: file_sd_configs[0].tls_config.key_file: " + rsa512(weakKey, "private key"),
		}},
		{"remote_write, files relative to the config", `remote_write:
  - url: https://store:1/api/v1/write
    tls_config: {cert_file: rsa512.crt, key_file: rsa2048.key}
`, []string{
			"line 3: remote_write[0].tls_config.cert_file: " + rsa512(weakCrt, "certificate (CN=rsa512)"),
		}},
		{"inline certificate", fmt.Sprintf("targets:\n  - url: https://a:1\n    tls_config:\n      cert: |\n%s\n      key_file: %s\n", indent(weakPEM), okKey), []string{
			"line 4: targets[0].tls_config.cert: holds a 512-bit RSA key in its certificate (CN=rsa512)" + weakText,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "kvwatch.yml")
			if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			want := ""
			switch len(c.want) {
			case 0:
			case 1:
				want = path + ": " + c.want[0]
			default:
				want = fmt.Sprintf("%s: %d problems:\n  %s", path, len(c.want), strings.Join(c.want, "\n  "))
			}
			if got := fmt.Sprint(err); (err == nil) != (want == "") || (err != nil && got != want) {
				t.Errorf("Load:\n%v\nwant:\n%s", err, want)
			}
			// serve, status and top read the config through LoadTargets.
			if _, err2 := LoadTargets(Sources{File: path}); fmt.Sprint(err2) != fmt.Sprint(err) {
				t.Errorf("LoadTargets = %v, want Load's %v", err2, err)
			}
			// A stack generated for elsewhere checks inline PEM only.
			_, err = LoadWithoutFiles(path)
			if inline := strings.HasPrefix(c.name, "inline"); (err != nil) != inline {
				t.Errorf("LoadWithoutFiles = %v, want an error only for inline keys", err)
			}
		})
	}

	// Remote writes from flags are checked where serve prepares them.
	rw := func(url, crt, key string) RemoteWrite {
		r := DefaultRemoteWrite()
		r.URL, r.HTTPClientConfig.TLSConfig = url, promcfg.TLSConfig{CertFile: crt, KeyFile: key}
		return r
	}
	err = CheckRemoteWrites([]RemoteWrite{rw("https://store:1/w", weakCrt, weakKey), rw("https://store:2/w", okCrt, okKey)},
		model.Duration(DefaultScrapeInterval), "--remote-write.url")
	want := "--remote-write.url: 2 problems:\n" +
		"  remote_write[0].tls_config.cert_file: " + rsa512(weakCrt, "certificate (CN=rsa512)") + "\n" +
		"  remote_write[0].tls_config.key_file: " + rsa512(weakKey, "private key")
	if err == nil || err.Error() != want {
		t.Errorf("CheckRemoteWrites:\n%v\nwant:\n%s", err, want)
	}
}
