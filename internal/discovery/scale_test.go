package discovery_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestDiscoveryScale measures `kvwatch serve` (the binary, its own
// process) discovering many pods from a real kube-apiserver and following
// their churn, for docs/benchmarks.md; scripts/bench-discovery.sh runs it.
// It is skipped unless KVWATCH_BENCH_DISCOVERY gives the number of pods:
//
//	KVWATCH_BENCH_KVWATCH        the kvwatch binary to run (required)
//	KVWATCH_BENCH_DISCOVERY      pods to discover (5000)
//	KVWATCH_BENCH_CHURN          pods replaced per minute (100)
//	KVWATCH_BENCH_CHURN_MINUTES  how long the churn lasts (5)
//	KVWATCH_BENCH_MISTAKE        pods an over-broad entry then matches too (10000; 0: none)
//	KVWATCH_BENCH_INTERVAL       serve's scrape interval (30s)
//
// The pods are llm-d decode and prefill pods (the example's llm-d entry)
// whose metrics ports are those of `kvwatch simulate` servers (SGLang,
// one per 25 pods). It reports serve's resident memory, live Go heap, CPU and
// goroutines from serve's own /metrics, and checks that after the churn
// serve has exactly the pods' targets and their series, no more.
func TestDiscoveryScale(t *testing.T) {
	pods := envInt(t, "KVWATCH_BENCH_DISCOVERY", 0)
	if pods == 0 {
		t.Skip("a benchmark: set KVWATCH_BENCH_DISCOVERY=5000 (scripts/bench-discovery.sh)")
	}
	bin := os.Getenv("KVWATCH_BENCH_KVWATCH")
	if bin == "" {
		t.Fatal("KVWATCH_BENCH_KVWATCH: the kvwatch binary to measure")
	}
	churn := envInt(t, "KVWATCH_BENCH_CHURN", 100)
	minutes := envInt(t, "KVWATCH_BENCH_CHURN_MINUTES", 5)
	mistake := envInt(t, "KVWATCH_BENCH_MISTAKE", 10000)
	interval := 30 * time.Second
	if v := os.Getenv("KVWATCH_BENCH_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		interval = d
	}

	k := kube{testenv.KubeAPIServer(t, testenv.KubeAlwaysAllow), t}
	const ns, wrong = "inference", "mistake"
	k.namespace(ns)
	k.namespace(wrong)
	dir := t.TempDir()

	// Engines: simulated SGLang servers, one per 25 pods.
	engines := max(1, pods/25)
	simBase := 23000
	testenv.Start(t, filepath.Join(dir, "simulate.log"), bin, "simulate", "--servers", fmt.Sprint(engines),
		"--engine", "sglang", "--base-port", fmt.Sprint(simBase))
	testenv.WaitOK(context.Background(), t, fmt.Sprintf("http://127.0.0.1:%d/metrics", simBase+engines-1))
	podPort := func(i int) int32 { return int32(simBase + i%engines) }

	// serve, with the example's llm-d entry over both namespaces.
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "kubernetes-discovery.yml"))
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	y = y[:strings.Index(y, "  # NVIDIA Dynamo")]
	y = strings.Replace(y, "  - role: pod\n    selectors:", fmt.Sprintf("  - role: pod\n    kubeconfig_file: %s\n    namespaces: {names: [%s, %s]}\n    target_limit: %d\n    selectors:",
		k.Kubeconfig, ns, wrong, pods+pods/5), 1)
	y = strings.Replace(y, "global:\n", fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: 4s\n", model.Duration(interval)), 1)
	cfg := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	testenv.Start(t, filepath.Join(dir, "serve.log"), bin, "serve", "--config.file", cfg, "--web.listen-address", addr,
		"--history", "0", "--log.level", "warn")
	base := "http://" + addr
	testenv.WaitOK(context.Background(), t, base+"/-/healthy")
	m := func() serveMetrics { return scrapeServe(t, base) }
	idle := m()

	podOf := func(i int) (map[string]string, int32) {
		role := "decode"
		if i%4 == 0 {
			role = "prefill"
		}
		return map[string]string{"llm-d.ai/role": role, "llm-d.ai/model": "qwen3-8b"}, podPort(i)
	}
	start := time.Now()
	createLabeledPods(t, k, ns, 0, pods, podOf)
	created := time.Since(start)
	var found time.Duration
	waitFor(t, 30*time.Minute, "every pod's target to be up", func() bool {
		s := m()
		if found == 0 && s.discovered == float64(pods) {
			found = time.Since(start)
		}
		return s.discovered == float64(pods) && s.up == float64(pods)
	})
	allUp := time.Since(start)
	settled := m()
	time.Sleep(60 * time.Second)
	steady := m()
	t.Logf("| %d pods discovered | pods created in %s; all %d discovered %s and all up %s after the first create | resident %s, live Go heap %s, %d goroutines (idle: %s, %s, %d) | CPU %.3f s/s over 60 s at a %s scrape interval |",
		pods, created.Round(time.Second), pods, found.Round(time.Second), allUp.Round(time.Second),
		mib(steady.rss), mib(steady.heap), int(steady.goroutines), mib(idle.rss), mib(idle.heap), int(idle.goroutines),
		(steady.cpu-settled.cpu)/60, interval)

	// Churn: every 60/churn seconds a pod goes and a new one comes.
	every := time.Minute / time.Duration(max(churn, 1))
	next := pods
	before, beforeAt := m(), time.Now()
	churnStart := time.Now()
	for i := 0; i < churn*minutes; i++ {
		time.Sleep(time.Until(churnStart.Add(time.Duration(i) * every))) // on schedule, whatever a request took
		k.deletePod(ns, fmt.Sprintf("pod-%05d", i))
		createLabeledPods(t, k, ns, next, 1, podOf)
		next++
	}
	replaced := next - pods
	waitFor(t, 5*time.Minute, "the churn to settle: the new pods up, the deleted ones gone", func() bool {
		s := m()
		return s.discovered == float64(pods) && s.targets == float64(pods) && s.upSeries == float64(pods) && s.up == float64(pods)
	})
	after, afterAt := m(), time.Now()
	t.Logf("| churn of %d pods a minute for %d min (%d pods replaced) | afterwards: %g targets, %g kvwatch_target_up series, %g kvwatch_kv_used_tokens series (pods: %d) | resident %s → %s, live Go heap %s → %s, goroutines %d → %d | CPU %.3f s/s during the churn |",
		churn, minutes, replaced, after.targets, after.upSeries, after.usedSeries, pods,
		mib(before.rss), mib(after.rss), mib(before.heap), mib(after.heap), int(before.goroutines), int(after.goroutines),
		(after.cpu-before.cpu)/afterAt.Sub(beforeAt).Seconds())
	if after.targets != float64(pods) || after.upSeries != float64(pods) || after.usedSeries != float64(pods) {
		t.Errorf("after the churn: %g targets, %g up series, %g KV series; want %d each (no target or series left behind)",
			after.targets, after.upSeries, after.usedSeries, pods)
	}

	if mistake == 0 {
		return
	}
	start = time.Now()
	createLabeledPods(t, k, wrong, 0, mistake, podOf)
	t.Logf("%d more pods created in %s", mistake, time.Since(start).Round(time.Second))
	waitFor(t, 30*time.Minute, "the over-limit refusal", func() bool { return m().overLimit >= float64(pods+mistake) })
	refused := time.Since(start)
	s := m()
	limit := pods + pods/5
	t.Logf("| %d more pods matched by mistake (target_limit %d) | refused %s after the first create; %g targets kept (the %d pods', up: %g, and those of the mistake's first updates, within the limit) | resident %s, live Go heap %s (%s, %s before) |",
		mistake, limit, refused.Round(time.Second), s.discovered, pods, s.up, mib(s.rss), mib(s.heap), mib(after.rss), mib(after.heap))
	if s.discovered > float64(limit) || s.up != float64(pods) {
		t.Errorf("after the mistake: %g discovered targets, %g of the pods up; want at most %d, and the %d pods up", s.discovered, s.up, limit, pods)
	}
	createEach(t, mistake, func(i int) error {
		zero := int64(0)
		return k.Client.CoreV1().Pods(wrong).Delete(context.Background(), fmt.Sprintf("pod-%05d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	waitFor(t, 10*time.Minute, "the mistake undone", func() bool { s := m(); return s.overLimit == 0 && s.discovered == float64(pods) })
	s = m()
	t.Logf("| the mistaken pods deleted | %g targets, %g up | resident %s, live Go heap %s |", s.discovered, s.up, mib(s.rss), mib(s.heap))
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// createLabeledPods creates n running pods in ns, named pod-FROM...
func createLabeledPods(t testing.TB, k kube, ns string, from, n int, of func(i int) (map[string]string, int32)) {
	t.Helper()
	createEach(t, n, func(i int) error {
		labels, port := of(from + i)
		return k.createPod(ns, fmt.Sprintf("pod-%05d", from+i), "127.0.0.1", labels, nil, "metrics", port)
	})
}

// serveMetrics is what the benchmark reads on serve's /metrics.
type serveMetrics struct {
	rss, heap, cpu, goroutines         float64
	targets, discovered, up, overLimit float64
	upSeries, usedSeries               float64
}

func scrapeServe(t testing.TB, base string) serveMetrics {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(name string, match func(*dto.Metric) bool) (float64, float64) {
		var s, n float64
		for _, mt := range mfs[name].GetMetric() {
			if match != nil && !match(mt) {
				continue
			}
			n++
			switch {
			case mt.GetGauge() != nil:
				s += mt.GetGauge().GetValue()
			case mt.GetCounter() != nil:
				s += mt.GetCounter().GetValue()
			default:
				s += mt.GetUntyped().GetValue()
			}
		}
		return s, n
	}
	var out serveMetrics
	out.rss, _ = sum("process_resident_memory_bytes", nil)
	// The live heap: the garbage collector's goal after its last cycle
	// over 1 + GOGC/100 (in-use bytes would count garbage not yet
	// collected).
	next, _ := sum("go_memstats_next_gc_bytes", nil)
	gogc, _ := sum("go_gc_gogc_percent", nil)
	out.heap = next / (1 + gogc/100)
	out.cpu, _ = sum("process_cpu_seconds_total", nil)
	out.goroutines, _ = sum("go_goroutines", nil)
	out.targets, _ = sum(signal.Targets.Name, nil)
	out.discovered, _ = sum(signal.DiscoveryTargets.Name, nil)
	out.overLimit, _ = sum(signal.DiscoveryDroppedTargets.Name, func(m *dto.Metric) bool { return testenv.LabelOf(m, "reason") == "over_limit" })
	pod := func(m *dto.Metric) bool { return strings.HasPrefix(testenv.LabelOf(m, "server"), "inference/") }
	out.up, out.upSeries = sum(signal.TargetUp.Name, pod)
	_, out.usedSeries = sum(signal.KVUsedTokens.Name, pod)
	return out
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }
