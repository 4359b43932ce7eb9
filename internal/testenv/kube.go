// A real Kubernetes API server for tests: Debian's etcd and kube-apiserver
// built by tools/kube-apiserver/build.sh, both on loopback. There are no
// controllers, scheduler or kubelets: a test that wants a running pod
// creates it and writes its status itself, as a kubelet would.

package testenv

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeAuthorization is kube-apiserver's --authorization-mode.
type KubeAuthorization string

const (
	// KubeRBAC authorizes by Roles and RoleBindings, as clusters do:
	// KubeAdminUser may do anything, KubeUser only what a test grants it.
	KubeRBAC KubeAuthorization = "RBAC"
	// KubeAlwaysAllow lets every authenticated user do anything.
	KubeAlwaysAllow KubeAuthorization = "AlwaysAllow"
)

// The users of the API server's static token file.
const (
	// KubeAdminUser is in the group system:masters: allowed everything
	// under any authorization mode.
	KubeAdminUser = "kvwatch-test-admin"
	// KubeUser is in no group: under KubeRBAC it may do only what a
	// RoleBinding or ClusterRoleBinding made by the test grants it.
	KubeUser = "kvwatch-test-user"
)

// KubeAPIServerEnv names the kube-apiserver binary to run (make test and
// .ci/run set it to what tools/kube-apiserver/build.sh built).
const KubeAPIServerEnv = "KVWATCH_KUBE_APISERVER"

// kubeStartTimeout bounds the wait for etcd's /health and the API server's
// /readyz: about 4 s on 2 cores, many times that while a whole test run
// shares them.
const kubeStartTimeout = 3 * time.Minute

// Kube is an etcd and a kube-apiserver on loopback, stopped when the test
// ends. Its URL, CA, tokens and kubeconfig stay valid across Restart.
type Kube struct {
	// URL is the API server's https://127.0.0.1:PORT.
	URL string
	// CA is the PEM certificate of the CA kube-apiserver generated (in its
	// --cert-dir) and signed its serving certificate with.
	CA []byte
	// AdminToken and UserToken are the bearer tokens of KubeAdminUser and
	// KubeUser.
	AdminToken, UserToken string
	// Kubeconfig is the path of a kubeconfig file for KubeAdminUser: the
	// URL, the CA and the token.
	Kubeconfig string
	// Config is the client configuration of KubeAdminUser; Client is a
	// client with it.
	Config *rest.Config
	Client kubernetes.Interface

	dir       string
	etcd, api *Proc
	etcdURL   string
}

// KubeAPIServer starts etcd (Debian's etcd-server) and kube-apiserver (from
// $KVWATCH_KUBE_APISERVER, bin/kube-apiserver at the repository root, or
// PATH) on free loopback ports with authz as the authorization mode, and
// returns once /readyz answers. Their data, certificates, keys and logs
// are in a t.TempDir. A missing binary skips the test, or fails it with
// KVWATCH_REQUIRE_TOOLS=1.
//
// The API server authenticates by a static token file (KubeAdminUser,
// KubeUser) and signs service account tokens with a key made here. The
// ServiceAccount admission plugin is off: it needs each namespace's
// default ServiceAccount, which a controller would create.
func KubeAPIServer(t testing.TB, authz KubeAuthorization) *Kube {
	t.Helper()
	apiserver := kubeAPIServerBinary(t)
	etcd := Tool(t, "etcd-server", "etcd")
	k := &Kube{dir: t.TempDir(), AdminToken: randomToken(t), UserToken: randomToken(t)}
	tokens := filepath.Join(k.dir, "tokens.csv")
	writeFile(t, tokens, []byte(k.AdminToken+","+KubeAdminUser+","+KubeAdminUser+",system:masters\n"+
		k.UserToken+","+KubeUser+","+KubeUser+"\n"))
	saKey := filepath.Join(k.dir, "service-account.key")
	writeFile(t, saKey, serviceAccountKey(t))

	client, peer := FreeAddr(t), FreeAddr(t)
	k.etcdURL = "http://" + client
	k.etcd = Start(t, filepath.Join(k.dir, "etcd.log"), etcd,
		"--name=kvwatch-test",
		"--data-dir="+filepath.Join(k.dir, "etcd"),
		"--listen-client-urls="+k.etcdURL, "--advertise-client-urls="+k.etcdURL,
		"--listen-peer-urls=http://"+peer, "--initial-advertise-peer-urls=http://"+peer,
		"--initial-cluster=kvwatch-test=http://"+peer,
		"--logger=zap")
	k.waitEtcd(t)

	addr := FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	k.URL = "https://" + addr
	k.api = Start(t, filepath.Join(k.dir, "kube-apiserver.log"), apiserver,
		"--etcd-servers="+k.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+port,
		// No --tls-cert-file: kube-apiserver makes a CA and a serving
		// certificate for its advertise address here, and reuses them
		// when it restarts.
		"--cert-dir="+filepath.Join(k.dir, "certs"),
		"--token-auth-file="+tokens,
		"--anonymous-auth=false",
		"--authorization-mode="+string(authz),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		// The kubernetes Service's endpoints would be 127.0.0.1, which
		// Endpoints may not hold; nothing here reaches the API server
		// through that Service.
		"--endpoint-reconciler-type=none",
		"--profiling=false")
	k.CA = k.waitCA(t)
	k.Config = k.RESTConfig(k.AdminToken)
	c, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatalf("kube-apiserver client: %v", err)
	}
	k.Client = c
	k.Kubeconfig = k.WriteKubeconfig(t, k.AdminToken)
	k.waitReady(t)
	return k
}

// RESTConfig returns a client configuration for the API server with token
// (AdminToken, UserToken or a service account's token), verifying the
// server's certificate with CA.
func (k *Kube) RESTConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            k.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.CA},
		// A test's requests are few; client-go's default of 5 per second
		// would only slow it down.
		QPS:   1000,
		Burst: 1000,
	}
}

// WriteKubeconfig writes a kubeconfig file for the API server with token
// into a t.TempDir and returns its path.
func (k *Kube) WriteKubeconfig(t testing.TB, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kvwatch-test"] = &clientcmdapi.Cluster{Server: k.URL, CertificateAuthorityData: k.CA}
	cfg.AuthInfos["kvwatch-test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kvwatch-test"] = &clientcmdapi.Context{Cluster: "kvwatch-test", AuthInfo: "kvwatch-test"}
	cfg.CurrentContext = "kvwatch-test"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return p
}

// Stop stops the API server, then etcd. What etcd holds stays on disk for
// Restart.
func (k *Kube) Stop() {
	k.api.Stop()
	k.etcd.Stop()
}

// Restart stops the API server and etcd if they run, starts them again
// with the same ports, data, certificates and tokens, and returns once
// /readyz answers.
func (k *Kube) Restart(t testing.TB) {
	t.Helper()
	k.Stop()
	k.etcd.Restart(t)
	k.waitEtcd(t)
	k.api.Restart(t)
	k.waitReady(t)
}

// kubeAPIServerBinary returns the kube-apiserver to run: $KVWATCH_KUBE_APISERVER,
// bin/kube-apiserver/kube-apiserver at the repository root, or PATH's.
func kubeAPIServerBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(KubeAPIServerEnv); p != "" {
		if !isExecutable(p) {
			missing(t, KubeAPIServerEnv+"="+p+" is not an executable file; build it with tools/kube-apiserver/build.sh")
		}
		return p
	}
	var looked []string
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, "bin", "kube-apiserver", "kube-apiserver")
		if isExecutable(p) {
			return p
		}
		looked = append(looked, p)
	}
	if p, err := exec.LookPath("kube-apiserver"); err == nil {
		return p
	}
	missing(t, KubeAPIServerEnv+" is unset and kube-apiserver is not at "+strings.Join(append(looked, "PATH"), " nor on ")+
		"; build it with make kube-apiserver (tools/kube-apiserver/build.sh)")
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// repoRoot returns the nearest directory above the working directory (a
// test's package directory) holding kvwatch's go.mod.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/kvwatch/kvwatch\n")) {
			return dir, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// waitEtcd waits for etcd's /health.
func (k *Kube) waitEtcd(t testing.TB) {
	t.Helper()
	k.poll(t, k.etcd, "etcd "+k.etcdURL+"/health", func() error {
		return get(http.DefaultClient, k.etcdURL+"/health")
	})
}

// waitCA waits for kube-apiserver to write its certificates and returns
// the CA's: apiserver.crt in --cert-dir holds the serving certificate, then
// the CA that signed it.
func (k *Kube) waitCA(t testing.TB) []byte {
	t.Helper()
	file := filepath.Join(k.dir, "certs", "apiserver.crt")
	var ca []byte
	k.poll(t, k.api, "kube-apiserver's CA in "+file, func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		for rest := b; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				return errors.New("no CA certificate in it yet")
			}
			if c, err := x509.ParseCertificate(block.Bytes); err == nil && c.IsCA {
				ca = pem.EncodeToMemory(block)
				return nil
			}
		}
	})
	return ca
}

// waitReady waits for /readyz, asked as KubeAdminUser with the CA.
func (k *Kube) waitReady(t testing.TB) {
	t.Helper()
	hc, err := rest.HTTPClientFor(k.Config)
	if err != nil {
		t.Fatalf("kube-apiserver http client: %v", err)
	}
	k.poll(t, k.api, "kube-apiserver "+k.URL+"/readyz", func() error {
		return get(hc, k.URL+"/readyz")
	})
}

// poll calls ready every 100 ms until it returns nil, failing the test
// with p's log when p exits or kubeStartTimeout passes.
func (k *Kube) poll(t testing.TB, p *Proc, what string, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(kubeStartTimeout)
	for {
		err := ready()
		if err == nil {
			return
		}
		switch {
		case p.exited():
			t.Fatalf("waiting for %s: %s exited; the end of %s:\n%s", what, filepath.Base(p.bin), p.Log(), logTail(p.Log()))
		case time.Now().After(deadline):
			t.Fatalf("waiting for %s: not ready after %v (last error: %v); the end of %s:\n%s", what, kubeStartTimeout, err, p.Log(), logTail(p.Log()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get returns nil when url answers 200.
func get(c *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// logTail returns the last 40 lines of a log file.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

func randomToken(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// serviceAccountKey returns a new ECDSA P-256 private key in PEM, which
// kube-apiserver signs service account tokens with (ES256) and checks them
// against.
func serviceAccountKey(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
