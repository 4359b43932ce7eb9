package querycheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
		{"line 2", KindMeaningChanged, Warning, `sglang:token_usage{model_name="$model"}`, "sglang:full_token_usage"},
		{"line 5", KindRemoved, Error, "lmdeploy:num_requests_finished", ""},
		{"line 7", KindCounterTotal, Error, "vllm_num_preemptions", "vllm_num_preemptions_total"},
		// The file spells vLLM's names vllm:x twice (line 3), vllm_x once.
		{"line 7", KindMixedEscaping, Warning, "vllm_num_preemptions", "vllm:num_preemptions"},
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
	// sglang_num_retracted_requests_total (the rules spell SGLang's names
	// so throughout) is the spelling Prometheus 2.x stores: accepted with an
	// info note naming the scrapers.
	found := false
	for _, f := range rep.Findings {
		if f.Kind == KindEscapedName && f.Selector == "sglang_num_retracted_requests_total" && strings.Contains(f.Message, "Prometheus 2.x") {
			found = true
		}
	}
	if !found {
		t.Error("no escaped-name info for sglang_num_retracted_requests_total")
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

// TestOfflineRenames2026: a dashboard and a rule file written against the
// engines of 2025 (testdata/renames) are flagged with each rename of the
// catalog's table, worked out by hand from it: Dynamo's kvstats gauges
// (#5704) and planner names (#8078), vLLM's deprecated and renamed names,
// SGLang's bootstrap queue (#24341) and token_usage's new meaning (#22555),
// llama.cpp's removed KV gauges (#13660). --fix rewrites exactly the
// one-to-one renames (the .fixed files, written by hand), and a check of the
// rewritten files finds only what needs a person.
func TestOfflineRenames2026(t *testing.T) {
	dir := filepath.Join("testdata", "renames")
	dash, rules := filepath.Join(dir, "dashboard.json"), filepath.Join(dir, "rules.yml")
	rep, err := (&Checker{}).Check(context.Background(), readInputs(t, dash, rules))
	if err != nil {
		t.Fatal(err)
	}
	const kv, planner, vllm, sgl = `panel "Dynamo KV" (id 1)`, `panel "Dynamo planner" (id 2)`, `panel "vLLM" (id 3)`, `panel "SGLang and llama.cpp" (id 4)`
	unfixed := []want{
		{kv + " query C", KindRenamed, Error, "dynamo_component_kvstats_active_blocks", "dynamo_frontend_worker_active_decode_blocks"},
		{kv + " query D", KindRemoved, Error, "dynamo_component_kvstats_gpu_prefix_cache_hit_rate", ""},
		{vllm + " query B", KindDeprecated, Warning, `vllm:kv_offload_total_bytes_total{transfer_type="GPU_to_CPU"}`, ""},
		{sgl + " query A", KindMeaningChanged, Warning, "sglang:token_usage", "sglang:full_token_usage"},
		{sgl + " query C", KindRemoved, Error, "llamacpp:kv_cache_tokens", ""},
		{"alert SGLangFull", KindMeaningChanged, Warning, "sglang_token_usage", "sglang_full_token_usage"},
		{"alert LlamaKV", KindRemoved, Error, "llamacpp:kv_cache_usage_ratio", ""},
	}
	checkWant(t, rep, append([]want{
		{kv + " query A", KindRenamed, Error, `dynamo_component_kvstats_gpu_cache_usage_percent{dynamo_namespace="dynamo"}`, "dynamo_component_gpu_cache_usage_percent"},
		{kv + " query B", KindRenamed, Error, "dynamo_component_kvstats_total_blocks", "dynamo_component_total_blocks"},
		{kv + " query C", KindRenamed, Error, "dynamo_component_kvstats_total_blocks", "dynamo_component_total_blocks"},
		{planner + " query A", KindRenamed, Error, "planner:observed_ttft", "dynamo_planner_observed_ttft_ms"},
		{planner + " query B", KindRenamed, Error, "planner:predicted_num_d", "dynamo_planner_predicted_num_decode_replicas"},
		{planner + " query B", KindRenamed, Error, "planner:num_d_workers", "dynamo_planner_num_decode_replicas"},
		{vllm + " query A", KindRenamed, Error, "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"},
		{sgl + " query B", KindRenamed, Error, "sglang:num_prefill_prealloc_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs"},
		{"alert SGLangBootstrapQueue", KindRenamed, Error, "sglang_num_prefill_prealloc_queue_reqs", "sglang_num_prefill_bootstrap_queue_reqs"},
		{"alert PlannerNoPrefill", KindRenamed, Error, "planner_num_p_workers", "dynamo_planner_num_prefill_replicas"},
		{"alert VLLMSlowTokens", KindRenamed, Error, "vllm:time_per_output_token_seconds_sum", "vllm:inter_token_latency_seconds_sum"},
		{"alert VLLMSlowTokens", KindRenamed, Error, "vllm:time_per_output_token_seconds_count", "vllm:inter_token_latency_seconds_count"},
	}, unfixed...))
	for _, f := range rep.Findings {
		switch f.Selector {
		case "dynamo_component_kvstats_active_blocks":
			if f.Fix != nil || !strings.Contains(f.Message, "not the same series") || !strings.Contains(f.Message, "not rewritten by --fix") {
				t.Errorf("kvstats_active_blocks: fix %v, message %q; want no fix and a message saying why", f.Fix, f.Message)
			}
		case "sglang_num_prefill_prealloc_queue_reqs", "sglang_token_usage", "planner_num_p_workers":
			// The message speaks the query's spelling (the escaped-name
			// info names the engine's own).
			if f.Severity != Info && (strings.Contains(f.Message, "sglang:") || strings.Contains(f.Message, "planner:") || !strings.HasPrefix(f.Message, f.Selector+": ")) {
				t.Errorf("%s: message %q; want it in the query's spelling", f.Selector, f.Message)
			}
		case `vllm:kv_offload_total_bytes_total{transfer_type="GPU_to_CPU"}`:
			if !strings.Contains(f.Message, "deprecated in vLLM #35669") || !strings.Contains(f.Message, "vllm:kv_offload_store_bytes_total (transfer_type GPU_to_CPU)") {
				t.Errorf("kv_offload_total_bytes: message %q; want the deprecation and the split", f.Message)
			}
		}
	}

	// --fix: the rewritten files are the hand-written .fixed files.
	fixes := rep.Fixes()
	for _, file := range []string{dash, rules} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(file + ".fixed")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := ApplyFixes(string(b), fixes[file]); got != string(want) {
			t.Errorf("%s rewritten =\n%s\nwant\n%s", file, got, want)
		}
	}
	if got, want := rep.Unfixed(), map[string][]Kind{dash: {KindRenamed, KindRemoved, KindDeprecated, KindMeaningChanged}, rules: {KindMeaningChanged, KindRemoved}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Unfixed() = %v, want %v", got, want)
	}

	// The rewritten files: only what --fix leaves to a person (and the
	// ratio whose denominator is now right while its numerator is not).
	rep, err = (&Checker{}).Check(context.Background(), readInputs(t, dash+".fixed", rules+".fixed"))
	if err != nil {
		t.Fatal(err)
	}
	checkWant(t, rep, append(unfixed, want{kv + " query C", KindEmptyRatio, Error, "sum(dynamo_component_kvstats_active_blocks)", ""}))
}

// TestOfflineMixedSpellings: a file that spells one engine's names both
// sglang:x and sglang_x gets a warning on each selector of the less used
// spelling (on a tie, the underscore one), suggesting the other spelling
// and no --fix; one spelling per engine and file is fine.
func TestOfflineMixedSpellings(t *testing.T) {
	dash := func(exprs ...string) string {
		var ts []string
		for i, e := range exprs {
			ts = append(ts, fmt.Sprintf(`{"refId": "%c", "expr": %q}`, 'A'+i, e))
		}
		return `{"title": "t", "panels": [{"id": 1, "type": "timeseries", "title": "p", "targets": [` + strings.Join(ts, ", ") + `]}]}`
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []want
	}{
		{"one underscore among colons", map[string]string{"d.json": dash("sglang:num_running_reqs", "sglang:kv_used_tokens / sglang:max_total_num_tokens", "sglang_num_queue_reqs")},
			[]want{{"query C", KindMixedEscaping, Warning, "sglang_num_queue_reqs", "sglang:num_queue_reqs"}}},
		{"one colon among underscores", map[string]string{"d.json": dash("vllm_num_requests_running", "vllm:num_requests_waiting", "vllm_kv_cache_usage_perc")},
			[]want{{"query B", KindMixedEscaping, Warning, "vllm:num_requests_waiting", "vllm_num_requests_waiting"}}},
		{"a tie flags the underscore spelling", map[string]string{"d.json": dash("lmdeploy:gpu_cache_usage_perc", "lmdeploy_num_requests_running")},
			[]want{{"query B", KindMixedEscaping, Warning, "lmdeploy_num_requests_running", "lmdeploy:num_requests_running"}}},
		{"two engines, one spelling each", map[string]string{"d.json": dash("vllm:num_requests_running", "sglang_num_running_reqs")}, nil},
		{"two files, one spelling each", map[string]string{"a.json": dash("sglang:num_running_reqs"), "b.json": dash("sglang_num_queue_reqs")}, nil},
		{"names no engine version defines do not count", map[string]string{"d.json": dash("sglang:num_running_reqs", "sglang_my_own_gauge")},
			[]want{{"query B", KindUnknownMetric, Error, "sglang_my_own_gauge", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Inputs{}
			for f, text := range tc.files {
				if err := in.ReadFile(f, []byte(text)); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := (&Checker{}).Check(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			checkWant(t, rep, tc.want)
			for _, f := range rep.Findings {
				if f.Kind == KindMixedEscaping && (f.Fix != nil || !strings.Contains(f.Message, "--against")) {
					t.Errorf("%s: fix %v, message %q; want no fix and a pointer to --against", f.Selector, f.Fix, f.Message)
				}
			}
		})
	}
}
