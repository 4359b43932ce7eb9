package config

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"os"

	promcfg "github.com/prometheus/common/config"
)

// The weakest keys TLS is given. Go refuses RSA keys under 1024 bits in
// every handshake (so a 512-bit certificate loads, then every connection
// fails), and 2048 bits is the floor of every current guideline; DSA is not
// in TLS 1.3 and not in Go's TLS at all; P-224 is the one curve Go parses
// that is below P-256.
const (
	MinRSABits = 2048
	MinECBits  = 256
)

// weakKeyFix is how to fix a weak key, for every message that names one.
const weakKeyFix = "make a new key (`openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072`, or an ECDSA P-256 key with `-algorithm EC -pkeyopt ec_paramgen_curve:P-256`) and a certificate for it"

// CheckTLSKeyFile returns an error naming file when a certificate or
// private key in it (PEM) is too weak for TLS: RSA under MinRSABits bits,
// DSA, or an elliptic curve under MinECBits bits. A file that cannot be read
// or holds no PEM is not its concern (the TLS settings' own checks are).
func CheckTLSKeyFile(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	if err := CheckTLSKeyPEM(b); err != nil {
		return fmt.Errorf("%s %w", file, err)
	}
	return nil
}

// CheckTLSKeyPEM is CheckTLSKeyFile for PEM text given inline; its error
// starts with "holds", for the caller to say what holds it.
func CheckTLSKeyPEM(b []byte) error {
	nCert := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil
		}
		what, weak := "", ""
		switch blk.Type {
		case "CERTIFICATE":
			nCert++
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				continue
			}
			what = "certificate"
			if nCert > 1 {
				what = fmt.Sprintf("certificate %d (of the chain)", nCert)
			}
			if c.Subject.CommonName != "" {
				what += fmt.Sprintf(" (CN=%s)", c.Subject.CommonName)
			}
			if c.PublicKeyAlgorithm == x509.DSA {
				weak = "a DSA key"
			} else {
				weak = weakPublicKey(c.PublicKey)
			}
		case "DSA PRIVATE KEY":
			what, weak = "private key", "a DSA key"
		default:
			what = "private key"
			weak = weakPrivateKey(blk)
		}
		if weak != "" {
			return fmt.Errorf("holds %s in its %s: TLS needs an RSA key of at least %d bits or an elliptic-curve key of at least %d bits (P-256, P-384, P-521, Ed25519), and Go refuses RSA keys under 1024 bits in every handshake, so every connection would fail; %s",
				weak, what, MinRSABits, MinECBits, weakKeyFix)
		}
	}
}

// weakPublicKey describes k when it is too weak, else "".
func weakPublicKey(k any) string {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < MinRSABits {
			return fmt.Sprintf("a %d-bit RSA key", n)
		}
	case *ecdsa.PublicKey:
		if n := k.Curve.Params().BitSize; n < MinECBits {
			return fmt.Sprintf("a %d-bit elliptic-curve key (%s)", n, k.Curve.Params().Name)
		}
	}
	return ""
}

// oidDSA is the algorithm of a DSA key in PKCS #8, which x509 does not parse.
var oidDSA = asn1.ObjectIdentifier{1, 2, 840, 10040, 4, 1}

// weakPrivateKey describes the private key in blk when it is too weak, else
// "" (also for what is not a private key, or does not parse).
func weakPrivateKey(blk *pem.Block) string {
	var k any
	var err error
	switch blk.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			var p8 struct {
				Version int
				Algo    struct{ Algorithm asn1.ObjectIdentifier }
			}
			if _, e := asn1.Unmarshal(blk.Bytes, &p8); e == nil && p8.Algo.Algorithm.Equal(oidDSA) {
				return "a DSA key"
			}
		}
	default:
		return ""
	}
	if err != nil {
		return ""
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return weakPublicKey(&k.PublicKey)
	case *ecdsa.PrivateKey:
		return weakPublicKey(&k.PublicKey)
	}
	return ""
}

// tlsKeys lists the certificates and keys of h's TLS settings (and of its
// OAuth2 token endpoint's), files and inline text, each at its path under path.
func tlsKeys(path []any, h *promcfg.HTTPClientConfig) (files []fileRef, inline []inlineRef) {
	add := func(tc *promcfg.TLSConfig, at ...any) {
		p := func(k string) []any { return append(append(append([]any{}, path...), at...), "tls_config", k) }
		files = append(files, fileRef{p("cert_file"), tc.CertFile}, fileRef{p("key_file"), tc.KeyFile})
		inline = append(inline, inlineRef{p("cert"), tc.Cert}, inlineRef{p("key"), string(tc.Key)})
	}
	add(&h.TLSConfig)
	if h.OAuth2 != nil {
		add(&h.OAuth2.TLSConfig, "oauth2")
	}
	return files, inline
}

// inlineRef is text written at a path of the config.
type inlineRef struct {
	path []any
	text string
}

// checkTLSKeys reports the weak keys of h's TLS settings: inline ones
// always, files unless v.skipFiles (relative ones resolved against dir, when
// set). A file that cannot be read is checkHTTP's to report.
func checkTLSKeys(v *validator, path []any, h *promcfg.HTTPClientConfig, dir string) {
	files, inline := tlsKeys(path, h)
	for _, f := range files {
		if v.skipFiles || f.file == "" {
			continue
		}
		if err := CheckTLSKeyFile(promcfg.JoinDir(dir, f.file)); err != nil {
			v.addf(f.path, "%v", err)
		}
	}
	for _, in := range inline {
		if err := CheckTLSKeyPEM([]byte(in.text)); err != nil {
			v.addf(in.path, "%v", err)
		}
	}
}
