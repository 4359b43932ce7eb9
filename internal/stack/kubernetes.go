package stack

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/version"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Kubernetes labels of the kvwatch objects and of the engine pods the
// PodMonitor selects.
const (
	k8sAppLabel       = "app.kubernetes.io/name"
	k8sEngineLabel    = "kvwatch.io/engine"
	k8sMetricsPort    = "metrics"
	k8sKVWatchPort    = signal.DefaultPort
	k8sConfigMapName  = "kvwatch-config"
	k8sDashboardLabel = "grafana_dashboard"
	// k8sNamespaceLabel is the alert label the Prometheus Operator matches
	// an AlertmanagerConfig's routes on.
	k8sNamespaceLabel = "namespace"
	// k8sStateDir is where the pod's state volume is mounted, given to
	// serve as STATE_DIRECTORY: its history snapshot goes there
	// (config.DefaultSnapshotFile).
	k8sStateDir = "/var/lib/kvwatch"
)

// DefaultImageRepository is the repository of the kvwatch container image
// (`make image` writes one, docs/kubernetes.md); the manifests and the Helm
// chart run it at the tag of a version, never latest.
const DefaultImageRepository = "ghcr.io/kvwatch/kvwatch"

// DefaultImage is the image the manifests run unless told otherwise:
// DefaultImageRepository at the tag of this binary's version.
func DefaultImage() string { return DefaultImageRepository + ":" + ImageTag(version.Version) }

// ImageTag is the image tag of a kvwatch version (`kvwatch --version`, the
// Makefile's `git describe`): the version itself, with every character a
// tag cannot hold (anything but letters, digits, '_', '.' and '-') as '-',
// at most 128 characters, starting with a letter, digit or '_'. A build
// without a version (`go build` without the Makefile's -ldflags) is "dev",
// as its man page says. The Makefile's image target applies the same rule
// (a test of `make image` compares them).
func ImageTag(v string) string {
	b := []byte(strings.TrimLeft(v, ".-"))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 128 {
		b = b[:128]
	}
	if len(b) == 0 {
		return "dev"
	}
	return string(b)
}

// marshalK8s marshals objects as one multi-document YAML file.
func marshalK8s(objs ...any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("marshal kubernetes object: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

func ptr[T any](v T) *T { return &v }

// KubernetesArgs are the arguments of the kvwatch container. The pod listens
// on all its interfaces so that Prometheus can scrape it, which serve allows
// only with a web config that has both TLS and authentication or with
// --web.insecure-listen (docs/configuration.md): the manifests take the
// second, for clusters where a service mesh or the network policy protects
// pod traffic (docs/stack.md, "Kubernetes").
func KubernetesArgs() []string {
	return []string{"serve", "--config.file=" + k8sConfigDir + "/" + configFileName,
		fmt.Sprintf("--web.listen-address=:%d", k8sKVWatchPort), "--web.insecure-listen"}
}

// k8sResources are the kvwatch container's requests and limits, sized from
// docs/benchmarks.md: 2,000 TP=8 endpoints took 0.37 cores and 261 MiB at
// peak; a memory limit four times the request leaves room for history.
func k8sResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
}

// validateK8sLabels checks --kubernetes.labels with Kubernetes' own rules.
func validateK8sLabels(l map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(l)) {
		v := l[k]
		if k == k8sAppLabel {
			errs = append(errs, fmt.Errorf("--kubernetes.labels %s: kvwatch sets this label itself (its selectors use it)", k))
			continue
		}
		for _, m := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("--kubernetes.labels key %q: %s", k, m))
		}
		for _, m := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--kubernetes.labels %s value %q: %s", k, v, m))
		}
	}
	return errs
}

// kubernetesFiles returns the manifests: kvwatch Deployment, Service and
// config, a ServiceMonitor for kvwatch, a PodMonitor for engines, the
// PrometheusRule, the AlertmanagerConfig and the dashboard ConfigMaps for
// Grafana's sidecar.
func kubernetesFiles(o Options) (Files, error) {
	ns := o.Namespace
	labels := map[string]string{k8sAppLabel: "kvwatch"}
	// Every object carries o.KubernetesLabels (e.g. release: kube-prometheus-stack,
	// which the Prometheus Operator's default selectors require); selectors
	// and pod templates keep only the app label, so changing them never
	// touches an immutable Deployment selector.
	meta := func(name string, extra map[string]string) metav1.ObjectMeta {
		l := map[string]string{k8sAppLabel: "kvwatch"}
		for k, v := range o.KubernetesLabels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l}
	}
	kc, err := kubernetesConfig(o, o.secrets)
	if err != nil {
		return nil, err
	}
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(k8sConfigMapName, nil), Data: map[string]string{configFileName: string(kc.file)}}
	pod := &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65534)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	volume := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: k8sConfigMapName}}}
	var secret *corev1.Secret
	if len(kc.data) > 0 {
		// One volume at /etc/kvwatch: kvwatch.yml from the ConfigMap (or
		// the Secret) and the secrets' files under secrets/, readable by
		// the pod's group only.
		secret = &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta(k8sSecretName, nil), Type: corev1.SecretTypeOpaque, Data: kc.data}
		pod.FSGroup = ptr(int64(65534))
		var sources []corev1.VolumeProjection
		if !kc.inSecret {
			sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: k8sConfigMapName}}})
		}
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: k8sSecretName}, Items: kc.items}})
		volume = corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources, DefaultMode: ptr(int32(0o440))}}
	}
	dep := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta("kvwatch", nil),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr(false),
					SecurityContext:              pod,
					Containers: []corev1.Container{{
						Name:  "kvwatch",
						Image: o.Image,
						Args:  KubernetesArgs(),
						Ports: []corev1.ContainerPort{{Name: k8sMetricsPort, ContainerPort: k8sKVWatchPort}},
						// /-/ready turns 200 after the first scrape round,
						// /-/healthy while the process serves: neither
						// renders the (megabytes of) /metrics.
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: signal.PathReady, Port: intstr.FromString(k8sMetricsPort)}},
							PeriodSeconds: 5, FailureThreshold: 3},
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: signal.PathHealthy, Port: intstr.FromString(k8sMetricsPort)}},
							InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 6},
						Resources: k8sResources(),
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false),
							ReadOnlyRootFilesystem: ptr(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						// The history snapshot, in an emptyDir: it survives a
						// restart of the container (a crash, an OOM kill, a
						// failed liveness probe), not a new pod.
						Env: []corev1.EnvVar{{Name: "STATE_DIRECTORY", Value: k8sStateDir}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: k8sConfigDir, ReadOnly: true},
							{Name: "state", MountPath: k8sStateDir}},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: volume},
						{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta("kvwatch", nil),
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: k8sMetricsPort, Port: k8sKVWatchPort, TargetPort: intstr.FromString(k8sMetricsPort)}}},
	}
	sm := monitoringv1.ServiceMonitor{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: monitoringv1.ServiceMonitorsKind},
		ObjectMeta: meta("kvwatch", nil),
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Endpoints: []monitoringv1.Endpoint{{Port: k8sMetricsPort, Path: "/metrics",
				Interval: monitoringv1.Duration(o.ScrapeInterval.String())}},
		},
	}
	pm := monitoringv1.PodMonitor{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: monitoringv1.PodMonitorsKind},
		ObjectMeta: meta("inference-engines", nil),
		Spec: monitoringv1.PodMonitorSpec{
			Selector:          metav1.LabelSelector{MatchLabels: map[string]string{k8sEngineLabel: "true"}},
			NamespaceSelector: monitoringv1.NamespaceSelector{Any: true},
			PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{{Port: ptr(k8sMetricsPort), Path: "/metrics",
				Interval: monitoringv1.Duration(o.ScrapeInterval.String())}},
		},
	}
	pr := monitoringv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: monitoringv1.PrometheusRuleKind},
		ObjectMeta: meta("kvwatch", nil),
	}
	for _, rg := range append(RecordingRules(o).Groups, AlertRules(o).Groups...) {
		g := monitoringv1.RuleGroup{Name: rg.Name}
		for _, r := range rg.Rules {
			mr := monitoringv1.Rule{Record: r.Record, Alert: r.Alert, Expr: intstr.FromString(r.Expr),
				Labels: r.Labels, Annotations: r.Annotations}
			if r.Alert != "" {
				// The AlertmanagerConfig's routes match only alerts of
				// its own namespace (alertmanagerConfigObjects).
				mr.Labels = maps.Clone(r.Labels)
				if mr.Labels == nil {
					mr.Labels = map[string]string{}
				}
				mr.Labels[k8sNamespaceLabel] = ns
			}
			if r.For != 0 {
				mr.For = ptr(monitoringv1.Duration(r.For.String()))
			}
			g.Rules = append(g.Rules, mr)
		}
		pr.Spec.Groups = append(pr.Spec.Groups, g)
	}
	var out Files
	addMode := func(p string, mode fs.FileMode, objs ...any) error {
		b, err := marshalK8s(objs...)
		if err != nil {
			return fmt.Errorf("generate %s: %w", p, err)
		}
		out = append(out, File{Path: p, Data: b, Mode: mode})
		return nil
	}
	add := func(p string, objs ...any) error { return addMode(p, 0o644, objs...) }
	objs := []any{cm, dep, svc}
	if kc.inSecret {
		objs = objs[1:]
	}
	if err := add("kubernetes/kvwatch.yaml", objs...); err != nil {
		return nil, err
	}
	if secret != nil {
		if err := addMode(k8sSecretFile, 0o600, secret); err != nil {
			return nil, err
		}
	}
	if err := add("kubernetes/servicemonitor.yaml", sm); err != nil {
		return nil, err
	}
	if err := add("kubernetes/podmonitor.yaml", pm); err != nil {
		return nil, err
	}
	if err := add("kubernetes/prometheusrule.yaml", pr); err != nil {
		return nil, err
	}
	amc, err := alertmanagerConfigObjects(o, meta)
	if err != nil {
		return nil, err
	}
	if err := add("kubernetes/alertmanagerconfig.yaml", amc...); err != nil {
		return nil, err
	}
	var cms []any
	for _, d := range Dashboards(o) {
		j, err := dashboardJSON(d)
		if err != nil {
			return nil, err
		}
		cms = append(cms, corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(d.UID+"-dashboard", map[string]string{k8sDashboardLabel: "1"}),
			Data:       map[string]string{path.Base(d.File): string(j)}})
	}
	if err := add("kubernetes/dashboards.yaml", cms...); err != nil {
		return nil, err
	}
	keda, hpas, adapter, err := autoscalingObjects(o, meta)
	if err != nil {
		return nil, err
	}
	if adapter != nil {
		for _, f := range []struct {
			path string
			objs []any
		}{{KEDAFile, keda}, {HPAFile, hpas}, {PrometheusAdapterFile, []any{adapter}}} {
			if err := add(f.path, f.objs...); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
