package stack

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// autoscalingConfig is a config with the two pools of a PD deployment
// under autoscalers.
const autoscalingConfig = `targets:
  - {url: http://127.0.0.1:30001, role: prefill, labels: {cluster: c1, pool: p1}}
  - {url: http://127.0.0.1:30002, role: decode, labels: {cluster: c1, pool: p1}}
autoscaling:
  target_kv_usage: 0.5
  prometheus_url: http://prometheus.example.svc:9090
  workloads:
    - {role: prefill, cluster: c1, pool: p1, namespace: inference, name: prefill-p1, max_servers: 8}
    - {role: decode, cluster: c1, pool: p1, namespace: inference, name: decode-p1, min_servers: 2, max_servers: 16}
`

// k8sObjects decodes every document of a generated manifest strictly into
// a new T.
func k8sObjects[T any](t *testing.T, b []byte) []T {
	t.Helper()
	var out []T
	for _, d := range k8sDocs(t, b) {
		var v T
		if err := sigsyaml.UnmarshalStrict(d, &v); err != nil {
			t.Fatalf("decode %s: %v", d, err)
		}
		out = append(out, v)
	}
	return out
}

// adapterQuery is the query prometheus-adapter sends for an HPA's external
// metric under rule r (its pkg/naming BuildExternal for a rule that is not
// namespaced): the metricsQuery template, delimiters << >>, with the
// selector's labels as name="value" matchers in the selector's (sorted)
// order. ok is false when the rule's name does not turn seriesName into
// the HPA's metric name, as the adapter's namer would not.
func adapterQuery(t *testing.T, r adapterRule, seriesName, metric string, sel map[string]string) (string, bool) {
	t.Helper()
	re, err := regexp.Compile(r.Name.Matches)
	if err != nil {
		t.Fatalf("name.matches %q: %v", r.Name.Matches, err)
	}
	m := re.FindStringSubmatchIndex(seriesName)
	if m == nil || string(re.ExpandString(nil, r.Name.As, seriesName, m)) != metric {
		return "", false
	}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ms []string
	for _, k := range keys {
		ms = append(ms, k+"="+strconv.Quote(sel[k]))
	}
	tmpl, err := template.New("metrics-query").Delims("<<", ">>").Parse(r.MetricsQuery)
	if err != nil {
		t.Fatalf("metricsQuery %q: %v", r.MetricsQuery, err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]any{"Series": seriesName, "LabelMatchers": strings.Join(ms, ",")}); err != nil {
		t.Fatal(err)
	}
	return b.String(), true
}

// TestAutoscalersQueryTheSignal: the KEDA ScaledObject's query and the
// query prometheus-adapter builds for the HPA's external metric both read
// the recorded signal of their own pool, and promtool, running the
// generated recording rules over series of that PD deployment, answers
// each with the servers worked out here. Pool p1 of cluster c2 has the
// same pool and roles: no query may read it.
func TestAutoscalersQueryTheSignal(t *testing.T) {
	cfg, err := config.Parse([]byte(autoscalingConfig), "autoscaling.yml")
	if err != nil {
		t.Fatal(err)
	}
	files, dir := generateDir(t, Options{Config: cfg})

	var queries []exprTest
	// Target 0.5 of 100,000-token servers: 50,000 a server. Prefill p1:
	// 30,000 + 40,000 = 70,000 → 1.4 → 2 servers, 3 with the spare.
	// Decode p1: 3 × 90,000 used + 3 × 20,000 wanted = 330,000 → 6.6 →
	// 7, and 8. Cluster c2's decode p1: 10,000 → 1, 2.
	want := map[string]float64{"prefill": 3, "decode": 8}
	for _, so := range k8sObjects[kedaScaledObject](t, files.Get(KEDAFile)) {
		tr := so.Spec.Triggers
		if len(tr) != 1 || tr[0].Type != "prometheus" || tr[0].MetricType != "AverageValue" ||
			tr[0].Metadata["threshold"] != "1" || tr[0].Metadata["ignoreNullValues"] != "false" ||
			tr[0].Metadata["serverAddress"] != "http://prometheus.example.svc:9090" {
			t.Errorf("ScaledObject %s triggers %+v: want one prometheus trigger at threshold 1 (AverageValue) that fails on no answer, at the configured URL", so.Metadata.Name, tr)
			continue
		}
		role := strings.TrimSuffix(so.Metadata.Name, "-p1")
		queries = append(queries, exprTest{Expr: tr[0].Metadata["query"], EvalTime: mins(2),
			ExpSamples: []expSample{{"{}", want[role]}}})
	}
	hpas := k8sObjects[hpaObject](t, files.Get(HPAFile))
	adapters := k8sObjects[corev1.ConfigMap](t, files.Get(PrometheusAdapterFile))
	if len(adapters) != 1 {
		t.Fatalf("%d adapter ConfigMaps, want 1", len(adapters))
	}
	var ac adapterConfig
	dec := yaml.NewDecoder(strings.NewReader(adapters[0].Data["config.yaml"]))
	dec.KnownFields(true)
	if err := dec.Decode(&ac); err != nil || len(ac.ExternalRules) != 1 {
		t.Fatalf("adapter config %q: %v, want one external rule", adapters[0].Data["config.yaml"], err)
	}
	r := ac.ExternalRules[0]
	if r.Resources.Namespaced == nil || *r.Resources.Namespaced {
		t.Errorf("adapter rule resources %+v: want namespaced: false (the recorded series has no namespace)", r.Resources)
	}
	for _, h := range hpas {
		ms := h.Spec.Metrics
		if len(ms) != 1 || ms[0].Type != autoscalingv2.ExternalMetricSourceType || ms[0].External == nil ||
			ms[0].External.Target.Type != autoscalingv2.AverageValueMetricType || ms[0].External.Target.AverageValue.String() != "1" {
			t.Errorf("HPA %s metrics %+v: want one external metric at an average value of 1", h.Metadata.Name, ms)
			continue
		}
		e := ms[0].External
		q, ok := adapterQuery(t, r, RecPoolDesiredServers, e.Metric.Name, e.Metric.Selector.MatchLabels)
		if !ok {
			t.Errorf("adapter rule %+v does not name %s %s", r, RecPoolDesiredServers, e.Metric.Name)
			continue
		}
		queries = append(queries, exprTest{Expr: q, EvalTime: mins(2),
			ExpSamples: []expSample{{"{}", want[e.Metric.Selector.MatchLabels[signal.LabelRole]]}}})
	}
	if len(queries) != 4 {
		t.Fatalf("%d queries from %d ScaledObjects and %d HPAs, want 2 of each", len(queries), len(queries)-len(hpas), len(hpas))
	}

	var in []inputSeries
	add := func(s srv, used, demand float64) {
		in = append(in, inputSeries{s.sel(signal.TargetUp.Name), constant(1, 5)},
			inputSeries{s.sel(signal.KVUsedTokens.Name), constant(used, 5)},
			inputSeries{s.sel(signal.KVCapacityTokens.Name), constant(100000, 5)})
		if demand >= 0 {
			in = append(in, inputSeries{s.sel(signal.KVDemandTokens.Name), constant(demand, 5)})
		}
	}
	add(srv{"prefill-0", "prefill", "c1", "p1"}, 30000, -1)
	add(srv{"prefill-1", "prefill", "c1", "p1"}, 40000, -1)
	for _, n := range []string{"decode-0", "decode-1", "decode-2"} {
		add(srv{n, "decode", "c1", "p1"}, 90000, 20000)
	}
	add(srv{"other-0", "decode", "c2", "p1"}, 10000, 0)
	b, err := marshalYAML(ruleTestFile{RuleFiles: []string{"kvwatch-recording.yml"}, EvaluationInterval: testStep,
		Tests: []ruleTest{{Interval: testStep, InputSeries: in, PromqlExprTests: queries}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules", "autoscalers.test.yml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range promVersions(t) {
		t.Run("prometheus"+v.name, func(t *testing.T) {
			if out := run(t, filepath.Join(dir, "rules"), v.promtool, "test", "rules", "autoscalers.test.yml"); !strings.Contains(out, "SUCCESS") {
				t.Errorf("promtool: %s", out)
			}
		})
	}
}

// TestAutoscalersOnlyWithWorkloads: without autoscaling.workloads there is
// nothing to scale and no autoscaler file; the recording rule is there
// either way.
func TestAutoscalersOnlyWithWorkloads(t *testing.T) {
	files, err := Generate(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{KEDAFile, HPAFile, PrometheusAdapterFile} {
		if files.Get(p) != nil {
			t.Errorf("%s generated without autoscaling.workloads", p)
		}
	}
	if !bytes.Contains(files.Get(RecordingRulesFile), []byte("record: "+RecPoolDesiredServers+"\n")) {
		t.Errorf("%s lacks %s", RecordingRulesFile, RecPoolDesiredServers)
	}
}

// TestAutoscalersRefuseBadSelectors: a pool label that is no Kubernetes
// label value cannot select the HPA's metric; generation says which and
// how to fix it.
func TestAutoscalersRefuseBadSelectors(t *testing.T) {
	cfg := config.Default()
	cfg.Autoscaling.Workloads = []config.ScaledWorkload{{Role: "decode", Pool: "pool a", Namespace: "inference",
		Name: "decode-a", Kind: "Deployment", APIVersion: "apps/v1", MinServers: 1, MaxServers: 4}}
	_, err := Generate(Options{Config: cfg})
	want := `autoscaling.workloads[0].pool "pool a" cannot select the HPA's external metric`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "rename the pool's label") {
		t.Errorf("Generate = %v, want an error saying %s and how to fix it", err, want)
	}
}
