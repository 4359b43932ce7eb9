package querycheck_test

// kvwatch's own generated dashboards and rules must not ship a query that
// matches nothing: checked offline against the catalog (with kvwatch's own
// metrics), and against kvwatch serve fed by the simulator.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/cli"
	"github.com/kvwatch/kvwatch/internal/querycheck"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// generatedQueryFiles generates the default stack into a directory and
// returns every file holding queries: dashboards, rule files, the
// PrometheusRule and the dashboards ConfigMap.
func generatedQueryFiles(t *testing.T) []string {
	t.Helper()
	files, err := stack.Generate(stack.Options{GrafanaAdminPassword: "x"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range files.Paths() {
		switch {
		case strings.HasPrefix(p, "grafana/dashboards/") && strings.HasSuffix(p, ".json"),
			strings.HasPrefix(p, "rules/") && !strings.HasSuffix(p, ".test.yml"),
			p == "kubernetes/prometheusrule.yaml", p == "kubernetes/dashboards.yaml":
			out = append(out, filepath.Join(dir, p))
		}
	}
	if len(out) < 5 {
		t.Fatalf("generated stack has only %d query files: %q", len(out), out)
	}
	return out
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
	// hit rates (the mixed fleet has none of them).
	for i, scenario := range []string{"mixed", "vllm-lmcache", "sglang-hicache", "dynamo-kvbm"} {
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
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var out, errb strings.Builder
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--config.file", cfg, "--web.listen-address", addr},
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
	base := "http://" + addr
	// The recording rules run at their first evaluation (within 15s).
	waitNames(t, base, "kvwatch_kv_usage_ratio", "kvwatch_target_up", "kvwatch_server_info", "kvwatch_prefix_cache_hit_tokens_total",
		"kv_cluster:kvwatch_kv_used_tokens:sum", "pool:kvwatch_kv_capacity_tokens:sum", "fleet:kvwatch_kv_used_tokens:sum")
	rep := checkJSON(t, -1, append(generatedQueryFiles(t), "--against", base)...) // exit 1 for the absent planning series below; each finding is judged
	// No errors. Warnings only where serve cannot hold the series by
	// design: rate rules it computes on demand over a history too short for
	// a 5m rate, series that exist only in a failure state or while an alert
	// fires, and up, which only a scraping Prometheus writes.
	// The pool planning families are absent while unknown
	// (docs/planning.md), as they are here: the simulator runs on a manual
	// clock, so nothing runs and there is no mix to measure, and the mixed
	// pool holds servers without token KV (LMDeploy), so no drain answer.
	// LMCache's L1 capacity in bytes is derived from used / usage, so it is
	// unknown while the L1 is empty, as here.
	absentWhileUnknown := map[string]bool{"kvwatch_kv_pool_capacity_bytes": true,
		"kvwatch_pool_workload_headroom_requests": true, "kvwatch_pool_finished_headroom_requests": true,
		"kvwatch_pool_drain_margin_ratio": true, "kvwatch_pool_drain_margin_tokens": true,
	}
	for _, f := range rep.Findings {
		name, _, _ := strings.Cut(f.Message, ": no series")
		if f.Kind == querycheck.KindNoSeries && absentWhileUnknown[name] {
			continue
		}
		if f.Severity != querycheck.Warning {
			t.Errorf("unexpected error %s in %s: %s", f.Kind, f.Where, f.Message)
			continue
		}
		ok := f.Kind == querycheck.KindRecordedMissing && (strings.Contains(name, "rate5m") || strings.Contains(name, "deriv15m")) ||
			f.Kind == querycheck.KindNoSeries && (name == "kvwatch_target_scrape_error" || name == "ALERTS" || name == "up")
		if !ok {
			t.Errorf("unexpected warning %s in %s: %s", f.Kind, f.Where, f.Message)
		}
	}
}
