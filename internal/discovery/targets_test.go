package discovery

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

// pod is a pod as Prometheus' pod role sees it.
type pod struct {
	ns, name, ip, phase string
	labels, annotations map[string]string
	containers          []container
}

type container struct {
	name  string
	ports []port
}

type port struct {
	name   string
	number int
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// group is the target group Prometheus' pod role makes of p (discovery/
// kubernetes pod.go, written out again here): the pod's meta labels on the
// group, one target per container port, one per container without ports.
func (p pod) group() *targetgroup.Group {
	g := &targetgroup.Group{Source: "pod/" + p.ns + "/" + p.name, Labels: model.LabelSet{
		"__meta_kubernetes_namespace":   model.LabelValue(p.ns),
		"__meta_kubernetes_pod_name":    model.LabelValue(p.name),
		"__meta_kubernetes_pod_ip":      model.LabelValue(p.ip),
		"__meta_kubernetes_pod_phase":   model.LabelValue(p.phase),
		"__meta_kubernetes_pod_ready":   "true",
		"__meta_kubernetes_pod_host_ip": "10.1.0.1",
	}}
	for k, v := range p.labels {
		ln := invalidLabelChars.ReplaceAllString(k, "_")
		g.Labels[model.LabelName("__meta_kubernetes_pod_label_"+ln)] = model.LabelValue(v)
		g.Labels[model.LabelName("__meta_kubernetes_pod_labelpresent_"+ln)] = "true"
	}
	for k, v := range p.annotations {
		ln := invalidLabelChars.ReplaceAllString(k, "_")
		g.Labels[model.LabelName("__meta_kubernetes_pod_annotation_"+ln)] = model.LabelValue(v)
		g.Labels[model.LabelName("__meta_kubernetes_pod_annotationpresent_"+ln)] = "true"
	}
	for _, c := range p.containers {
		if len(c.ports) == 0 {
			g.Targets = append(g.Targets, model.LabelSet{"__address__": model.LabelValue(p.ip),
				"__meta_kubernetes_pod_container_name": model.LabelValue(c.name)})
		}
		for _, pt := range c.ports {
			n := fmt.Sprint(pt.number)
			g.Targets = append(g.Targets, model.LabelSet{"__address__": model.LabelValue(p.ip + ":" + n),
				"__meta_kubernetes_pod_container_name":          model.LabelValue(c.name),
				"__meta_kubernetes_pod_container_port_name":     model.LabelValue(pt.name),
				"__meta_kubernetes_pod_container_port_number":   model.LabelValue(n),
				"__meta_kubernetes_pod_container_port_protocol": "TCP"})
		}
	}
	return g
}

// example reads examples/kubernetes-discovery.yml.
func example(t *testing.T) *config.Config {
	t.Helper()
	c, err := config.Load(filepath.Join("..", "..", "examples", "kubernetes-discovery.yml"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// found is a target as the tests compare it.
type found struct {
	Name, URL, Role, Engine string
	Labels                  map[string]string
}

func foundOf(ts []config.Target) []found {
	var out []found
	for _, t := range ts {
		out = append(out, found{t.Name, t.URL, t.Role, t.Engine, t.Labels})
	}
	return out
}

// The example's entries turn each platform's pods into the right targets:
// the labels are those the platforms' charts and operators write
// (docs/kubernetes.md names the files), the expected targets worked out
// by hand from the relabel rules' meaning.
func TestExampleRelabeling(t *testing.T) {
	c := example(t)
	running := "Running"
	cl := func(kv ...string) map[string]string {
		m := map[string]string{"cluster": "prod-east"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	llmd := func(name, role string, extra ...string) pod {
		l := map[string]string{"llm-d.ai/role": role, "llm-d.ai/model": "qwen3-8b", "llm-d.ai/inferenceServing": "true"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return pod{ns: "inference", name: name, ip: "10.0.0." + fmt.Sprint(len(name)), phase: running, labels: l,
			containers: []container{{"vllm", []port{{"metrics", 8200}}}, {"routing-proxy", []port{{"", 8000}}}}}
	}
	for _, tc := range []struct {
		name  string
		entry int
		pods  []pod
		want  []found
		// relabeled is how many targets relabel_configs drop.
		relabeled int
	}{
		{"llm-d prefill and decode, vLLM's metrics port only", 0, []pod{llmd("ms-prefill-a", "prefill"), llmd("ms-decode-bb", "decode")},
			[]found{
				{"inference/ms-decode-bb", "http://10.0.0.12:8200", "decode", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")},
				{"inference/ms-prefill-a", "http://10.0.0.12:8200", "prefill", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")},
			}, 2},
		{"llm-d aggregated roles are unified, encoders hold no KV", 0,
			[]pod{llmd("agg-1", "both"), llmd("agg-22", "prefill-decode"), llmd("enc-1", "encode"), llmd("encp-1", "encode-prefill")},
			[]found{
				{"inference/agg-1", "http://10.0.0.5:8200", "unified", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")},
				{"inference/agg-22", "http://10.0.0.6:8200", "unified", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")},
				{"inference/encp-1", "http://10.0.0.6:8200", "prefill", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")},
			}, 5},
		{"KServe LLMInferenceService: the llm-d labels, the service as the pool", 0, []pod{
			{ns: "models", name: "qwen-kserve-7f9", ip: "10.0.5.1", phase: running, labels: map[string]string{
				"llm-d.ai/role": "both", "kserve.io/component": "workload", "app.kubernetes.io/name": "qwen",
				"app.kubernetes.io/part-of": "llminferenceservice", "app.kubernetes.io/component": "llminferenceservice-workload"},
				containers: []container{{"main", []port{{"metrics", 8000}}}}},
		}, []found{{"models/qwen-kserve-7f9", "http://10.0.5.1:8000", "unified", "", cl("pool", "qwen")}}, 0},
		{"LeaderWorkerSet: the leader only; a pending pod waits", 0, []pod{
			llmd("lws-0", "decode", "leaderworkerset.sigs.k8s.io/worker-index", "0"),
			llmd("lws-0-1", "decode", "leaderworkerset.sigs.k8s.io/worker-index", "1"),
			{ns: "inference", name: "pending", ip: "10.0.0.9", phase: "Pending", labels: map[string]string{"llm-d.ai/role": "decode"},
				containers: []container{{"vllm", []port{{"metrics", 8200}}}}},
		}, []found{{"inference/lws-0", "http://10.0.0.5:8200", "decode", "", cl("pool", "qwen3-8b", "model", "qwen3-8b")}}, 4},
		{"Dynamo workers on the system port, the frontend as the router, not the planner", 1, []pod{
			{ns: "dynamo", name: "qwen-decode-0", ip: "10.0.1.1", phase: running, labels: map[string]string{
				"nvidia.com/metrics-enabled": "true", "nvidia.com/dynamo-component-type": "worker",
				"nvidia.com/dynamo-sub-component-type": "decode", "nvidia.com/dynamo-graph-deployment-name": "qwen"},
				containers: []container{{"main", []port{{"system", 9090}, {"nixl", 19090}}}}},
			{ns: "dynamo", name: "qwen-prefill-0", ip: "10.0.1.2", phase: running, labels: map[string]string{
				"nvidia.com/metrics-enabled": "true", "nvidia.com/dynamo-component-type": "prefill",
				"nvidia.com/dynamo-graph-deployment-name": "qwen"},
				containers: []container{{"main", []port{{"system", 9090}}}}},
			{ns: "dynamo", name: "qwen-frontend-0", ip: "10.0.1.3", phase: running, labels: map[string]string{
				"nvidia.com/metrics-enabled": "true", "nvidia.com/dynamo-component-type": "frontend",
				"nvidia.com/dynamo-graph-deployment-name": "qwen"},
				containers: []container{{"main", []port{{"http", 8000}}}}},
			{ns: "dynamo", name: "qwen-planner-0", ip: "10.0.1.4", phase: running, labels: map[string]string{
				"nvidia.com/metrics-enabled": "true", "nvidia.com/dynamo-component-type": "planner"},
				containers: []container{{"main", []port{{"metrics", 9085}}}}},
		}, []found{
			{"dynamo/qwen-decode-0", "http://10.0.1.1:9090", "decode", "", cl("pool", "qwen")},
			{"dynamo/qwen-frontend-0", "http://10.0.1.3:8000", "router", "", cl("pool", "qwen")},
			{"dynamo/qwen-prefill-0", "http://10.0.1.2:9090", "prefill", "", cl("pool", "qwen")},
		}, 2},
		{"vLLM production-stack: vLLM's container-port, engine vllm", 2, []pod{
			{ns: "default", name: "vllm-llama3-deployment-vllm-7c9", ip: "10.0.2.1", phase: running,
				labels:     map[string]string{"model": "llama3", "helm-release-name": "vllm", "environment": "test", "release": "test"},
				containers: []container{{"vllm", []port{{"container-port", 8000}, {"zmq-port", 55555}, {"ucx-port", 9999}}}}},
		}, []found{{"default/vllm-llama3-deployment-vllm-7c9", "http://10.0.2.1:8000", "", "vllm", cl("pool", "vllm", "model", "llama3")}}, 2},
		{"KServe: the port and path of prometheus.kserve.io, not the queue-proxy's", 3, []pod{
			{ns: "models", name: "qwen-predictor-5d8", ip: "10.0.3.1", phase: running,
				labels:      map[string]string{"serving.kserve.io/inferenceservice": "qwen", "component": "predictor"},
				annotations: map[string]string{"prometheus.kserve.io/port": "8080", "prometheus.kserve.io/path": "/metrics", "prometheus.io/port": "9088"},
				containers:  []container{{"kserve-container", []port{{"", 8080}}}, {"queue-proxy", []port{{"http-queueadm", 8022}, {"http-usermetric", 9091}}}}},
		}, []found{{"models/qwen-predictor-5d8", "http://10.0.3.1:8080/metrics", "", "", cl("pool", "qwen")}}, 2},
		{"prometheus.io annotations, one target for all of a pod's ports", 4, []pod{
			{ns: "lab", name: "sglang-0", ip: "10.0.4.1", phase: running, labels: map[string]string{"kvwatch.io/role": "prefill"},
				annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "30000"},
				containers:  []container{{"sglang", []port{{"http", 30000}, {"dist", 5000}}}, {"log-shipper", nil}}},
			{ns: "lab", name: "not-annotated", ip: "10.0.4.2", phase: running,
				containers: []container{{"sglang", []port{{"http", 30000}}}}},
		}, []found{{"lab/sglang-0", "http://10.0.4.1:30000", "prefill", "", cl()}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var groups []*targetgroup.Group
			for _, p := range tc.pods {
				groups = append(groups, p.group())
			}
			e := entries(c)[tc.entry]
			s := relabelTargets(e.set, e.targets, &c.Global, groups, nil)
			if diff := cmp.Diff(tc.want, foundOf(s.Targets)); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if got := s.Dropped[ReasonRelabeled]; got != tc.relabeled {
				t.Errorf("dropped by relabel_configs = %d, want %d", got, tc.relabeled)
			}
			if len(s.Invalid) > 0 {
				t.Errorf("invalid targets: %v", s.Invalid)
			}
		})
	}
}

// A target kvwatch cannot use is left out and said why; the others stay.
func TestInvalidTargets(t *testing.T) {
	sd := &config.SDTargets{}
	g := &config.Global{ScrapeInterval: model.Duration(5e9), ScrapeTimeout: model.Duration(4e9)}
	engines := pipeline.EngineNames(nil)
	tg := &targetgroup.Group{Targets: []model.LabelSet{
		{"__address__": "10.0.0.1:8000", "role": "decode", "engine": "vllm"},
		{"__address__": "10.0.0.2:8000", "role": "chef"},
		{"__address__": "10.0.0.3:8000", "engine": "vlm"},
		{"__address__": "10.0.0.4:8000", "__scheme__": "ftp"},
		{"__address__": "10.0.0.5:8000/metrics"},
		{"__address__": "10.0.0.6:8000", "__metrics_path__": "metrics"},
		{"job": "no address"},
	}}
	s := relabelTargets("http_sd_configs[0]", sd, g, []*targetgroup.Group{tg}, engines)
	want := []found{{"10.0.0.1:8000", "http://10.0.0.1:8000", "decode", "vllm", map[string]string{}}}
	if diff := cmp.Diff(want, foundOf(s.Targets)); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if got := s.Dropped[ReasonInvalid]; got != 6 {
		t.Errorf("invalid = %d, want 6", got)
	}
	// The first five, in the groups' order.
	wantWhy := []string{
		`10.0.0.2:8000: role "chef": want one of prefill, decode, unified, router, cache (map the platform's roles with relabel_configs)`,
		`10.0.0.3:8000: unknown engine "vlm"`,
		`10.0.0.4:8000: __scheme__ "ftp": want http or https`,
		`__address__ "10.0.0.5:8000/metrics": want host:port (set the path with __metrics_path__)`,
		`10.0.0.6:8000: __metrics_path__ "metrics": want a path starting with /`,
	}
	if len(s.Invalid) != len(wantWhy) {
		t.Fatalf("why = %q, want %d reasons", s.Invalid, len(wantWhy))
	}
	for i, w := range wantWhy {
		if !strings.HasPrefix(s.Invalid[i], w) {
			t.Errorf("why[%d] = %q, want it to start with %q", i, s.Invalid[i], w)
		}
	}
}

// kubeconfig writes a kubeconfig for a server nobody answers at.
func kubeconfig(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(f, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestKVUnifiedLabel: a discovered target's kv_unified label (after
// relabeling, e.g. from a pod label) sets its kv_unified; another value
// than true or false leaves the target out, saying why.
func TestKVUnifiedLabel(t *testing.T) {
	g := &config.Global{ScrapeInterval: model.Duration(5e9), ScrapeTimeout: model.Duration(4e9)}
	tg := &targetgroup.Group{Targets: []model.LabelSet{
		{"__address__": "10.0.0.1:8080", "kv_unified": "true"},
		{"__address__": "10.0.0.2:8080", "kv_unified": "false"},
		{"__address__": "10.0.0.3:8080"},
		{"__address__": "10.0.0.4:8080", "kv_unified": "yes"},
	}}
	s := relabelTargets("http_sd_configs[0]", &config.SDTargets{}, g, []*targetgroup.Group{tg}, pipeline.EngineNames(nil))
	var got []string
	for _, tt := range s.Targets {
		v := "unset"
		if tt.KVUnified != nil {
			v = fmt.Sprint(*tt.KVUnified)
		}
		got = append(got, tt.Name+"="+v)
	}
	if diff := cmp.Diff([]string{"10.0.0.1:8080=true", "10.0.0.2:8080=false", "10.0.0.3:8080=unset"}, got); diff != "" {
		t.Errorf("kv_unified (-want +got):\n%s", diff)
	}
	want := `10.0.0.4:8080: kv_unified "yes": want true or false (whether a llama.cpp server's slots share one KV cache)`
	if s.Dropped[ReasonInvalid] != 1 || len(s.Invalid) != 1 || s.Invalid[0] != want {
		t.Errorf("invalid %d %q, want 1: %q", s.Dropped[ReasonInvalid], s.Invalid, want)
	}
}

// The example's prometheus.io entry maps a llama.cpp pod's
// kvwatch.io/kv-unified label to the target's kv_unified; a pod without it
// leaves it unsaid.
func TestExampleKVUnifiedLabel(t *testing.T) {
	c := example(t)
	var groups []*targetgroup.Group
	for _, p := range []pod{
		{ns: "lab", name: "llama-0", ip: "10.0.4.5", phase: "Running", labels: map[string]string{"kvwatch.io/kv-unified": "true"},
			annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
			containers:  []container{{"llama-server", []port{{"http", 8080}}}}},
		{ns: "lab", name: "llama-1", ip: "10.0.4.6", phase: "Running",
			annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
			containers:  []container{{"llama-server", []port{{"http", 8080}}}}},
	} {
		groups = append(groups, p.group())
	}
	e := entries(c)[4]
	s := relabelTargets(e.set, e.targets, &c.Global, groups, nil)
	if len(s.Targets) != 2 || s.Targets[0].KVUnified == nil || !*s.Targets[0].KVUnified || s.Targets[1].KVUnified != nil {
		t.Fatalf("targets %+v (invalid %q), want llama-0 with kv_unified true and llama-1 without", s.Targets, s.Invalid)
	}
}
