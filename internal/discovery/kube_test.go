package discovery_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kvwatch/kvwatch/internal/app"
	"github.com/kvwatch/kvwatch/internal/cli"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/discovery"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestMain sets klog's logger before any informer runs: it may not change
// while one logs, and TestStatusDiscovers' cli.Run sets it again (which
// then only swaps where it forwards).
func TestMain(m *testing.M) {
	discovery.LogKubernetesClient(slog.New(slog.DiscardHandler))
	os.Exit(m.Run())
}

// The engines are simulated servers on loopback; every pod's IP is
// 127.0.0.1 and its metrics port is its engine's port, so each pod has a
// port of its own.

// enginePage is an SGLang page (KV used 750 tokens).
func enginePage(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "serve", "testdata", "sglang-dp2.prom"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// portOf is the port of a test server.
func portOf(s *httptest.Server) int32 {
	var p int32
	fmt.Sscanf(s.URL[strings.LastIndex(s.URL, ":")+1:], "%d", &p)
	return p
}

// kube is a test's API server with the kubelet's part played by hand.
type kube struct {
	*testenv.Kube
	t testing.TB
}

// pod creates a pod whose one container has port (named portName) and,
// when ip is set, writes its status as a kubelet would: running, with ip.
func (k kube) pod(ns, name, ip string, labels, annotations map[string]string, portName string, port int32) {
	k.t.Helper()
	if err := k.createPod(ns, name, ip, labels, annotations, portName, port); err != nil {
		k.t.Fatal(err)
	}
}

func (k kube) createPod(ns, name, ip string, labels, annotations map[string]string, portName string, port int32) error {
	ctx := context.Background()
	p, err := k.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "engine", Image: "vllm/vllm-openai",
			Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: port}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
	}
	if ip == "" {
		return nil
	}
	now := metav1.Now()
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, HostIP: ip, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if _, err := k.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pod %s/%s's status: %w", ns, name, err)
	}
	return nil
}

func (k kube) deletePod(ns, name string) {
	k.t.Helper()
	zero := int64(0)
	if err := k.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		k.t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}

func (k kube) namespace(ns string) {
	k.t.Helper()
	if _, err := k.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		k.t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// kubeconfig writes a kubeconfig for server with token, trusting k's CA.
func (k kube) kubeconfig(server, token string) string {
	k.t.Helper()
	return k.kubeconfigCA(server, token, k.CA)
}

// kubeconfigCA is kubeconfig trusting ca instead.
func (k kube) kubeconfigCA(server, token string, ca []byte) string {
	k.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	p := filepath.Join(k.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		k.t.Fatal(err)
	}
	return p
}

// served is a running serve.
type served struct {
	*app.Serve
	reg  *prometheus.Registry
	logs *testenv.Buffer
}

// example returns the example's kubernetes_sd_configs entries.
func example(t testing.TB) *config.Config {
	t.Helper()
	ex, err := config.Load(filepath.Join("..", "..", "examples", "kubernetes-discovery.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// serve runs serve with the entries, watching ns through kubeconfig, and
// one static target, until the test ends; targets are scraped every
// second, history is off.
func serve(t *testing.T, kubeconfig, ns string, static *httptest.Server, entries ...config.KubernetesSD) *served {
	t.Helper()
	c := config.Default()
	c.Global.Labels = map[string]string{"cluster": "prod-east"}
	c.Global.ScrapeInterval, c.Global.ScrapeTimeout = model.Duration(time.Second), model.Duration(time.Second)
	c.Targets = []config.Target{{Name: "static", URL: static.URL}}
	for _, e := range entries {
		e.Config.KubeConfig = kubeconfig
		e.Config.NamespaceDiscovery.Names = []string{ns}
		c.KubernetesSD = append(c.KubernetesSD, e)
	}
	off := time.Duration(0)
	s := &served{reg: prometheus.NewRegistry(), logs: &testenv.Buffer{}}
	var err error
	s.Serve, err = app.New(app.Options{Sources: config.Sources{Config: c}, ListenAddresses: []string{"127.0.0.1:0"},
		Registry: s.reg, History: &off, Logger: slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.logs)
		}
	})
	return s
}

// up reports whether server's target exists with labels and its last
// scrape succeeded.
func (s *served) up(t testing.TB, server string, labels map[string]string) bool {
	want := map[string]string{"server": server}
	for k, v := range labels {
		want[k] = v
	}
	v, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, want)
	return ok && v == 1
}

// gone reports whether server has no series left.
func (s *served) gone(t testing.TB, server string) bool {
	_, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetUp.Name, map[string]string{"server": server})
	return !ok
}

// waitFor polls cond until it holds, failing after limit.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
	}
}

// discoveryWait bounds the wait for a change to reach the targets: the
// manager's 5 s batch, a 1 s scrape, and a loaded machine.
const discoveryWait = 60 * time.Second

// serve follows pods: llm-d prefill and decode pods and an annotated one
// are scraped with their roles and pools, an LWS worker is not; a new
// pod is added, a deleted one goes; the same after the API server
// restarts; the static target is scraped throughout. A pod without an
// IP and a port that is not a metrics page are each a log line and a
// metric.
func TestKubernetesDiscovery(t *testing.T) {
	k := kube{testenv.KubeAPIServer(t, testenv.KubeRBAC), t}
	const ns = "inference"
	k.namespace(ns)
	page := enginePage(t)
	var engines []*httptest.Server
	for range 6 {
		engines = append(engines, testenv.EngineServer(t, "", page))
	}
	static := testenv.EngineServer(t, "", page)
	llmd := func(role string, extra ...string) map[string]string {
		l := map[string]string{"llm-d.ai/role": role, "llm-d.ai/model": "qwen3-8b", "llm-d.ai/inferenceServing": "true"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	const ip = "127.0.0.1"
	k.pod(ns, "ms-decode-0", ip, llmd("decode"), nil, "metrics", portOf(engines[0]))
	k.pod(ns, "ms-prefill-0", ip, llmd("prefill"), nil, "metrics", portOf(engines[1]))
	k.pod(ns, "lws-0-1", ip, llmd("decode", "leaderworkerset.sigs.k8s.io/worker-index", "1"), nil, "metrics", portOf(engines[2]))
	k.pod(ns, "sglang-0", ip, map[string]string{"kvwatch.io/role": "unified"},
		map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": fmt.Sprint(portOf(engines[3]))}, "http", portOf(engines[3]))

	ex := example(t)
	s := serve(t, k.Kubeconfig, ns, static, ex.KubernetesSD[0], ex.KubernetesSD[4])
	qwen := map[string]string{"pool": "qwen3-8b", signal.LabelCluster: "prod-east"}
	waitFor(t, discoveryWait, "the discovered pods' targets", func() bool {
		return s.up(t, "inference/ms-decode-0", map[string]string{"role": "decode", "pool": "qwen3-8b", signal.LabelCluster: "prod-east"}) &&
			s.up(t, "inference/ms-prefill-0", map[string]string{"role": "prefill", "pool": "qwen3-8b"}) &&
			s.up(t, "inference/sglang-0", map[string]string{"role": "unified"}) && s.up(t, "static", nil)
	})
	if !s.gone(t, "inference/lws-0-1") {
		t.Errorf("an LWS worker (worker index 1) is scraped; only the leader serves /metrics")
	}
	if got, _ := testenv.Value(t, s.Daemon().Gatherer(), signal.KVUsedTokens.Name, map[string]string{"server": "inference/ms-decode-0", "role": "decode"}); got != 750 {
		t.Errorf("decode pod's KV used = %g, want the page's 750", got)
	}
	if got, _ := testenv.Value(t, s.reg, signal.DiscoveryTargets.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]"}); got != 2 {
		t.Errorf("%s of the llm-d entry = %g, want 2", signal.DiscoveryTargets.Name, got)
	}
	if got, _ := testenv.Value(t, s.reg, signal.DiscoveryKubernetesUp.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]"}); got != 1 {
		t.Errorf("%s = %g, want 1", signal.DiscoveryKubernetesUp.Name, got)
	}

	k.pod(ns, "ms-decode-1", ip, llmd("decode"), nil, "metrics", portOf(engines[4])) // a scale-up
	waitFor(t, discoveryWait, "the new decode pod", func() bool { return s.up(t, "inference/ms-decode-1", qwen) })
	k.deletePod(ns, "ms-decode-0")
	waitFor(t, discoveryWait, "the deleted pod's target to go", func() bool { return s.gone(t, "inference/ms-decode-0") })

	// A pod without an IP yet, and one whose port answers something else
	// than metrics.
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>a model card, not metrics</body></html>")
	}))
	t.Cleanup(web.Close)
	k.pod(ns, "ms-decode-pending", "", llmd("decode"), nil, "metrics", 8200)
	k.pod(ns, "ms-decode-web", ip, llmd("decode"), nil, "metrics", portOf(web))
	waitFor(t, discoveryWait, "the pod without an IP in the log and the metric", func() bool {
		n, _ := testenv.Value(t, s.reg, signal.DiscoveryPodsWithoutIP.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]"})
		return n == 1 && strings.Contains(s.logs.String(), "kubernetes_sd_configs[0]: 1 pods have no IP yet, so no target") &&
			strings.Contains(s.logs.String(), "pods=inference/ms-decode-pending")
	})
	waitFor(t, discoveryWait, "the non-metrics port to be down with reason not_metrics", func() bool {
		v, ok := testenv.Value(t, s.Daemon().Gatherer(), signal.TargetScrapeError.Name, map[string]string{"server": "inference/ms-decode-web", "reason": "not_metrics"})
		return ok && v == 1 && strings.Contains(s.logs.String(), `msg="target down" target=inference/ms-decode-web`)
	})

	// The API server restarts: the discoverers watch again, and follow.
	k.Restart(t)
	k.pod(ns, "ms-decode-2", ip, llmd("decode"), nil, "metrics", portOf(engines[5]))
	k.deletePod(ns, "ms-prefill-0")
	waitFor(t, discoveryWait, "a pod created after the restart", func() bool { return s.up(t, "inference/ms-decode-2", qwen) })
	waitFor(t, discoveryWait, "a pod deleted after the restart to go", func() bool { return s.gone(t, "inference/ms-prefill-0") })
	for _, server := range []string{"static", "inference/ms-decode-1", "inference/sglang-0"} {
		if !s.up(t, server, nil) {
			t.Errorf("%s is not up after the API server's restart", server)
		}
	}
}

// What goes wrong between serve and the API server is one clear log line
// and a metric per entry, and the static target is scraped meanwhile.
func TestKubernetesDiscoveryFailures(t *testing.T) {
	k := kube{testenv.KubeAPIServer(t, testenv.KubeRBAC), t}
	const ns = "inference"
	k.namespace(ns)
	static := testenv.EngineServer(t, "", enginePage(t))
	nobody := "https://" + testenv.FreeAddr(t)
	for _, tc := range []struct {
		name, kubeconfig, reason, log string
	}{
		{"unreachable", k.kubeconfig(nobody, k.AdminToken), "unreachable",
			"service discovery: kubernetes_sd_configs[0]: cannot reach the Kubernetes API at " + nobody + ": "},
		{"unauthorized", k.kubeconfig(k.URL, "not-a-token"), "unauthorized",
			"service discovery: kubernetes_sd_configs[0]: the Kubernetes API at " + k.URL + " refuses kvwatch's credentials: "},
		{"another CA", k.kubeconfigCA(k.URL, k.AdminToken, otherCA(t)), "other",
			"service discovery: kubernetes_sd_configs[0]: listing pods in namespace inference at " + k.URL + ": "},
		{"forbidden", k.kubeconfig(k.URL, k.UserToken), "forbidden",
			"service discovery: kubernetes_sd_configs[0]: kvwatch may not list pods in namespace inference: pods is forbidden: User \\\"" + testenv.KubeUser + "\\\" cannot list resource \\\"pods\\\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serve(t, tc.kubeconfig, ns, static, example(t).KubernetesSD[0])
			set := map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]"}
			waitFor(t, discoveryWait, "the failure's log line and metrics", func() bool {
				up, okUp := testenv.Value(t, s.reg, signal.DiscoveryKubernetesUp.Name, set)
				n, _ := testenv.Value(t, s.reg, signal.DiscoveryKubernetesFailures.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]", "reason": tc.reason})
				return okUp && up == 0 && n >= 1 && strings.Contains(s.logs.String(), tc.log)
			})
			waitFor(t, discoveryWait, "the static target", func() bool { return s.up(t, "static", nil) })
			if n := strings.Count(s.logs.String(), tc.log); n != 1 {
				t.Errorf("the failure is logged %d times, want once", n)
			}
			if !strings.Contains(s.logs.String(), "level=ERROR") {
				t.Errorf("the failure is not logged as an error")
			}
		})
	}
}

// A selector that matches far more pods than the entry's target_limit (the
// prometheus.io entry over a namespace of annotated pods) is refused: an
// error, the over_limit metric, at most the limit scraped, the static
// target scraped; it takes bounded time. docs/benchmarks.md has the
// 10,000-pod run (scale_test.go).
func TestKubernetesDiscoveryOverLimit(t *testing.T) {
	k := kube{testenv.KubeAPIServer(t, testenv.KubeAlwaysAllow), t}
	const ns, pods, limit = "mistake", 300, 200
	k.namespace(ns)
	page := enginePage(t)
	engine := testenv.EngineServer(t, "", page)
	start := time.Now()
	createPods(t, k, ns, pods, func(i int) (map[string]string, int32) {
		return map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": fmt.Sprint(portOf(engine))}, portOf(engine)
	})
	t.Logf("%d pods created in %v", pods, time.Since(start))
	e := example(t).KubernetesSD[4]
	e.TargetLimit = limit
	s := serve(t, k.Kubeconfig, ns, testenv.EngineServer(t, "", page), e)
	want := fmt.Sprintf("service discovery: kubernetes_sd_configs[0]: found %d targets, over its target_limit %d: kvwatch keeps the ", pods, limit)
	start = time.Now()
	waitFor(t, discoveryWait, "the over-limit error and metric", func() bool {
		n, _ := testenv.Value(t, s.reg, signal.DiscoveryDroppedTargets.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]", "reason": "over_limit"})
		return n == pods && strings.Contains(s.logs.String(), want)
	})
	t.Logf("over-limit reported %v after serve started", time.Since(start))
	if n, _ := testenv.Value(t, s.reg, signal.DiscoveryTargets.Name, map[string]string{signal.LabelSDConfig: "kubernetes_sd_configs[0]"}); n > limit {
		t.Errorf("%s = %g, over the limit %d", signal.DiscoveryTargets.Name, n, limit)
	}
	waitFor(t, discoveryWait, "the static target", func() bool { return s.up(t, "static", nil) })
}

// createPods creates n running pods on 127.0.0.1 in ns, with the
// annotations and port each gets.
func createPods(t testing.TB, k kube, ns string, n int, of func(i int) (map[string]string, int32)) {
	t.Helper()
	createEach(t, n, func(i int) error {
		a, port := of(i)
		return k.createPod(ns, fmt.Sprintf("pod-%05d", i), "127.0.0.1", nil, a, "http", port)
	})
}

// createEach runs create(i) for every i below n, 32 at a time, and fails
// the test with the first error.
func createEach(t testing.TB, n int, create func(i int) error) {
	t.Helper()
	work := make(chan int)
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := create(i); err != nil {
					errs <- err
					for range work { // let the others finish
					}
					return
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// status --config.file lists the pods service discovery finds, with their
// roles; with an API server that does not answer, it says so after
// DefaultOnceTimeout and shows the other targets.
func TestStatusDiscovers(t *testing.T) {
	k := kube{testenv.KubeAPIServer(t, testenv.KubeAlwaysAllow), t}
	const ns = "inference"
	k.namespace(ns)
	page := enginePage(t)
	decode, prefill, static := testenv.EngineServer(t, "", page), testenv.EngineServer(t, "", page), testenv.EngineServer(t, "", page)
	for _, p := range []struct {
		name, role string
		port       int32
	}{{"ms-decode-0", "decode", portOf(decode)}, {"ms-prefill-0", "prefill", portOf(prefill)}} {
		k.pod(ns, p.name, "127.0.0.1", map[string]string{"llm-d.ai/role": p.role, "llm-d.ai/model": "qwen3-8b"}, nil, "metrics", p.port)
	}
	dir := t.TempDir()
	file := func(kubeconfig string) string {
		f := filepath.Join(dir, "kvwatch.yml")
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "kubernetes-discovery.yml"))
		if err != nil {
			t.Fatal(err)
		}
		// The llm-d entry of the example, watching ns through kubeconfig.
		y := string(b)
		y = y[:strings.Index(y, "  # NVIDIA Dynamo")]
		y = strings.Replace(y, "  - role: pod\n    selectors:", "  - role: pod\n    kubeconfig_file: "+kubeconfig+"\n    namespaces: {names: ["+ns+"]}\n    selectors:", 1)
		y += fmt.Sprintf("targets: [{name: static, url: %q}]\n", static.URL)
		if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	status := func(f string) (int, string, string) {
		var out, errs bytes.Buffer
		code := cli.Run(context.Background(), []string{"status", "--config.file", f, "-o", "json"}, cli.Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs})
		return code, out.String(), errs.String()
	}
	code, out, errs := status(file(k.Kubeconfig))
	var r struct {
		Servers []struct{ Name, Role string }
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("status = %d (%v), stderr:\n%s", code, err, errs)
	}
	got := map[string]string{}
	for _, s := range r.Servers {
		got[s.Name] = s.Role
	}
	want := map[string]string{"static": "unified", "inference/ms-decode-0": "decode", "inference/ms-prefill-0": "prefill"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status' servers (-want +got):\n%s\nstderr:\n%s", diff, errs)
	}

	start := time.Now()
	code, out, errs = status(file(k.kubeconfig("https://"+testenv.FreeAddr(t), k.AdminToken)))
	if took := time.Since(start); took > discovery.DefaultOnceTimeout+30*time.Second {
		t.Errorf("status with an unreachable API server took %v", took)
	}
	if code != 0 || !strings.Contains(out, `"name": "static"`) {
		t.Errorf("status with an unreachable API server = %d, want 0 and the static target:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, want := range []string{"service discovery: kubernetes_sd_configs[0]: cannot reach the Kubernetes API at",
		"service discovery: kubernetes_sd_configs[0] (cannot reach the Kubernetes API at"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(errs, "did not answer within 10s; showing the targets found so far") {
		t.Errorf("stderr does not say that discovery timed out:\n%s", errs)
	}
}

// otherCA is the PEM certificate of a CA that signed nothing k serves.
func otherCA(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
