package stack

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// k8sDocs splits a generated multi-document manifest.
func k8sDocs(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// k8sDecode decodes the manifest document of the given kind into v.
func k8sDecode(t *testing.T, file []byte, kind string, v any) {
	t.Helper()
	for _, d := range k8sDocs(t, file) {
		var tm struct{ Kind string }
		if err := yaml.Unmarshal(d, &tm); err != nil {
			t.Fatal(err)
		}
		if tm.Kind == kind {
			if err := yaml.UnmarshalStrict(d, v); err != nil {
				t.Fatalf("decode %s: %v", kind, err)
			}
			return
		}
	}
	t.Fatalf("no %s in manifest", kind)
}

// TestKubernetesLabelsAndProbes: --kubernetes.labels reaches every object
// (the Prometheus Operator selects on release=...), while selectors keep the
// app label only; the probes use the health endpoints; resources are set.
func TestKubernetesLabelsAndProbes(t *testing.T) {
	o := Options{KubernetesLabels: map[string]string{"release": "kube-prometheus-stack", "team": "inference"}}
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"kubernetes/kvwatch.yaml", "kubernetes/servicemonitor.yaml", "kubernetes/podmonitor.yaml",
		"kubernetes/prometheusrule.yaml", "kubernetes/dashboards.yaml"} {
		for i, d := range k8sDocs(t, files.Get(p)) {
			var m struct {
				Kind     string
				Metadata struct{ Labels map[string]string }
			}
			if err := yaml.Unmarshal(d, &m); err != nil {
				t.Fatal(err)
			}
			if m.Metadata.Labels["release"] != "kube-prometheus-stack" || m.Metadata.Labels["team"] != "inference" ||
				m.Metadata.Labels[k8sAppLabel] != "kvwatch" {
				t.Errorf("%s document %d (%s): labels %v, want release, team and %s", p, i, m.Kind, m.Metadata.Labels, k8sAppLabel)
			}
		}
	}
	var dep appsv1.Deployment
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "Deployment", &dep)
	if len(dep.Spec.Selector.MatchLabels) != 1 || len(dep.Spec.Template.Labels) != 1 {
		t.Errorf("selector %v, pod labels %v: want only %s (a selector is immutable)", dep.Spec.Selector.MatchLabels, dep.Spec.Template.Labels, k8sAppLabel)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/-/ready" {
		t.Errorf("readiness probe %+v, want GET /-/ready", c.ReadinessProbe)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/-/healthy" {
		t.Errorf("liveness probe %+v, want GET /-/healthy", c.LivenessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	var sm monitoringv1.ServiceMonitor
	k8sDecode(t, files.Get("kubernetes/servicemonitor.yaml"), "ServiceMonitor", &sm)
	var svc corev1.Service
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "Service", &svc)
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service has %v", k, v, svc.Labels)
		}
	}

	for _, bad := range []map[string]string{{"release": "has space"}, {"-bad-key": "x"}, {k8sAppLabel: "other"}} {
		if _, err := Generate(Options{KubernetesLabels: bad}); err == nil || !strings.Contains(err.Error(), "--kubernetes.labels") {
			t.Errorf("Generate with labels %v: err = %v, want a --kubernetes.labels error", bad, err)
		}
	}
}

// TestKubernetesDeploymentStarts (issue 15 item 1): the generated
// Deployment's container args, run by the real kvwatch binary, pass serve's
// startup checks and serve the probes' paths on the container port. The
// pod listens on ":9477" (every interface); the test keeps those exact
// args and runs them in a new network namespace (`unshare -rn`) whose only
// interface is loopback, so nothing listens beyond this machine's loopback.
// The only substitution is the ConfigMap mount: /etc/kvwatch/kvwatch.yml
// becomes the generated kvwatch.yml in a temporary directory.
func TestKubernetesDeploymentStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvwatch; skipped with -short")
	}
	unshare := testenv.Tool(t, "util-linux", "unshare")
	curl := testenv.Tool(t, "curl", "curl")
	ip := testenv.Tool(t, "iproute2", "ip")
	if out, err := exec.Command(unshare, "-rn", "true").CombinedOutput(); err != nil {
		msg := fmt.Sprintf("unshare -rn (a user and network namespace) does not work here: %v %s", err, out)
		if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	files, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "Deployment", &dep)
	var cm corev1.ConfigMap
	k8sDecode(t, files.Get("kubernetes/kvwatch.yaml"), "ConfigMap", &cm)
	c := dep.Spec.Template.Spec.Containers[0]
	if len(c.VolumeMounts) != 1 {
		t.Fatalf("volume mounts %v: the test substitutes exactly one", c.VolumeMounts)
	}
	dir := t.TempDir()
	bin := buildKVWatch(t, dir)
	mount := c.VolumeMounts[0].MountPath
	local := filepath.Join(dir, "etc")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(local, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = strings.ReplaceAll(a, mount+"/", local+"/")
	}
	port := c.Ports[0].ContainerPort
	url := func(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", port, path) }

	// In the namespace: bring lo up, start serve with the args, wait for the
	// readiness path, then ask the liveness path; print both status codes.
	script := `set -u
"$IP" link set lo up || exit 90
"$@" 2>serve.log &
pid=$!
ready=000
for i in $(seq 150); do
  ready=$("$CURL" -s -o /dev/null -w '%{http_code}' "$READY") && [ "$ready" = 200 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
healthy=$("$CURL" -s -o /dev/null -w '%{http_code}' "$HEALTHY")
kill $pid 2>/dev/null
wait $pid
echo "ready=$ready healthy=$healthy exit=$?"
cat serve.log >&2
`
	runNS := func(args []string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, unshare, append([]string{"-rn", "sh", "-c", script, "sh", bin}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "IP="+ip, "CURL="+curl,
			"READY="+url(c.ReadinessProbe.HTTPGet.Path), "HEALTHY="+url(c.LivenessProbe.HTTPGet.Path))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("unshare: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		return strings.TrimSpace(stdout.String()), stderr.String()
	}
	out, logs := runNS(args)
	// serve exits 0 on SIGTERM... or is killed; either way it served both paths.
	if !strings.HasPrefix(out, "ready=200 healthy=200 ") {
		t.Errorf("kvwatch %s in a network namespace: %s, want ready=200 healthy=200\nserve log:\n%s", strings.Join(args, " "), out, logs)
	}
	if !strings.Contains(logs, "INSECURE") {
		t.Errorf("serve with --web.insecure-listen logged no warning:\n%s", logs)
	}

	// The same args without --web.insecure-listen are refused by the
	// listen rule: the test above exercises it.
	var strict []string
	for _, a := range args {
		if a != "--web.insecure-listen" {
			strict = append(strict, a)
		}
	}
	if len(strict) == len(args) {
		t.Fatalf("args %v have no --web.insecure-listen", args)
	}
	out, logs = runNS(strict)
	if !strings.HasPrefix(out, "ready=000 healthy=000 exit=2") || !strings.Contains(logs, "is not loopback") {
		t.Errorf("kvwatch %s: %s, want exit 2 with a not-loopback error\n%s", strings.Join(strict, " "), out, logs)
	}
}

// kubectlValidateDir is where tools/kubectl-validate/build.sh puts
// kubectl-validate and the Prometheus Operator CRDs:
// $KVWATCH_KUBECTL_VALIDATE_DIR, or bin/kubectl-validate at the repo root.
func kubectlValidateDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("KVWATCH_KUBECTL_VALIDATE_DIR")
	if d == "" {
		d = filepath.Join("..", "..", "bin", "kubectl-validate")
	}
	d, err := filepath.Abs(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "crds", "keda.sh_scaledobjects.yaml")); err != nil {
		msg := "kubectl-validate and the CRDs (KEDA's too) not built in " + d + "; run `make kubectl-validate` (tools/kubectl-validate/build.sh)"
		if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return d
}

// TestKubernetesManifestsValidate (issue 15 item 2) validates every generated
// manifest offline with kubectl-validate against Kubernetes 1.30's schemas
// (the autoscaling/v2 HPAs among them), the Prometheus Operator CRDs
// generated from the operator API module the manifests are built with and
// KEDA's CRDs from its module (the ScaledObjects); a manifest with a wrong
// type is refused.
func TestKubernetesManifestsValidate(t *testing.T) {
	d := kubectlValidateDir(t)
	validate := func(dir string) (string, error) {
		cmd := exec.Command(filepath.Join(d, "kubectl-validate"), "--local-crds", filepath.Join(d, "crds"), "--version", "1.30", dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, o := range map[string]Options{"default": {}, "golden": goldenOptions(),
		"labels": {KubernetesLabels: map[string]string{"release": "kube-prometheus-stack"}}} {
		_, dir := generateDir(t, o)
		if out, err := validate(filepath.Join(dir, "kubernetes")); err != nil {
			t.Errorf("%s: kubectl-validate: %v\n%s", name, err, out)
		}
	}
	_, dir := generateDir(t, Options{})
	p := filepath.Join(dir, "kubernetes", "servicemonitor.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "interval: 15s", "interval: every-15s", 1)
	if bad == string(b) {
		t.Fatal("servicemonitor.yaml has no interval: 15s to tamper with")
	}
	if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := validate(filepath.Join(dir, "kubernetes")); err == nil || !strings.Contains(out, "interval") {
		t.Errorf("kubectl-validate accepted a ServiceMonitor interval of every-15s: %v\n%s", err, out)
	}

	// The autoscalers: a ScaledObject or HPA with a wrong field is
	// refused, so the schemas are really in use.
	for _, c := range []struct{ file, from, to, want string }{
		{KEDAFile, "minReplicaCount: 1", "minReplicaCount: one", "minReplicaCount"},
		{KEDAFile, "  triggers:", "  trigger:", "trigger"},
		{HPAFile, "maxReplicas: 8", "maxReplicas: eight", "maxReplicas"},
		{HPAFile, "minReplicas: 1", "minReplicas: one", "minReplicas"},
	} {
		_, dir := generateDir(t, goldenOptions())
		p := filepath.Join(dir, filepath.FromSlash(c.file))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad := strings.Replace(string(b), c.from, c.to, 1)
		if bad == string(b) {
			t.Fatalf("%s has no %q to tamper with", c.file, c.from)
		}
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := validate(p); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("kubectl-validate accepted %s with %q: %v\n%s", c.file, c.to, err, out)
		}
	}
}
