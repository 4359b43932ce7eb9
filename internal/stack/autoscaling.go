package stack

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/rulefmt"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Autoscaling in the stack (docs/planning.md, "Autoscaling"): the
// recording rule of the autoscaling signal and its promtool tests, and the
// autoscaler objects of the Kubernetes output for the workloads of
// autoscaling.workloads: a KEDA ScaledObject per pool, and per pool an HPA
// on the external metric that one prometheus-adapter rule serves.

// RecPoolDesiredServers is the autoscaling signal recorded per pool from
// the exported series, with the arithmetic of kvwatch_pool_desired_servers
// (kv.DesiredServers). The generated autoscalers read this series: it
// covers a pool whose servers several serves scrape (shards, boxes), each
// of whose own kvwatch_pool_desired_servers sees only part of the pool.
const RecPoolDesiredServers = "pool:kvwatch_pool_desired_servers"

// autoscalingRecording appends the autoscaling rule to g, the aggregates
// group, after the pool sums it reads.
func autoscalingRecording(g *rulefmt.RuleGroup, o Options) {
	o = o.WithDefaults()
	g.Rules = append(g.Rules, rulefmt.Rule{Record: RecPoolDesiredServers,
		Expr: desiredServersExpr(o.Config.Autoscaling.TargetKVUsage)})
}

// desiredServersExpr is kv.DesiredServers in PromQL over the pool sums,
// its operations in the same order (so the same float64 arithmetic):
//
//	ceil((used + demand) / (target × (capacity / servers))) + 1
//
// and absent where kvwatch_pool_desired_servers is: a pool with a target
// down or not reporting used and capacity tokens (the partial marker), and
// a pool where some servers report demand and others do not. A pool with
// no demand at all counts none, as the Go side does.
func desiredServersExpr(target float64) string {
	pl := strings.Join([]string{signal.LabelCluster, signal.LabelPool, signal.LabelRole}, ", ")
	used, capa := recSum("pool", signal.KVUsedTokens), recSum("pool", signal.KVCapacityTokens)
	n := RecReporting("pool")
	return fmt.Sprintf("ceil((%s + (%s or %s * 0)) / (%s * ((%s > 0) / %s))) + 1"+
		" unless on (%s) (%s == 1)"+
		" unless on (%s) (count by (%s) (%s) < %s)",
		used, recSum("pool", signal.KVDemandTokens), used, num(target), capa, n,
		pl, RecPartial("pool"),
		pl, pl, signal.KVDemandTokens.Name, n)
}

// autoscalingRuleTests are the promtool tests of the autoscaling rule. The
// inputs are multiples of the target × a server's 100,000 tokens, so the
// answers below hold for any target; each is worked out by hand as
// ceil(load / (target × size)) + 1, load and size in those multiples.
func autoscalingRuleTests(o Options) []ruleTest {
	o = o.WithDefaults()
	const size = 100000
	t := o.Config.Autoscaling.TargetKVUsage
	of := func(k float64) float64 { return k * t * size }
	const n = 5
	var in []inputSeries
	type server struct {
		s                  srv
		up                 bool
		used, demand, capa float64 // demand < 0: not reported
	}
	add := func(ss ...server) {
		for _, x := range ss {
			up := 0.0
			if x.up {
				up = 1
			}
			in = append(in, inputSeries{x.s.sel(signal.TargetUp.Name), constant(up, n)})
			if !x.up {
				continue
			}
			in = append(in, inputSeries{x.s.sel(signal.KVUsedTokens.Name), constant(x.used, n)},
				inputSeries{x.s.sel(signal.KVCapacityTokens.Name), constant(x.capa, n)})
			if x.demand >= 0 {
				in = append(in, inputSeries{x.s.sel(signal.KVDemandTokens.Name), constant(x.demand, n)})
			}
		}
	}
	// A PD pool pd: prefill 2 × 0.75 = 1.5 → 2 servers, 3 with the spare;
	// decode 4 × (0.8 used + 0.075 wanted) = 3.5 → 4, 5. Never blended:
	// 5 servers' 5 multiples would be 5 → 6.
	for i := range 2 {
		add(server{srv{fmt.Sprintf("prefill-%d", i), "prefill", testCluster, "pd"}, true, of(0.75), -1, size})
	}
	for i := range 4 {
		add(server{srv{fmt.Sprintf("decode-%d", i), "decode", testCluster, "pd"}, true, of(0.8), of(0.075), size})
	}
	// Idle pool pi: 0 → 0 servers, 1 with the spare.
	add(server{srv{"idle-0", "decode", testCluster, "pi"}, true, 0, -1, size},
		server{srv{"idle-1", "decode", testCluster, "pi"}, true, 0, -1, size})
	// Overloaded pool po: 0.9 used and 10 wanted on one server = 10.9 →
	// 11, 12.
	add(server{srv{"over-0", "decode", testCluster, "po"}, true, of(0.9), of(10), size})
	// No cluster or pool label: 0.5 → 1, 2.
	add(server{srv{"bare-0", "unified", "", ""}, true, of(0.5), -1, size})
	// Pool px has a target down, pool pq demand from one server of two:
	// no answer for either (a lower bound is no count of servers).
	add(server{srv{"down-0", "decode", testCluster, "px"}, true, of(0.5), -1, size},
		server{srv{"down-1", "decode", testCluster, "px"}, false, 0, -1, 0})
	add(server{srv{"part-0", "decode", testCluster, "pq"}, true, of(0.5), of(0.1), size},
		server{srv{"part-1", "decode", testCluster, "pq"}, true, of(0.5), -1, size})

	pool := func(role, cluster, p string) string {
		l := map[string]string{signal.LabelRole: role}
		if cluster != "" {
			l[signal.LabelCluster] = cluster
		}
		if p != "" {
			l[signal.LabelPool] = p
		}
		return RecPoolDesiredServers + renderLabels(l)
	}
	return []ruleTest{{Interval: testStep, InputSeries: in, PromqlExprTests: []exprTest{{
		Expr: RecPoolDesiredServers, EvalTime: mins(2),
		ExpSamples: []expSample{
			{pool("prefill", testCluster, "pd"), 3},
			{pool("decode", testCluster, "pd"), 5},
			{pool("decode", testCluster, "pi"), 1},
			{pool("decode", testCluster, "po"), 12},
			{pool("unified", "", ""), 2},
		}}}}}
}

// The autoscaler objects.

// Names of the autoscaling manifests (with autoscaling.workloads).
const (
	KEDAFile              = "kubernetes/autoscaling-keda.yaml"
	HPAFile               = "kubernetes/autoscaling-hpa.yaml"
	PrometheusAdapterFile = "kubernetes/prometheus-adapter.yaml"
	// prometheusAdapterConfigMap holds the adapter rule, in kvwatch's
	// namespace (where kube-prometheus runs its adapter).
	prometheusAdapterConfigMap = "kvwatch-prometheus-adapter"
)

// kedaScaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), the fields
// kvwatch writes: KEDA's Go module would bring its whole dependency tree
// into kvwatch's go.mod for one object, so the tests check these fields
// against the CRD that module ships (tools/kubectl-validate/build.sh).
type kedaScaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       kedaSpec          `json:"spec"`
}

type kedaSpec struct {
	ScaleTargetRef  kedaTarget    `json:"scaleTargetRef"`
	MinReplicaCount int32         `json:"minReplicaCount"`
	MaxReplicaCount int32         `json:"maxReplicaCount"`
	Triggers        []kedaTrigger `json:"triggers"`
}

type kedaTarget struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

type kedaTrigger struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	MetricType string            `json:"metricType"`
	Metadata   map[string]string `json:"metadata"`
}

// hpaObject is an autoscaling/v2 HorizontalPodAutoscaler without the
// status the API type carries (a generated object has none).
type hpaObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta                         `json:"metadata"`
	Spec            autoscalingv2.HorizontalPodAutoscalerSpec `json:"spec"`
}

// adapterConfig is prometheus-adapter's config file (its
// MetricsDiscoveryConfig): only external rules.
type adapterConfig struct {
	ExternalRules []adapterRule `yaml:"externalRules"`
}

type adapterRule struct {
	SeriesQuery  string           `yaml:"seriesQuery"`
	Resources    adapterResources `yaml:"resources"`
	Name         adapterName      `yaml:"name"`
	MetricsQuery string           `yaml:"metricsQuery"`
}

type adapterResources struct {
	// Namespaced false: the adapter does not add the HPA's namespace to
	// the query (the recorded series has none).
	Namespaced *bool `yaml:"namespaced"`
}

type adapterName struct {
	Matches string `yaml:"matches"`
	As      string `yaml:"as"`
}

// poolSelector is the label set of w's pool on the recorded series:
// role, kv_cluster and pool, the last two "" (absent) when the pool has
// none, so that no other pool's series matches.
func poolSelector(w config.ScaledWorkload) map[string]string {
	return map[string]string{signal.LabelRole: w.Role, signal.LabelCluster: w.Cluster, signal.LabelPool: w.Pool}
}

// desiredQuery is the PromQL a KEDA trigger asks for w's pool: the
// recorded signal; max, so that one answer comes back where two rulers
// record it (an HA pair behind a deduplicating query layer).
func desiredQuery(w config.ScaledWorkload) string {
	l := poolSelector(w)
	var ms []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		ms = append(ms, k+"="+strconv.Quote(l[k]))
	}
	return "max(" + RecPoolDesiredServers + "{" + strings.Join(ms, ",") + "})"
}

// validateWorkloadLabels checks that w's pool can be an HPA selector:
// Kubernetes label values (the config allows any string).
func validateWorkloadLabels(i int, w config.ScaledWorkload) []error {
	var errs []error
	for _, k := range []struct{ key, v string }{{"cluster", w.Cluster}, {"pool", w.Pool}} {
		for _, m := range validation.IsValidLabelValue(k.v) {
			errs = append(errs, fmt.Errorf("autoscaling.workloads[%d].%s %q cannot select the HPA's external metric: %s; rename the pool's label in the targets and here", i, k.key, k.v, m))
		}
	}
	return errs
}

// autoscalingObjects returns the ScaledObjects, the HPAs and the
// prometheus-adapter ConfigMap for o's workloads (nil when there are
// none). meta gives an object kvwatch's labels in kvwatch's namespace;
// the autoscalers go into their workload's.
func autoscalingObjects(o Options, meta func(name string, extra map[string]string) metav1.ObjectMeta) (keda, hpas []any, adapter *corev1.ConfigMap, err error) {
	a := o.Config.Autoscaling
	if len(a.Workloads) == 0 {
		return nil, nil, nil, nil
	}
	var errs []error
	for i, w := range a.Workloads {
		errs = append(errs, validateWorkloadLabels(i, w)...)
	}
	if len(errs) > 0 {
		return nil, nil, nil, fmt.Errorf("generate the autoscalers: %w", errors.Join(errs...))
	}
	one := resource.MustParse("1")
	for _, w := range a.Workloads {
		m := meta(w.Name, nil)
		m.Namespace = w.Namespace
		keda = append(keda, kedaScaledObject{APIVersion: "keda.sh/v1alpha1", Kind: "ScaledObject", Metadata: m,
			Spec: kedaSpec{
				ScaleTargetRef:  kedaTarget{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name},
				MinReplicaCount: int32(w.MinServers), MaxReplicaCount: int32(w.MaxServers),
				Triggers: []kedaTrigger{{Type: "prometheus", Name: "kv-desired-servers",
					// AverageValue 1: replicas = ceil(signal / 1), the signal.
					MetricType: "AverageValue",
					Metadata: map[string]string{
						"serverAddress": a.PrometheusURL,
						"query":         desiredQuery(w),
						"threshold":     "1",
						// No answer (a server down) is an error, on which the
						// HPA keeps the replicas it has, not 0.
						"ignoreNullValues": "false",
					}}},
			}})
		hpas = append(hpas, hpaObject{
			TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			Metadata: m,
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name},
				MinReplicas:    ptr(int32(w.MinServers)),
				MaxReplicas:    int32(w.MaxServers),
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType,
					External: &autoscalingv2.ExternalMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: signal.PoolDesiredServers.Name,
							Selector: &metav1.LabelSelector{MatchLabels: poolSelector(w)}},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &one},
					}}},
			},
		})
	}
	y, err := marshalYAML(adapterConfigOf())
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate the prometheus-adapter rule: %w", err)
	}
	adapter = &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(prometheusAdapterConfigMap, nil), Data: map[string]string{"config.yaml": string(y)}}
	return keda, hpas, adapter, nil
}

// adapterConfigOf is the prometheus-adapter rule that serves the recorded
// signal as the external metric kvwatch_pool_desired_servers; each HPA
// selects its pool with the metric's label selector, which the adapter
// turns into the query's label matchers.
func adapterConfigOf() adapterConfig {
	return adapterConfig{ExternalRules: []adapterRule{{
		SeriesQuery:  RecPoolDesiredServers,
		Resources:    adapterResources{Namespaced: ptr(false)},
		Name:         adapterName{Matches: "^" + RecPoolDesiredServers + "$", As: signal.PoolDesiredServers.Name},
		MetricsQuery: "max(<<.Series>>{<<.LabelMatchers>>})",
	}}}
}
