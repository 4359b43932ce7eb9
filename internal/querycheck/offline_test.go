package querycheck

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// want is one expected finding, written by hand from the test inputs.
type want struct {
	where    string // substring of Finding.Where
	kind     Kind
	severity Severity
	selector string // the selector's text as written
	suggest  string
}

func readInputs(t *testing.T, files ...string) *Inputs {
	t.Helper()
	in := &Inputs{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.ReadFile(f, b); err != nil {
			t.Fatalf("ReadFile(%s) = %v", f, err)
		}
	}
	return in
}

func checkWant(t *testing.T, rep *Report, wants []want) {
	t.Helper()
	var got []string
	for _, f := range rep.Findings {
		if f.Severity == Info {
			continue
		}
		got = append(got, f.Where+" | "+string(f.Kind)+" | "+string(f.Severity)+" | "+f.Selector+" | "+f.Suggestion)
	}
	var missing []string
	used := make([]bool, len(got))
	for _, w := range wants {
		found := false
		for i, g := range got {
			parts := strings.Split(g, " | ")
			if !used[i] && strings.Contains(parts[0], w.where) && parts[1] == string(w.kind) && parts[2] == string(w.severity) &&
				parts[3] == w.selector && parts[4] == w.suggest {
				used[i], found = true, true
				break
			}
		}
		if !found {
			missing = append(missing, w.where+" | "+string(w.kind)+" | "+string(w.severity)+" | "+w.selector+" | "+w.suggest)
		}
	}
	var extra []string
	for i, g := range got {
		if !used[i] {
			extra = append(extra, g)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("findings differ\nmissing:\n  %s\nunexpected:\n  %s", strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
	}
}

func TestOfflineFindsEveryKind(t *testing.T) {
	dir := filepath.Join("testdata", "offline")
	in := readInputs(t, filepath.Join(dir, "broken-alerts.yml"), filepath.Join(dir, "broken-prometheusrule.yaml"),
		filepath.Join(dir, "broken-queries.promql"), filepath.Join(dir, "broken-dashboard.json"))
	rep, err := (&Checker{}).Check(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	checkWant(t, rep, []want{
		{"VLLMPreemptionsHigh", KindCounterTotal, Error, "vllm:num_preemptions", "vllm:num_preemptions_total"},
		{"VLLMCacheFull", KindRenamed, Error, `vllm:gpu_cache_usage_perc{model_name="llama"}`, "vllm:kv_cache_usage_perc"},
		{"record vllm:ttft:p90", KindHistogramBucket, Error, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_bucket"},
		{"LlamaBusy", KindWrongPrefix, Error, "llamacpp_requests_processing", "llamacpp:requests_processing"},
		{"LlamaKV", KindRemoved, Error, "llamacpp:kv_cache_usage_ratio", ""},
		{"TGICounter", KindCounterNoTotal, Error, "tgi_request_count_total", "tgi_request_count"},
		{"VLLMModelLabel", KindUnknownLabel, Warning, `vllm:num_requests_waiting{modelname="llama"}`, ""},
		{"PrefixHitLow", KindRenamed, Error, "vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_queries_total"},
		{"PrefixHitLow", KindEmptyRatio, Error, "rate(vllm:gpu_prefix_cache_queries_total[5m])", ""},
		{"Typo", KindUnknownMetric, Error, "vllm:num_requests_runing", "vllm:num_requests_running"},
		{"SGLangPrefillQueue", KindRenamed, Error, "sglang:num_prefill_prealloc_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs"},
		{"SGLangRouterErrors", KindRenamed, Error, "sgl_router_request_errors_total", "smg_router_request_errors_total"},
		{"line 3", KindRenamed, Error, "vllm:time_per_output_token_seconds_sum", "vllm:inter_token_latency_seconds_sum"},
		{"line 3", KindRenamed, Error, "vllm:time_per_output_token_seconds_count", "vllm:inter_token_latency_seconds_count"},
		{"line 5", KindRemoved, Error, "lmdeploy:num_requests_finished", ""},
		{"line 7", KindCounterTotal, Error, "vllm_num_preemptions", "vllm_num_preemptions_total"},
		{"line 9", KindNoSeries, Error, "smg_router_ttft_seconds_bucket", ""},
		{"variable model", KindLabelValuesLabel, Warning, "vllm:num_requests_running", ""},
		{`panel "KV cache usage" (id 1)`, KindRenamed, Error, `vllm:gpu_cache_usage_perc{model_name=~"$model"}`, "vllm:kv_cache_usage_perc"},
		{`row "Latency"  panel "TTFT p99" (id 3)`, KindHistogramBucket, Error, "vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_bucket"},
		{`panel "Top servers" (id 5) query B`, KindUndefinedVar, Warning, "", ""},
		{`row "Old layout"  panel "Swapped" (id 6)`, KindRemoved, Error, "vllm:num_requests_swapped", ""},
	})
	// 24 queries: 10 rules, 2 in the manifest, 5 expressions, 2 variables
	// (label_values), 5 panel targets (the Loki one is not a query).
	if rep.Queries != 24 {
		t.Errorf("Queries = %d, want 24", rep.Queries)
	}
	// Broken: every query with an error above, counted by hand: rules 8
	// (not the label or recorded-series ones), manifest 2, expressions 4,
	// dashboard 3.
	if rep.Broken != 17 {
		t.Errorf("Broken = %d, want 17", rep.Broken)
	}
	var notes []string
	for _, n := range rep.Notes {
		notes = append(notes, n.Where+": "+n.Message)
	}
	for _, w := range []string{`panel "Shared panel" (id 4): library panel skipped`, "document 2: skipped: a Service"} {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, w) }) {
			t.Errorf("notes lack %q: %q", w, notes)
		}
	}
}

func TestOfflineAcceptsCurrentNames(t *testing.T) {
	dir := filepath.Join("testdata", "good")
	in := readInputs(t, filepath.Join(dir, "current-dashboard.json"), filepath.Join(dir, "current-rules.yml"))
	rep, err := (&Checker{}).Check(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Severity != Info {
			t.Errorf("unexpected %s %s in %s: %s", f.Severity, f.Kind, f.Where, f.Message)
		}
	}
	// sglang_token_usage is the spelling Prometheus 2.x stores: accepted
	// with an info note naming the scrapers.
	found := false
	for _, f := range rep.Findings {
		if f.Kind == KindEscapedName && f.Selector == "sglang_token_usage" && strings.Contains(f.Message, "Prometheus 2.x") {
			found = true
		}
	}
	if !found {
		t.Error("no escaped-name info for sglang_token_usage")
	}
	if rep.Queries != 28 || rep.Broken != 0 {
		t.Errorf("Queries, Broken = %d, %d; want 28, 0", rep.Queries, rep.Broken)
	}
}

// TestOfflineUnknownNames: a name under the prefix of an engine the catalog
// knows whole, which no version of it defines, is an error with the
// nearest catalog name (edit distance) as did-you-mean; a name under no
// such prefix is a warning (the catalog does not know every exporter).
func TestOfflineUnknownNames(t *testing.T) {
	for _, tc := range []struct {
		expr     string
		severity Severity
		suggest  string
		message  string
	}{
		{"sglang:num_runing_reqs", Error, "sglang:num_running_reqs",
			"sglang:num_runing_reqs: no SGLang version defines this name; did you mean sglang:num_running_reqs?"},
		{"sglang_num_runing_reqs", Error, "sglang_num_running_reqs",
			"sglang_num_runing_reqs: no SGLang version defines this name; did you mean sglang_num_running_reqs?"},
		{"rate(vllm:num_preemption_total[5m])", Error, "vllm:num_preemptions_total",
			"vllm:num_preemption_total: no vLLM version defines this name; did you mean vllm:num_preemptions_total?"},
		{"tgi_queue_sizes", Error, "tgi_queue_size", "tgi_queue_sizes: no TGI version defines this name; did you mean tgi_queue_size?"},
		{"kvwatch_kv_usage_ration", Error, "kvwatch_kv_usage_ratio",
			"kvwatch_kv_usage_ration: kvwatch exports no such metric (docs/metrics.md); did you mean kvwatch_kv_usage_ratio?"},
		{"sglang:kv_fragmentation_ratio", Error, "", "sglang:kv_fragmentation_ratio: no SGLang version defines this name"},
		{"vlm:kv_cache_usage_perc", Warning, "vllm:kv_cache_usage_perc",
			"vlm:kv_cache_usage_perc: not in kvwatch's catalog of engine metrics; check it against a live store with --against (did you mean vllm:kv_cache_usage_perc?)"},
		{"process_gpu_seconds_total", Warning, "process_cpu_seconds_total",
			"process_gpu_seconds_total: not in kvwatch's catalog of engine metrics; check it against a live store with --against (did you mean process_cpu_seconds_total?)"},
		{"python_asyncio_tasks", Warning, "",
			"python_asyncio_tasks: not in kvwatch's catalog of engine metrics; check it against a live store with --against"},
		{"node_load1", Warning, "", "node_load1: not in kvwatch's catalog of engine metrics; check it against a live store with --against"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			in := &Inputs{}
			if err := in.ReadFile("q.promql", []byte(tc.expr+"\n")); err != nil {
				t.Fatal(err)
			}
			rep, err := (&Checker{}).Check(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Findings) != 1 {
				t.Fatalf("findings = %+v, want one", rep.Findings)
			}
			f := rep.Findings[0]
			if f.Kind != KindUnknownMetric || f.Severity != tc.severity || f.Suggestion != tc.suggest || f.Message != tc.message || f.Fix != nil {
				t.Errorf("finding = %s %s %q %q (fix %v), want %s %s %q %q", f.Kind, f.Severity, f.Message, f.Suggestion, f.Fix,
					KindUnknownMetric, tc.severity, tc.message, tc.suggest)
			}
		})
	}
}
