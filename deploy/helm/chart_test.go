package helm

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// chart is the chart's directory; its files/ hold these files of `kvwatch
// stack generate`'s kubernetes/ directory, generated with the default
// options (make chart-files).
const chart = "kvwatch"

var chartFiles = []string{"alertmanagerconfig.yaml", "dashboards.yaml", "prometheusrule.yaml"}

// namespace is the release's namespace in the tests: not the generated
// manifests' default (monitoring), so that every namespace the chart writes
// is seen to come from the release.
const namespace = "observability"

// TestChartFilesAreGenerated: the chart's rules, Alertmanager routes and
// dashboards are exactly what the code generates today.
func TestChartFilesAreGenerated(t *testing.T) {
	files, err := stack.Generate(stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range chartFiles {
		want := files.Get("kubernetes/" + f)
		if want == nil {
			t.Fatalf("kvwatch stack generate writes no kubernetes/%s", f)
		}
		got, err := os.ReadFile(filepath.Join(chart, "files", f))
		if err != nil {
			t.Errorf("%v: run make chart-files", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/files/%s differs from kubernetes/%s of `kvwatch stack generate`: run make chart-files (-chart +generated):\n%s",
				chart, f, f, cmp.Diff(string(got), string(want)))
		}
	}
	entries, err := os.ReadDir(filepath.Join(chart, "files"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(chartFiles, e.Name()) {
			t.Errorf("%s/files/%s is not one of the generated files %v", chart, e.Name(), chartFiles)
		}
	}
}

// rendered is the output of `helm template`, its documents by kind.
type rendered struct {
	text string
	docs map[string][][]byte
}

// helmTemplate renders the chart as release kvwatch in namespace.
func helmTemplate(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm, append([]string{"template", "kvwatch", chart, "--namespace", namespace}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return errb.String(), err
	}
	return out.String(), nil
}

func parse(t *testing.T, text string) rendered {
	t.Helper()
	r := rendered{text: text, docs: map[string][][]byte{}}
	for _, d := range strings.Split(text, "\n---\n") {
		var m struct{ Kind string }
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, d)
		}
		if m.Kind != "" {
			r.docs[m.Kind] = append(r.docs[m.Kind], []byte(d))
		}
	}
	return r
}

// objects decodes every rendered object of kind strictly into T.
func objects[T any](t *testing.T, r rendered, kind string) []T {
	t.Helper()
	var out []T
	for _, d := range r.docs[kind] {
		var v T
		if err := yaml.UnmarshalStrict(d, &v); err != nil {
			t.Fatalf("decode %s: %v", kind, err)
		}
		out = append(out, v)
	}
	return out
}

// one decodes the only rendered object of kind.
func one[T any](t *testing.T, r rendered, kind string) T {
	t.Helper()
	objs := objects[T](t, r, kind)
	if len(objs) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(objs), kind)
	}
	return objs[0]
}

// kvwatchConfig returns the ConfigMap of kvwatch.yml: the one that is no
// dashboard.
func kvwatchConfig(t *testing.T, r rendered) corev1.ConfigMap {
	t.Helper()
	var out []corev1.ConfigMap
	for _, cm := range objects[corev1.ConfigMap](t, r, "ConfigMap") {
		if cm.Labels["grafana_dashboard"] == "" {
			out = append(out, cm)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d ConfigMaps besides the dashboards, want 1", len(out))
	}
	return out[0]
}

// generatedObject decodes the document of kind in a generated manifest.
func generatedObject[T any](t *testing.T, file []byte, kind string) []T {
	t.Helper()
	return objects[T](t, parse(t, string(file)), kind)
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestChartRenders renders the chart for each values file, validates the
// output with kubectl-validate and compares it with the manifests of
// `kvwatch stack generate` for the same namespace: the Deployment's
// container and pod settings, the rules, the Alertmanager routes and the
// dashboards.
func TestChartRenders(t *testing.T) {
	helm := testenv.Helm(t)
	kv, crds := testenv.KubectlValidate(t)
	gen, err := stack.Generate(stack.Options{Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	genDep := generatedObject[appsv1.Deployment](t, gen.Get("kubernetes/kvwatch.yaml"), "Deployment")[0]
	genPR := generatedObject[monitoringv1.PrometheusRule](t, gen.Get("kubernetes/prometheusrule.yaml"), "PrometheusRule")[0]
	genAMC := generatedObject[monitoringv1alpha1.AlertmanagerConfig](t, gen.Get("kubernetes/alertmanagerconfig.yaml"), "AlertmanagerConfig")[0]
	genDash := generatedObject[corev1.ConfigMap](t, gen.Get("kubernetes/dashboards.yaml"), "ConfigMap")

	const defaultImage = "ghcr.io/kvwatch/kvwatch:dev" // the chart's appVersion in this directory
	for _, c := range []struct {
		name string
		args []string
		// image is the container's image; release the release label of
		// the objects the Operator selects ("" for none).
		image, release string
		// receivers replaces the generated receivers' integrations.
		receivers map[string]monitoringv1alpha1.Receiver
		check     func(t *testing.T, r rendered, pod corev1.PodTemplateSpec)
	}{
		{name: "defaults", image: defaultImage, check: func(t *testing.T, r rendered, pod corev1.PodTemplateSpec) {
			for _, k := range []string{"PodDisruptionBudget", "NetworkPolicy", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} {
				if len(r.docs[k]) > 0 {
					t.Errorf("defaults render a %s", k)
				}
			}
			if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
				t.Errorf("automountServiceAccountToken %v without discovery, want false", a)
			}
		}},
		{name: "kube-prometheus-stack", args: []string{"--values", "kvwatch/values-kube-prometheus-stack.yaml"},
			image: defaultImage, release: "kube-prometheus-stack", check: func(t *testing.T, r rendered, pod corev1.PodTemplateSpec) {
				np := one[networkingv1.NetworkPolicy](t, r, "NetworkPolicy")
				if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
					np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
					t.Errorf("NetworkPolicy ingress %+v, want Prometheus pods only", np.Spec.Ingress)
				}
			}},
		{name: "digest", args: []string{"--values", "testdata/digest.yaml"},
			image: "registry.example:5000/inference/kvwatch@sha256:4b825dc642cb6eb9a060e54bf8d69288fbee4904c8d9e6c1b2a0e2ac3b1d8f4e"},
		{name: "PDB, NetworkPolicy, discovery, receivers", args: []string{"--values", "testdata/hardened.yaml"}, image: defaultImage,
			receivers: map[string]monitoringv1alpha1.Receiver{"kvwatch-critical": {Name: "kvwatch-critical",
				WebhookConfigs: []monitoringv1alpha1.WebhookConfig{{URL: ptr("http://pager.monitoring.svc:8080/alert"), SendResolved: ptr(true)}}}},
			check: func(t *testing.T, r rendered, pod corev1.PodTemplateSpec) {
				pdb := one[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget")
				if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
					!subset(pdb.Spec.Selector.MatchLabels, pod.Labels) {
					t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1 over the kvwatch pod %v", pdb.Spec, pod.Labels)
				}
				np := one[networkingv1.NetworkPolicy](t, r, "NetworkPolicy")
				if !subset(np.Spec.PodSelector.MatchLabels, pod.Labels) || len(np.Spec.Ingress) != 1 ||
					len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "metrics" ||
					np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
					t.Errorf("NetworkPolicy %+v: want the metrics port of the kvwatch pod from the namespace monitoring", np.Spec)
				}
				checkDiscovery(t, r, pod, []string{"inference", "monitoring"})
				cm := kvwatchConfig(t, r)
				if !strings.Contains(cm.Data["kvwatch.yml"], "url: http://decode-0.inference.svc:30000") {
					t.Errorf("kvwatch.yml of the config value:\n%s", cm.Data["kvwatch.yml"])
				}
			}},
		{name: "cluster-wide discovery", args: []string{"--set", "discovery.enabled=true", "--set", "discovery.clusterWide=true"}, image: defaultImage,
			check: func(t *testing.T, r rendered, pod corev1.PodTemplateSpec) { checkDiscovery(t, r, pod, nil) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := helmTemplate(t, helm, c.args...)
			if err != nil {
				t.Fatalf("helm template %v: %v\n%s", c.args, err, out)
			}
			if vout, err := validate(t, kv, crds, out); err != nil {
				t.Errorf("kubectl-validate: %v\n%s", err, vout)
			}
			r := parse(t, out)
			for kind, docs := range r.docs {
				for _, d := range docs {
					var m struct{ Metadata struct{ Namespace string } }
					if err := yaml.Unmarshal(d, &m); err != nil {
						t.Fatal(err)
					}
					if clusterScoped := kind == "ClusterRole" || kind == "ClusterRoleBinding"; clusterScoped != (m.Metadata.Namespace == "") ||
						(!clusterScoped && kind != "Role" && kind != "RoleBinding" && m.Metadata.Namespace != namespace) {
						t.Errorf("%s in namespace %q, want %q", kind, m.Metadata.Namespace, namespace)
					}
				}
			}

			dep := one[appsv1.Deployment](t, r, "Deployment")
			pod := dep.Spec.Template
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Spec.Containers))
			}
			ctr, want := pod.Spec.Containers[0], genDep.Spec.Template.Spec.Containers[0]
			if ctr.Image != c.image {
				t.Errorf("image %s, want %s", ctr.Image, c.image)
			}
			// The chart runs the container as `kvwatch stack generate` does.
			if d := cmp.Diff(want.Args, ctr.Args); d != "" {
				t.Errorf("args differ from the generated Deployment's (-generated +chart):\n%s", d)
			}
			for _, f := range []struct {
				name      string
				gen, char any
			}{
				{"name", want.Name, ctr.Name}, {"ports", want.Ports, ctr.Ports},
				{"readiness probe", want.ReadinessProbe, ctr.ReadinessProbe}, {"liveness probe", want.LivenessProbe, ctr.LivenessProbe},
				{"resources", want.Resources, ctr.Resources}, {"security context", want.SecurityContext, ctr.SecurityContext},
				{"volume mounts", want.VolumeMounts, ctr.VolumeMounts},
				{"pod security context", genDep.Spec.Template.Spec.SecurityContext, pod.Spec.SecurityContext},
				{"replicas", genDep.Spec.Replicas, dep.Spec.Replicas},
			} {
				if d := cmp.Diff(f.gen, f.char); d != "" {
					t.Errorf("%s differs from the generated Deployment's (-generated +chart):\n%s", f.name, d)
				}
			}
			if !subset(dep.Spec.Selector.MatchLabels, pod.Labels) {
				t.Errorf("Deployment selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, pod.Labels)
			}
			sa := one[corev1.ServiceAccount](t, r, "ServiceAccount")
			if pod.Spec.ServiceAccountName != sa.Name {
				t.Errorf("pod's service account %q, the chart's is %q", pod.Spec.ServiceAccountName, sa.Name)
			}
			cm := kvwatchConfig(t, r)
			// The config, and the state volume of the history snapshot.
			if v := pod.Spec.Volumes; len(v) != 2 || v[0].ConfigMap == nil || v[0].ConfigMap.Name != cm.Name || cm.Data["kvwatch.yml"] == "" ||
				v[1].Name != "state" || v[1].EmptyDir == nil {
				t.Errorf("volumes %+v, want the ConfigMap %s with kvwatch.yml and the state emptyDir", v, cm.Name)
			}
			svc := one[corev1.Service](t, r, "Service")
			sm := one[monitoringv1.ServiceMonitor](t, r, "ServiceMonitor")
			if !subset(svc.Spec.Selector, pod.Labels) || !subset(sm.Spec.Selector.MatchLabels, svc.Labels) ||
				len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || svc.Spec.Ports[0].TargetPort.String() != ctr.Ports[0].Name {
				t.Errorf("ServiceMonitor %v/%+v, Service %v -> %v, pod %v: want each to select the next",
					sm.Spec.Selector.MatchLabels, sm.Spec.Endpoints, svc.Labels, svc.Spec, pod.Labels)
			}

			pr := one[monitoringv1.PrometheusRule](t, r, "PrometheusRule")
			if d := cmp.Diff(genPR.Spec, pr.Spec); d != "" {
				t.Errorf("PrometheusRule differs from the generated one (-generated +chart):\n%s", d)
			}
			amc := one[monitoringv1alpha1.AlertmanagerConfig](t, r, "AlertmanagerConfig")
			wantAMC := genAMC.Spec.DeepCopy()
			for i, rc := range wantAMC.Receivers {
				if v, ok := c.receivers[rc.Name]; ok {
					wantAMC.Receivers[i] = v
				}
			}
			if d := cmp.Diff(*wantAMC, amc.Spec); d != "" {
				t.Errorf("AlertmanagerConfig differs from the generated one (-generated +chart):\n%s", d)
			}
			var dash []corev1.ConfigMap
			for _, cm := range objects[corev1.ConfigMap](t, r, "ConfigMap") {
				if cm.Labels["grafana_dashboard"] == "1" {
					dash = append(dash, cm)
				}
			}
			if len(dash) != len(genDash) {
				t.Fatalf("%d dashboard ConfigMaps, generated %d", len(dash), len(genDash))
			}
			for i := range dash {
				if !maps.Equal(dash[i].Data, genDash[i].Data) {
					t.Errorf("dashboard ConfigMap %s holds %v, the generated %s holds %v", dash[i].Name, slices.Sorted(maps.Keys(dash[i].Data)),
						genDash[i].Name, slices.Sorted(maps.Keys(genDash[i].Data)))
				}
			}

			// The objects the Operator selects carry the release label.
			for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "AlertmanagerConfig"} {
				for _, d := range r.docs[kind] {
					var m struct {
						Metadata struct{ Labels map[string]string }
					}
					if err := yaml.Unmarshal(d, &m); err != nil {
						t.Fatal(err)
					}
					if m.Metadata.Labels["release"] != c.release {
						t.Errorf("%s labels %v, want release %q", kind, m.Metadata.Labels, c.release)
					}
				}
			}
			if c.check != nil {
				c.check(t, r, pod)
			}
		})
	}

	// The validation sees a wrong value: a ServiceMonitor interval that
	// is no duration.
	out, err := helmTemplate(t, helm, "--set", "serviceMonitor.interval=every-15s")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if vout, err := validate(t, kv, crds, out); err == nil || !strings.Contains(string(vout), "interval") {
		t.Errorf("kubectl-validate accepted a ServiceMonitor interval of every-15s: %v\n%s", err, vout)
	}
}

// validate runs kubectl-validate on rendered manifests against Kubernetes
// 1.30's schemas and the Operator's CRDs.
func validate(t *testing.T, kv, crds, manifests string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kvwatch.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.Command(kv, "--local-crds", crds, "--version", "1.30", dir).CombinedOutput()
}

// checkDiscovery: the service account may get, list and watch exactly
// pods, services, endpoints and endpointslices, in namespaces (nil:
// cluster-wide), and its token is mounted.
func checkDiscovery(t *testing.T, r rendered, pod corev1.PodTemplateSpec, namespaces []string) {
	t.Helper()
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || !*a {
		t.Errorf("automountServiceAccountToken %v with discovery, want true", a)
	}
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "services", "endpoints"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: pod.Spec.ServiceAccountName, Namespace: namespace}}
	if namespaces == nil {
		cr := one[rbacv1.ClusterRole](t, r, "ClusterRole")
		crb := one[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding")
		if d := cmp.Diff(wantRules, cr.Rules); d != "" {
			t.Errorf("ClusterRole rules (-want +got):\n%s", d)
		}
		if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != cr.Name || !cmp.Equal(crb.Subjects, wantSubject) {
			t.Errorf("ClusterRoleBinding %+v %+v, want %s to %+v", crb.RoleRef, crb.Subjects, cr.Name, wantSubject)
		}
		if len(r.docs["Role"])+len(r.docs["RoleBinding"]) > 0 {
			t.Error("cluster-wide discovery also renders Roles")
		}
		return
	}
	roles := objects[rbacv1.Role](t, r, "Role")
	bindings := objects[rbacv1.RoleBinding](t, r, "RoleBinding")
	var got []string
	for i, role := range roles {
		got = append(got, role.Namespace)
		if d := cmp.Diff(wantRules, role.Rules); d != "" {
			t.Errorf("Role in %s: rules (-want +got):\n%s", role.Namespace, d)
		}
		if i >= len(bindings) || bindings[i].Namespace != role.Namespace || bindings[i].RoleRef.Name != role.Name ||
			!cmp.Equal(bindings[i].Subjects, wantSubject) {
			t.Errorf("Role %s/%s has no RoleBinding to %+v", role.Namespace, role.Name, wantSubject)
		}
	}
	if !slices.Equal(got, namespaces) || len(bindings) != len(roles) {
		t.Errorf("Roles in %v with %d RoleBindings, want one each in %v", got, len(bindings), namespaces)
	}
}

// TestChartRefuses: values the chart turns down, with the reason.
func TestChartRefuses(t *testing.T) {
	helm := testenv.Helm(t)
	for _, c := range []struct {
		set, want string
	}{
		{"image.tag=latest", "image.tag latest: pin a version"},
		{"image.digest=sha256:abc", `image.digest "sha256:abc": want sha256: and 64 hex digits`},
		{"alertmanagerConfig.receivers.pager.webhookConfigs[0].url=http://pager:8080/",
			"alertmanagerConfig.receivers.pager: no such receiver; the generated ones are kvwatch-default, kvwatch-critical, kvwatch-warning, kvwatch-watchdog"},
	} {
		out, err := helmTemplate(t, helm, "--set", c.set)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("helm template --set %s: %v\n%s\nwant an error saying %q", c.set, err, out, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
