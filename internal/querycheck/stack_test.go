package querycheck_test

// kvwatch's own generated dashboards and rules must not ship a query that
// matches nothing: checked offline against the catalog (with kvwatch's own
// metrics), and against kvwatch serve fed by the simulator.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/cli"
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/querycheck"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// generatedQueryFiles generates the default stack into a directory and
// returns every file holding queries: dashboards, rule files, the
// PrometheusRule and the dashboards ConfigMap.
func generatedQueryFiles(t *testing.T) []string {
	t.Helper()
	_, files := generateStack(t, stack.Options{GrafanaAdminPassword: "x"})
	return files
}

// generateStack writes the stack of o into a directory and returns it with
// the files holding queries.
func generateStack(t *testing.T, o stack.Options) (dir string, queries []string) {
	t.Helper()
	files, err := stack.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range files.Paths() {
		switch {
		case strings.HasPrefix(p, "grafana/dashboards/") && strings.HasSuffix(p, ".json"),
			strings.HasPrefix(p, "rules/") && !strings.HasSuffix(p, ".test.yml"),
			p == "kubernetes/prometheusrule.yaml", p == "kubernetes/dashboards.yaml":
			queries = append(queries, filepath.Join(dir, p))
		}
	}
	if len(queries) < 5 {
		t.Fatalf("generated stack has only %d query files: %q", len(queries), queries)
	}
	return dir, queries
}

// startServe runs kvwatch serve in-process with args on a free loopback
// address, stopped with the test, and returns its base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var out, errb strings.Builder
	go func() {
		done <- cli.Run(ctx, append([]string{"serve", "--web.listen-address", addr}, args...),
			cli.Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not stop within 10s")
		}
		if t.Failed() {
			t.Logf("serve stderr:\n%s", errb.String())
		}
	})
	return "http://" + addr
}

func TestGeneratedStackOffline(t *testing.T) {
	files := generatedQueryFiles(t)
	rep := checkJSON(t, 0, files...)
	compare(t, rep, nil)
	if rep.Queries < 50 {
		t.Errorf("checked %d queries; the generated stack has more than 50", rep.Queries)
	}
}

func TestGeneratedStackAgainstServe(t *testing.T) {
	testenv.StateDir(t)
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\ntargets:\n")
	// The mixed fleet in pool p1, and in p2 the cache tiers the tier
	// panels and alert read: LMCache's bytes, HiCache's hit tokens, KVBM's
	// hit rates, and the state pool (SWA on the GPU) the state panels and
	// alert read (the mixed fleet has none of them).
	for i, scenario := range []string{"mixed", "vllm-lmcache", "sglang-hicache", "dynamo-kvbm", "sglang-hybrid"} {
		pool := "p1"
		if i > 0 {
			pool = "p2"
		}
		for _, ep := range startSim(t, scenario) {
			role := ""
			if ep.Role != "" {
				role = fmt.Sprintf("    role: %s\n", ep.Role)
			}
			fmt.Fprintf(&b, "  - name: %s-%s\n    url: %s\n%s    labels: {cluster: c1, pool: %s}\n", scenario, ep.Name, ep.URL+ep.MetricsPath, role, pool)
		}
	}
	cfg := filepath.Join(t.TempDir(), "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--config.file", cfg)
	// The recording rules run at their first evaluation (within 15s).
	waitNames(t, base, "kvwatch_kv_usage_ratio", "kvwatch_target_up", "kvwatch_server_info", "kvwatch_prefix_cache_hit_tokens_total",
		"kv_cluster:kvwatch_kv_used_tokens:sum", "pool:kvwatch_kv_capacity_tokens:sum", "fleet:kvwatch_kv_used_tokens:sum")
	rep := checkJSON(t, 0, append(generatedQueryFiles(t), "--against", base)...)
	judgeGeneratedStack(t, rep, false, true)
}

// judgeGeneratedStack fails on every finding of the generated stack
// against a live store but those absent by design: no errors; warnings
// only for trend rules (recorded, no series: absent while nothing fills),
// with shortHistory for rate rules too (a 5m rate needs two samples), for
// the projection's rules (recorded by Prometheus only, every 5m, the peak
// after a day and the projection after 7: never in serve), for kvwatch families that exist only in some deployments or
// states (the checker names the condition: "no series now; it exists
// only ..."), and, unless scraping (a Prometheus), for up, which only a
// scraping Prometheus writes. Panels and variables that say when they are
// empty are info.
func judgeGeneratedStack(t *testing.T, rep *querycheck.Report, scraping, shortHistory bool) {
	t.Helper()
	for _, f := range rep.Findings {
		name, _, _ := strings.Cut(f.Message, ": no series")
		switch {
		case f.Severity == querycheck.Info:
		case f.Severity != querycheck.Warning:
			t.Errorf("unexpected %s %s in %s: %s", f.Severity, f.Kind, f.Where, f.Message)
		case f.Kind == querycheck.KindRecordedMissing && (shortHistory && strings.HasSuffix(name, "rate5m") || strings.HasSuffix(name, ":deriv15m")):
		case f.Kind == querycheck.KindRecordedMissing && slices.Contains([]string{stack.RecPoolLoadRatio, stack.RecPoolPeakRatio, stack.RecPoolProjectedPeak}, name):
		case f.Kind == querycheck.KindNoSeries && strings.Contains(f.Message, ": no series now; it exists only "):
		case f.Kind == querycheck.KindNoSeries && name == "up" && !scraping:
		default:
			t.Errorf("unexpected warning %s in %s: %s", f.Kind, f.Where, f.Message)
		}
	}
}

// TestGeneratedStackCalmPD (issue 28 item 6): what `kvwatch stack generate`
// writes for a calm PD deployment without cluster or pool labels (the
// pd-sglang scenario: a router, one prefill and one decode server, each
// pool of one server, no cache tiers, no TGI, one DP rank) passes `check
// queries` against the serve that watches it and against Debian's
// Prometheus running the generated prometheus.yml: no errors, and the
// panels and variables empty by design say so and are info. The
// Prometheus scrapes the engines too: their own series sit beside
// kvwatch's, labelled alike.
func TestGeneratedStackCalmPD(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
	prom := testenv.Tool(t, "prometheus", "prometheus")
	eps := testenv.Builtin(t, "pd-sglang", sim.Options{Seed: 11}).Endpoints()
	var b strings.Builder
	b.WriteString("global: {scrape_interval: 1s, evaluation_interval: 1s}\ntargets:\n")
	for _, ep := range eps {
		fmt.Fprintf(&b, "  - {name: %s, url: %q, role: %s}\n", ep.Name, ep.URL+ep.MetricsPath, ep.Role)
	}
	cfgDir := t.TempDir()
	cfgFile := filepath.Join(cfgDir, "kvwatch.yml")
	if err := os.WriteFile(cfgFile, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	serveBase := startServe(t, "--config.file", cfgFile)
	promAddr := freeAddr(t)
	dir, files := generateStack(t, stack.Options{Config: cfg, ConfigFile: []byte(b.String()),
		KVWatchAddress: strings.TrimPrefix(serveBase, "http://"), PrometheusAddress: promAddr,
		AlertmanagerAddress: freeAddr(t), GrafanaAddress: "127.0.0.1:1", GrafanaAdminPassword: "x",
		ScrapeInterval: model.Duration(time.Second), EvaluationInterval: model.Duration(time.Second)})

	// serve's recording rules, and the rates of two scrapes.
	waitNames(t, serveBase, "kvwatch_kv_usage_ratio", "kvwatch_target_up", "fleet:kvwatch_prefix_cache_hit_per_query_tokens:ratio_rate5m",
		"fleet:kvwatch_generation_tokens:rate5m", "pool:kvwatch_kv_used_tokens:deriv15m")
	rep := checkJSON(t, 0, append(files, "--against", serveBase)...)
	t.Log(rep.Summary())
	judgeGeneratedStack(t, rep, false, false)
	declaredEmpty(t, rep)

	// The engines' own names are not in serve: each is an error that says
	// which kvwatch_* series kvwatch exports for it, where there is one.
	raw := filepath.Join(t.TempDir(), "raw.promql")
	if err := os.WriteFile(raw, []byte("sglang:token_usage > 0.9\nsglang:num_queue_reqs > 10\nsglang:e2e_request_latency_seconds_bucket\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const scrapeToo = " (or scrape the engines too, as the engines-<role> jobs of `kvwatch stack generate` do)"
	rep = checkJSON(t, 1, raw, "--against", serveBase)
	compareMessages(t, rep, []string{
		"sglang:token_usage: no series; sglang:token_usage is not scraped here: kvwatch exports kvwatch_kv_usage_ratio" + scrapeToo,
		`sglang:num_queue_reqs: no series; sglang:num_queue_reqs is not scraped here: kvwatch exports kvwatch_requests_queued{queue="waiting"}` + scrapeToo,
		"sglang:e2e_request_latency_seconds_bucket: no series; sglang:e2e_request_latency_seconds_bucket is not scraped here: " +
			"this store holds kvwatch's normalized series, not SGLang's own" + scrapeToo,
	})

	promBase := startPrometheus(t, prom, filepath.Join(dir, "prometheus.yml"), promAddr)
	// serve's series, the recorded ones, an alert (the watchdog) and the
	// decode engine's own series from the engine jobs.
	waitNames(t, promBase, "kvwatch_kv_usage_ratio", "kvwatch_targets", "fleet:kvwatch_prefix_cache_hit_per_query_tokens:ratio_rate5m",
		"fleet:kvwatch_generation_tokens:rate5m", "pool:kvwatch_kv_used_tokens:deriv15m", "ALERTS", "sglang:token_usage",
		"sglang:e2e_request_latency_seconds_bucket")
	for _, role := range []string{"prefill", "decode"} {
		q := fmt.Sprintf(`sglang:token_usage{job="engines-%s",server=%q,role=%q}`, role, role, role)
		if n := promCount(t, promBase, q); n == 0 {
			t.Errorf("%s: no series: the engine job labels the engine's series as kvwatch labels its own", q)
		}
	}
	rep = checkJSON(t, 0, append(files, "--against", promBase)...)
	t.Log(rep.Summary())
	judgeGeneratedStack(t, rep, true, false)
	declaredEmpty(t, rep)
	// The engine jobs bring the engines' own names; token_usage's meaning
	// changed (SGLang #22555).
	compareMessages(t, checkJSON(t, 0, raw, "--against", promBase), []string{
		"sglang:token_usage: its meaning changed in SGLang #22555: it is now the largest usage of the full-attention, SWA and Mamba pools, " +
			"not the KV cache's on a hybrid model; sglang:full_token_usage is the full-attention KV pool alone (SGLang #19982 and later); " +
			"query sglang:full_token_usage for what it meant before (not rewritten by --fix: check what the query means)",
	})
}

// compareMessages compares the messages of rep's errors and warnings with
// want, in order.
func compareMessages(t *testing.T, rep *querycheck.Report, want []string) {
	t.Helper()
	var got []string
	for _, f := range rep.Findings {
		if f.Severity != querycheck.Info {
			got = append(got, f.Message)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// declaredEmpty checks that the panels and variables a calm PD deployment
// leaves empty, each worked out by hand from the scenario, are reported
// as info naming their condition.
func declaredEmpty(t *testing.T, rep *querycheck.Report) {
	t.Helper()
	for _, want := range []struct{ where, condition string }{
		{"variable kv_cluster", "the variable declares it: empty when no target has a cluster"},
		{"variable pool", "the variable declares it: empty when no target has a pool"},
		{`panel "Per-rank KV usage"`, "empty when every selected server has one DP rank"},
		{`panel "Reserved ratio"`, "empty when the engine makes no reservations (only TGI does)"},
		{`panel "Planning: N−1 drain margin"`, "empty when every selected pool has a single server"},
		{`panel "Cache tiers and pools: usage"`, "empty when no selected server reports further KV pools or cache tiers"},
	} {
		found := false
		for _, f := range rep.Findings {
			if strings.Contains(f.Where, want.where) && strings.HasSuffix(f.File, ".json") {
				found = true
				if f.Severity != querycheck.Info || !strings.Contains(f.Message, want.condition) {
					t.Errorf("%s: %s %s %q, want info naming %q", f.Where, f.Severity, f.Kind, f.Message, want.condition)
				}
			}
		}
		if !found {
			t.Errorf("no finding for %s, want info naming %q", want.where, want.condition)
		}
	}
}

// promCount returns the number of series an instant query returns.
func promCount(t *testing.T, base, q string) int {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	return len(env.Data.Result)
}
