package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
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
		"kubernetes/prometheusrule.yaml", "kubernetes/alertmanagerconfig.yaml", "kubernetes/dashboards.yaml"} {
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
// The only substitutions are the mounts: /etc/kvwatch/kvwatch.yml becomes
// the generated kvwatch.yml in a temporary directory, and the state volume
// (STATE_DIRECTORY) an empty one, where serve leaves its history snapshot
// when it stops.
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
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].Name != "config" || c.VolumeMounts[1].Name != "state" {
		t.Fatalf("volume mounts %v: the test substitutes config and state", c.VolumeMounts)
	}
	dir := t.TempDir()
	bin := buildKVWatch(t, dir)
	local := map[string]string{}
	for _, m := range c.VolumeMounts {
		local[m.MountPath] = filepath.Join(dir, m.Name)
		if err := os.MkdirAll(local[m.MountPath], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(local[c.VolumeMounts[0].MountPath], name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	subst := func(s string) string {
		for mount, l := range local {
			if s == mount || strings.HasPrefix(s, mount+"/") || strings.Contains(s, "="+mount+"/") {
				s = strings.Replace(s, mount, l, 1)
			}
		}
		return s
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = subst(a)
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name+"="+subst(e.Value))
	}
	state := local[c.VolumeMounts[1].MountPath]
	if want := "STATE_DIRECTORY=" + state; !slices.Contains(env, want) {
		t.Fatalf("container env %v: want %s (the state volume)", c.Env, want)
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
		cmd.Env = append(append(os.Environ(), env...), "IP="+ip, "CURL="+curl,
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
	if _, err := os.Stat(filepath.Join(state, "history.snapshot")); err != nil {
		t.Errorf("no history snapshot in the state volume after serve stopped: %v\nserve log:\n%s", err, logs)
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

// TestKubernetesManifestsValidate (issue 15 item 2; issue 31 item 4 for the
// Secret and its volume) validates every generated manifest offline with
// kubectl-validate against Kubernetes 1.30's schemas (the autoscaling/v2
// HPAs among them), the Prometheus Operator CRDs generated from the operator
// API module the manifests are built with and KEDA's CRDs from its module
// (the ScaledObjects); a manifest with a wrong type is refused.
func TestKubernetesManifestsValidate(t *testing.T) {
	kv, crds := testenv.KubectlValidate(t)
	validate := func(dir string) (string, error) {
		cmd := exec.Command(kv, "--local-crds", crds, "--version", "1.30", dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, o := range map[string]Options{"default": {}, "golden": goldenOptions(),
		"labels":                   {KubernetesLabels: map[string]string{"release": "kube-prometheus-stack"}},
		"inline secrets":           secretOptions(t, inlineSecretsFile), // the Secret, the projected volume
		"secret without file form": noFileFormOptions(t),                // kvwatch.yml in the Secret
	} {
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
		_, p := generateTampered(t, goldenOptions(), c.file, c.from, c.to)
		if out, err := validate(p); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("kubectl-validate accepted %s with %q: %v\n%s", c.file, c.to, err, out)
		}
	}
}

// TestAlertmanagerConfigMatchesAlertmanagerYML: the Operator's
// AlertmanagerConfig routes, inhibits and notifies as alertmanager.yml does
// (both read back from the generated files: alertmanager.yml as plain YAML,
// the AlertmanagerConfig strictly into the Operator's types), and every alert
// of the PrometheusRule carries the namespace the Operator's route matches.
func TestAlertmanagerConfigMatchesAlertmanagerYML(t *testing.T) {
	for name, o := range map[string]Options{"default": {}, "golden": goldenOptions(), "namespace": {Namespace: "inference"}} {
		t.Run(name, func(t *testing.T) {
			files, err := Generate(o)
			if err != nil {
				t.Fatal(err)
			}
			ns := o.WithDefaults().Namespace
			type route struct {
				Receiver       string
				GroupBy        []string `json:"group_by"`
				Matchers       []string
				GroupWait      string `json:"group_wait"`
				GroupInterval  string `json:"group_interval"`
				RepeatInterval string `json:"repeat_interval"`
				Routes         []route
			}
			var am struct {
				Route        route
				InhibitRules []struct {
					SourceMatchers []string `json:"source_matchers"`
					TargetMatchers []string `json:"target_matchers"`
					Equal          []string
				} `json:"inhibit_rules"`
				Receivers []map[string]any
			}
			if err := yaml.Unmarshal(files.Get("alertmanager.yml"), &am); err != nil {
				t.Fatal(err)
			}
			var amc monitoringv1alpha1.AlertmanagerConfig
			k8sDecode(t, files.Get("kubernetes/alertmanagerconfig.yaml"), "AlertmanagerConfig", &amc)
			if amc.Namespace != ns {
				t.Errorf("AlertmanagerConfig namespace %q, want %q", amc.Namespace, ns)
			}
			strs := func(ms []monitoringv1alpha1.Matcher) []string {
				var out []string
				for _, m := range ms {
					out = append(out, m.String())
				}
				return out
			}
			dur := func(d *monitoringv1.NonEmptyDuration) string {
				if d == nil {
					return ""
				}
				return string(*d)
			}
			var conv func(r monitoringv1alpha1.Route) route
			conv = func(r monitoringv1alpha1.Route) route {
				out := route{Receiver: r.Receiver, GroupBy: r.GroupBy, Matchers: strs(r.Matchers),
					GroupWait: dur(r.GroupWait), GroupInterval: dur(r.GroupInterval), RepeatInterval: dur(r.RepeatInterval)}
				for _, raw := range r.Routes {
					var child monitoringv1alpha1.Route
					if err := json.Unmarshal(raw.Raw, &child); err != nil {
						t.Fatal(err)
					}
					out.Routes = append(out.Routes, conv(child))
				}
				return out
			}
			if d := cmp.Diff(am.Route, conv(*amc.Spec.Route)); d != "" {
				t.Errorf("AlertmanagerConfig route differs from alertmanager.yml's (-yml +AlertmanagerConfig):\n%s", d)
			}
			if len(am.Route.Routes) < 3 {
				t.Errorf("alertmanager.yml has %d child routes, want the watchdog, critical and warning routes", len(am.Route.Routes))
			}
			if len(amc.Spec.InhibitRules) != len(am.InhibitRules) || len(am.InhibitRules) == 0 {
				t.Fatalf("%d inhibit rules, alertmanager.yml has %d", len(amc.Spec.InhibitRules), len(am.InhibitRules))
			}
			for i, in := range amc.Spec.InhibitRules {
				w := am.InhibitRules[i]
				if !slices.Equal(strs(in.SourceMatch), w.SourceMatchers) || !slices.Equal(strs(in.TargetMatch), w.TargetMatchers) || !slices.Equal(in.Equal, w.Equal) {
					t.Errorf("inhibit rule %d: %v -> %v on %v, alertmanager.yml has %v -> %v on %v", i,
						strs(in.SourceMatch), strs(in.TargetMatch), in.Equal, w.SourceMatchers, w.TargetMatchers, w.Equal)
				}
			}
			// Each receiver has the same integrations, by kind and count.
			if len(amc.Spec.Receivers) != len(am.Receivers) {
				t.Fatalf("%d receivers, alertmanager.yml has %d", len(amc.Spec.Receivers), len(am.Receivers))
			}
			for i, r := range amc.Spec.Receivers {
				w := am.Receivers[i]
				count := func(k string) int { l, _ := w[k].([]any); return len(l) }
				if r.Name != w["name"] || len(r.WebhookConfigs) != count("webhook_configs") ||
					len(r.EmailConfigs) != count("email_configs") || len(r.SlackConfigs) != count("slack_configs") {
					t.Errorf("receiver %d: %s with %d webhooks, %d e-mails, %d Slack; alertmanager.yml: %v", i, r.Name,
						len(r.WebhookConfigs), len(r.EmailConfigs), len(r.SlackConfigs), w)
				}
				for _, s := range r.SlackConfigs {
					var sec corev1.Secret
					k8sDecode(t, files.Get("kubernetes/alertmanagerconfig.yaml"), "Secret", &sec)
					if sec.Name != s.APIURL.Name || sec.StringData[s.APIURL.Key] != o.Receivers.SlackWebhookURL {
						t.Errorf("Slack API URL from secret %s key %s; the Secret is %s with %v", s.APIURL.Name, s.APIURL.Key, sec.Name, sec.StringData)
					}
				}
			}

			var pr monitoringv1.PrometheusRule
			k8sDecode(t, files.Get("kubernetes/prometheusrule.yaml"), "PrometheusRule", &pr)
			alerts := 0
			for _, g := range pr.Spec.Groups {
				for _, r := range g.Rules {
					if r.Alert != "" {
						alerts++
						if r.Labels[k8sNamespaceLabel] != ns {
							t.Errorf("alert %s: labels %v, want namespace=%s", r.Alert, r.Labels, ns)
						}
					} else if _, ok := r.Labels[k8sNamespaceLabel]; ok {
						t.Errorf("recording rule %s has a namespace label", r.Record)
					}
				}
			}
			if alerts == 0 {
				t.Error("the PrometheusRule has no alerts")
			}
		})
	}
}

// TestImageTag: a version becomes a tag a registry takes; none is dev.
func TestImageTag(t *testing.T) {
	for _, c := range []struct{ version, want string }{
		{"", "dev"},
		{"v1.2.3", "v1.2.3"},
		{"v1.2.3-4-gabc1234-dirty", "v1.2.3-4-gabc1234-dirty"},
		{"abc1234", "abc1234"},
		{"1.0.0+build.5", "1.0.0-build.5"},
		{"release/1.0", "release-1.0"},
		{"-rc.1", "rc.1"},
		{".-", "dev"},
		{"v1_2 ü", "v1_2---"},
		{strings.Repeat("a", 130), strings.Repeat("a", 128)},
	} {
		if got := ImageTag(c.version); got != c.want {
			t.Errorf("ImageTag(%q) = %q, want %q", c.version, got, c.want)
		}
	}
}
