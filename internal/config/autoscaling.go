package config

import (
	"net/url"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Autoscaling configures the autoscaling signal of each pool,
// kvwatch_pool_desired_servers (docs/planning.md, "Autoscaling"), and the
// autoscaler objects `kvwatch stack generate` writes for the Kubernetes
// workloads that run the pools (docs/stack.md, "Autoscaling").
type Autoscaling struct {
	// TargetKVUsage is the KV usage, a ratio in (0, 1], that a pool's
	// used plus queued KV must stay at or under with one server fewer than
	// the signal asks for: the signal is the servers of the pool's size
	// that keep the load under it, plus one. Default 0.8, below
	// alerts.kv_usage_warning (0.9), so a pool grows before it warns.
	TargetKVUsage float64 `yaml:"target_kv_usage"`
	// PrometheusURL is the Prometheus the generated KEDA ScaledObjects
	// query for the signal. Default http://prometheus-operated.monitoring.svc:9090,
	// the Prometheus Operator's service in kube-prometheus' namespace.
	PrometheusURL string `yaml:"prometheus_url"`
	// Workloads are the Kubernetes workloads that run pools, one per pool;
	// `stack generate` writes a ScaledObject, and an HPA with its
	// prometheus-adapter rule, for each. None: no autoscaler objects.
	Workloads []ScaledWorkload `yaml:"workloads"`
}

// ScaledWorkload is the Kubernetes workload (anything with a scale
// subresource) that runs the servers of one pool.
type ScaledWorkload struct {
	// Role, Cluster and Pool name the pool as the targets' role and
	// labels do (cluster and pool empty when the targets have none).
	// Role is prefill, decode or unified: the roles that hold KV.
	Role    string `yaml:"role"`
	Cluster string `yaml:"cluster"`
	Pool    string `yaml:"pool"`
	// Namespace and Name are the workload's; the autoscaler objects go
	// into its namespace. Required.
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// Kind and APIVersion are the workload's. Default Deployment, apps/v1;
	// another kind (StatefulSet: apps/v1; LeaderWorkerSet:
	// leaderworkerset.x-k8s.io/v1) must write api_version unless it is
	// StatefulSet.
	Kind       string `yaml:"kind"`
	APIVersion string `yaml:"api_version"`
	// MinServers and MaxServers bound the autoscaler. MinServers default 1
	// (at least 1); MaxServers is required: a ceiling on GPU servers is
	// the operator's decision, not kvwatch's.
	MinServers int `yaml:"min_servers"`
	MaxServers int `yaml:"max_servers"`
}

// defaultScaledWorkload is a workloads entry before decoding.
func defaultScaledWorkload() ScaledWorkload {
	return ScaledWorkload{Kind: "Deployment", MinServers: 1}
}

// markWrittenWorkloads gives each decoded workloads entry the defaults of
// the keys it does not write (see markWritten).
func (c *Config) markWrittenWorkloads(root *yaml.Node) {
	for i := range c.Autoscaling.Workloads {
		at := []any{"autoscaling", "workloads", i}
		c.Autoscaling.Workloads[i].setDefaults(func(key string) bool { return hasKey(root, at, key) })
	}
}

// setDefaults sets the defaults of the keys that written says are not
// written: the kind, the least servers, and apps/v1 for the kinds of
// package apps.
func (w *ScaledWorkload) setDefaults(written func(key string) bool) {
	d := defaultScaledWorkload()
	if !written("kind") {
		w.Kind = d.Kind
	}
	if !written("min_servers") {
		w.MinServers = d.MinServers
	}
	if !written("api_version") && appsKind(w.Kind) {
		w.APIVersion = "apps/v1"
	}
}

// appsKind is true for the workload kinds of the apps/v1 API.
func appsKind(kind string) bool { return kind == "Deployment" || kind == "StatefulSet" }

// k8sName is a Kubernetes object name (a DNS-1123 subdomain, the rule of
// Deployments and StatefulSets) and k8sLabel a DNS-1123 label (namespaces).
var (
	k8sName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	k8sLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	k8sKind  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// validateAutoscaling range-checks the autoscaling keys.
func (c *Config) validateAutoscaling(v *validator) {
	a := &c.Autoscaling
	if !(a.TargetKVUsage > 0 && a.TargetKVUsage <= 1) {
		v.addf([]any{"autoscaling", "target_kv_usage"}, "%g: want a usage ratio above 0 and at most 1, e.g. 0.8", a.TargetKVUsage)
	}
	if u, err := url.Parse(a.PrometheusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.addf([]any{"autoscaling", "prometheus_url"}, "%q: want an absolute http(s) URL, e.g. http://prometheus-operated.monitoring.svc:9090", a.PrometheusURL)
	}
	type poolKey struct{ role, cluster, pool string }
	pools := map[poolKey]int{}
	objects := map[string]int{}
	for i, w := range a.Workloads {
		p := func(k string) []any { return []any{"autoscaling", "workloads", i, k} }
		if !slices.Contains([]string{"prefill", "decode", "unified"}, w.Role) {
			v.addf(p("role"), "%q: want prefill, decode or unified (the roles that hold KV)", w.Role)
		}
		if w.Name == "" {
			v.addf(p("name"), "missing: the name of the workload that runs the pool, e.g. vllm-decode")
		} else if len(w.Name) > 253 || !k8sName.MatchString(w.Name) {
			v.addf(p("name"), "%q is not a Kubernetes object name (lower-case letters, digits, - and .)", w.Name)
		}
		if w.Namespace == "" {
			v.addf(p("namespace"), "missing: the workload's namespace (the autoscaler objects go there)")
		} else if len(w.Namespace) > 63 || !k8sLabel.MatchString(w.Namespace) {
			v.addf(p("namespace"), "%q is not a Kubernetes namespace (lower-case letters, digits and -)", w.Namespace)
		}
		if !k8sKind.MatchString(w.Kind) {
			v.addf(p("kind"), "%q: want a Kubernetes kind, e.g. Deployment, StatefulSet or LeaderWorkerSet", w.Kind)
		}
		if w.APIVersion == "" {
			v.addf(p("api_version"), "missing for kind %s: write the workload's apiVersion, e.g. leaderworkerset.x-k8s.io/v1", w.Kind)
		}
		if w.MinServers < 1 {
			v.addf(p("min_servers"), "%d: want at least 1 (the signal never asks for fewer)", w.MinServers)
		}
		switch {
		case w.MaxServers == 0:
			v.addf(p("max_servers"), "missing: the most servers the autoscaler may run")
		case w.MaxServers < w.MinServers:
			v.addf(p("max_servers"), "%d is below min_servers %d", w.MaxServers, w.MinServers)
		}
		k := poolKey{w.Role, w.Cluster, w.Pool}
		if j, dup := pools[k]; dup {
			v.addf([]any{"autoscaling", "workloads", i}, "the pool of workloads[%d] again: one workload per pool", j)
		}
		pools[k] = i
		o := w.Namespace + "/" + w.Name
		if j, dup := objects[o]; dup && w.Name != "" {
			v.addf(p("name"), "%s is also workloads[%d]: two autoscalers would fight over one workload", o, j)
		}
		objects[o] = i
	}
}

// hasKey reports whether the mapping at path in root writes key.
func hasKey(root *yaml.Node, path []any, key string) bool {
	n := nodeAt(root, path)
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}
