package querycheck_test

// Live tests: the simulator's pages read directly, a real Prometheus
// (Debian) scraping the simulator, and kvwatch serve fed by it, each as
// --against of `kvwatch check queries`, run in-process through cli.Run.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/cli"
	"github.com/kvwatch/kvwatch/internal/querycheck"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// startSim runs a built-in scenario on a manual clock (pages do not
// change, which is all a name check needs).
func startSim(t *testing.T, scenario string) []sim.Endpoint {
	t.Helper()
	return testenv.Builtin(t, scenario, sim.Options{Seed: 3, ManualClock: true}).Endpoints()
}

// run runs kvwatch with args in-process.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), args, cli.Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// checkJSON runs check queries -o json and decodes the report.
func checkJSON(t *testing.T, wantCode int, args ...string) *querycheck.Report {
	t.Helper()
	code, out, errs := run(t, append([]string{"check", "queries", "-o", "json"}, args...)...)
	var rep querycheck.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check queries %q: -o json is not JSON (exit %d): %v\n%s\nstderr:\n%s", args, code, err, out, errs)
	}
	if wantCode >= 0 && code != wantCode { // -1: the caller judges the findings
		var b strings.Builder
		rep.WriteText(&b, false)
		t.Errorf("check queries %q = exit %d, want %d\n%s\nstderr:\n%s", args, code, wantCode, b.String(), errs)
	}
	return &rep
}

// finding is one expected finding, worked out by hand from the inputs and
// the simulator's pages.
type finding struct {
	where    string
	kind     querycheck.Kind
	severity querycheck.Severity
	selector string
	suggest  string
}

func compare(t *testing.T, rep *querycheck.Report, want []finding) {
	t.Helper()
	var got []finding
	for _, f := range rep.Findings {
		if f.Severity != querycheck.Info {
			got = append(got, finding{f.Where, f.Kind, f.Severity, f.Selector, f.Suggestion})
		}
	}
	var missing, extra []string
	used := make([]bool, len(got))
	for _, w := range want {
		i := slices.IndexFunc(got, func(g finding) bool {
			return strings.Contains(g.where, w.where) && g.kind == w.kind && g.severity == w.severity && g.selector == w.selector && g.suggest == w.suggest
		})
		for i >= 0 && used[i] {
			j := slices.IndexFunc(got[i+1:], func(g finding) bool { return g == got[i] })
			if j < 0 {
				i = -1
				break
			}
			i += j + 1
		}
		if i < 0 {
			missing = append(missing, fmt.Sprint(w))
			continue
		}
		used[i] = true
	}
	for i, g := range got {
		if !used[i] {
			extra = append(extra, fmt.Sprint(g))
		}
	}
	if len(missing)+len(extra) > 0 {
		t.Errorf("findings differ\nmissing:\n  %s\nunexpected:\n  %s", strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
	}
}

// liveBroken are the findings for testdata/live/broken.yml against the
// "mixed" fleet; scraped says whether the pages were read directly (then
// a label the page lacks, or a value, may be added by the scraper: warnings).
func liveBroken(scraped bool) []finding {
	labelSev := querycheck.Error
	if scraped {
		labelSev = querycheck.Warning
	}
	return []finding{
		{"alert Preempt", querycheck.KindCounterTotal, querycheck.Error, "vllm:num_preemptions", "vllm:num_preemptions_total"},
		{"alert LlamaKV", querycheck.KindRemoved, querycheck.Error, "llamacpp:kv_cache_usage_ratio", ""},
		{"alert Underscore", querycheck.KindWrongPrefix, querycheck.Error, "vllm_num_requests_waiting", "vllm:num_requests_waiting"},
		{"record vllm:ttft:p90", querycheck.KindHistogramBucket, querycheck.Error, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_bucket"},
		{"alert Label", querycheck.KindUnknownLabel, labelSev, `vllm:num_requests_running{modelname="x"}`, ""},
		{"alert Value", querycheck.KindLabelValue, labelSev, `vllm:num_requests_running{model_name="mistral"}`, ""},
		{"alert Ratio", querycheck.KindNoSeries, querycheck.Error, "vllm:prefix_cache_lookups_total", ""},
		{"alert Ratio", querycheck.KindEmptyRatio, querycheck.Error, "rate(vllm:prefix_cache_lookups_total[5m])", ""},
		{"alert Deprecated", querycheck.KindDeprecated, querycheck.Warning, "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
		{"alert TGI", querycheck.KindCounterNoTotal, querycheck.Error, "tgi_request_count_total", "tgi_request_count"},
		{"alert RouterRenamed", querycheck.KindRenamed, querycheck.Error, "sgl_router_request_errors_total", "smg_router_request_errors_total"},
		{"alert Recorded", querycheck.KindRecordedMissing, querycheck.Warning, "vllm:ttft:p90", ""},
		{"alert VLLMGone", querycheck.KindNoSeries, querycheck.Error, "vllm:num_requests_runing", "vllm:num_requests_running"},
		{"alert Unless", querycheck.KindNoSeries, querycheck.Warning, "fleet_maintenance_mode", ""},
		{"alert SGLangUsage", querycheck.KindMeaningChanged, querycheck.Warning, "sglang_token_usage", "sglang_full_token_usage"},
	}
}

func liveFiles() (broken, good string) {
	return filepath.Join("testdata", "live", "broken.yml"), filepath.Join("testdata", "live", "good.json")
}

func TestEngineDirectAgainstSimulator(t *testing.T) {
	eps := startSim(t, "mixed")
	var against []string
	for _, ep := range eps {
		against = append(against, "--against", ep.URL+ep.MetricsPath)
	}
	broken, good := liveFiles()
	rep := checkJSON(t, 1, append([]string{broken}, against...)...)
	if rep.Mode != "metrics" {
		t.Errorf("Mode = %q, want metrics", rep.Mode)
	}
	compare(t, rep, liveBroken(true))
	rep = checkJSON(t, 0, append([]string{good}, against...)...)
	compare(t, rep, nil)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitNames polls a Prometheus API until every name has series.
func waitNames(t *testing.T, base string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var have []string
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/api/v1/label/__name__/values")
		if err == nil {
			var env struct {
				Data []string `json:"data"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			have = env.Data
			if !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(have, n) }) {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("%s: series %q did not all appear within 60s; have %d names", base, names, len(have))
}

// startPrometheus runs the Prometheus binary prom with the config file cfg
// (its rule files relative to cfg's directory) on the loopback address
// addr, stopped with the test, and returns its base URL.
func startPrometheus(t *testing.T, prom, cfg, addr string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prom, "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return "http://" + addr
}

func TestAgainstPrometheus(t *testing.T) {
	prom := testenv.Tool(t, "prometheus", "prometheus")
	eps := startSim(t, "mixed")
	var targets []string
	for _, ep := range eps {
		targets = append(targets, fmt.Sprintf("%q", strings.TrimPrefix(ep.URL, "http://")))
	}
	dir := t.TempDir()
	cfg := "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: engines\n    static_configs:\n      - targets: [" + strings.Join(targets, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startPrometheus(t, prom, filepath.Join(dir, "prometheus.yml"), freeAddr(t))
	waitNames(t, base, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "tgi_request_count", "llamacpp:requests_processing",
		"smg_router_request_errors_total", "sgl_router_requests_total", "nv_trt_llm_kv_cache_block_metrics", "sglang_token_usage", "sglang:kv_used_tokens")
	broken, good := liveFiles()
	rep := checkJSON(t, 1, broken, "--against", base)
	if rep.Mode != "prometheus" {
		t.Errorf("Mode = %q, want prometheus", rep.Mode)
	}
	compare(t, rep, liveBroken(false))
	rep = checkJSON(t, 0, good, "--against", base)
	compare(t, rep, nil)

	// label_values over labels: job exists on every series Prometheus
	// stores, tenant on none; vllm:num_requests_running has model_name,
	// not model.
	rep = checkJSON(t, 1, filepath.Join("testdata", "live", "broken-vars.json"), "--against", base)
	compare(t, rep, []finding{
		{"variable tenant", querycheck.KindLabelValuesLabel, querycheck.Error, "", ""},
		{"variable model", querycheck.KindLabelValuesLabel, querycheck.Error, "vllm:num_requests_running", ""},
	})

	// The text output: file and rule, the expression, a caret under the
	// selector, and the summary: 14 queries, 10 with an error (all but
	// Deprecated, Recorded, Unless and SGLangUsage, which are warnings;
	// VLLMGone's name is no vLLM name, so its absent() fires for ever).
	code, out, _ := run(t, "check", "queries", broken, "--against", base)
	if code != 1 {
		t.Errorf("text run exit = %d, want 1", code)
	}
	for _, want := range []string{
		"broken.yml:6  group live  alert Preempt\n  rate(vllm:num_preemptions[5m]) > 1\n       ^ error: vllm:num_preemptions: no series; the counter is exposed as vllm:num_preemptions_total [counter-without-total]\n",
		"broken.yml:28  group live  alert VLLMGone\n  absent(vllm:num_requests_runing)\n         ^ error: vllm:num_requests_runing: no series; no vLLM version defines this name; did you mean vllm:num_requests_running? [no-series]\n",
		"10 of 14 queries select nothing; 1 label matcher names a label that no series has; 11 errors, 4 warnings",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}
