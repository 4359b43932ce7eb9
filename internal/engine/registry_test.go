package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestRegistryOrder(t *testing.T) {
	want := []string{"sglang", "sgl-router", "vllm", "tgi", "triton", "llamacpp", "trtllm-serve", "lmdeploy", "lmcache", "dynamo"}
	if diff := cmp.Diff(want, NewRegistry().Names()); diff != "" {
		t.Errorf("detection order (-want +got):\n%s", diff)
	}
}

// TestDisabledHints: every adapter says how to turn its metrics on.
func TestDisabledHints(t *testing.T) {
	for _, a := range NewRegistry().Adapters() {
		h, ok := a.(DisabledHint)
		if !ok || h.DisabledHint() == "" {
			t.Errorf("%s has no DisabledHint", a.Name())
		}
	}
}

// TestWantCoversEveryAdapter: the filter keeps every name an adapter reads,
// and every name is in canonical form (the filter compares canonical names).
func TestWantCoversEveryAdapter(t *testing.T) {
	r := NewRegistry()
	for _, a := range r.Adapters() {
		for _, n := range a.MetricNames() {
			if !r.Want(n) {
				t.Errorf("%s reads %q but Want drops it", a.Name(), n)
			}
			if strings.HasPrefix(n, "sglang_") || strings.HasPrefix(n, "vllm_") || strings.HasPrefix(n, "lmdeploy_") || strings.HasPrefix(n, "llamacpp_") {
				t.Errorf("%s lists %q, not its canonical colon form", a.Name(), n)
			}
		}
	}
	if r.Want("sglang:time_to_first_token_seconds_bucket") {
		t.Error("Want keeps histogram buckets no adapter reads")
	}
}

func TestByName(t *testing.T) {
	r := NewRegistry()
	if a, err := r.ByName("trtllm-serve"); err != nil || a.Name() != "trtllm-serve" {
		t.Errorf("ByName(trtllm-serve) = %v, %v", a, err)
	}
	_, err := r.ByName("ollama")
	if want := `unknown engine "ollama"; want one of sglang, sgl-router, vllm, tgi, triton, llamacpp, trtllm-serve, lmdeploy, lmcache, dynamo`; err == nil || err.Error() != want {
		t.Errorf("ByName(ollama) = %v, want %q", err, want)
	}
}

// TestTwoEngines: a page that matches several engines is read as the first
// in detection order, with KV from whichever has it, and says so.
func TestTwoEngines(t *testing.T) {
	sg := "sglang:max_total_num_tokens{tp_rank=\"0\"} 1000\nsglang:kv_used_tokens{tp_rank=\"0\"} 250\n"
	dy := "dynamo_component_kvstats_total_blocks{worker_id=\"w\"} 100\ndynamo_component_kvstats_active_blocks{worker_id=\"w\"} 40\ndynamo_component_kvstats_gpu_cache_usage_percent{worker_id=\"w\"} 0.4\n"
	tests := []struct {
		name, body, engine, detail string
		want                       summary
	}{
		{
			name: "both have KV: the engine's", body: sg + dy, engine: "sglang",
			detail: "page matches sglang and dynamo; read as sglang (the first in detection order), KV from sglang",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(250), UsageRatio: der(0.25)}, Spread: der(0),
				Warnings: []string{kv.WarnTwoEngines}},
		},
		{
			name: "the engine has no KV: the pass-through's", body: "vllm:num_requests_running{engine=\"0\"} 2\n" + dy, engine: "vllm",
			detail: "page matches vllm and dynamo; read as vllm (the first in detection order), KV from dynamo",
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1,
				// Dynamo's direct 0.4 (no block size: no tokens) and its spread.
				Signals: kv.Signals{UsageRatio: dir(0.4), Running: dir(2)}, Spread: der(0),
				Warnings: []string{kv.WarnTwoEngines}},
		},
		{
			name: "the engine is asleep: not the pass-through's KV", engine: "vllm",
			body:   "vllm:num_requests_running{engine=\"0\"} 2\nvllm:engine_sleep_state{engine=\"0\",sleep_state=\"awake\"} 0\n" + dy,
			detail: "page matches vllm and dynamo; read as vllm (the first in detection order), no KV: vllm is asleep",
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1, Signals: kv.Signals{Running: dir(2)},
				Warnings: []string{kv.WarnTwoEngines}, Unavailable: []string{kv.UnknownAsleep}},
		},
		{
			name: "neither has KV", body: "vllm:num_requests_running 2\ndynamo_frontend_queued_requests 1\ndynamo_frontend_inflight_requests 3\n", engine: "vllm",
			detail: "page matches vllm and dynamo; read as vllm (the first in detection order), no engine on the page reports KV",
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1, Signals: kv.Signals{Running: dir(2)},
				Warnings: []string{kv.WarnTwoEngines}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != 1 || got.Warnings[0].Detail != tt.detail {
				t.Errorf("Warnings = %+v, want one with detail %q", got.Warnings, tt.detail)
			}
		})
	}
}

// TestTwoEnginesKeepsInterfaces: the adapter for a page of two engines
// keeps the first engine's optional interfaces and no others.
func TestTwoEnginesKeepsInterfaces(t *testing.T) {
	r := NewRegistry()
	p, err := expo.Parse([]byte("trtllm_kv_cache_utilization 0.5\ndynamo_component_kvstats_gpu_cache_usage_percent 0.5\n"), "", r.Want)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Detect(p)
	if err != nil {
		t.Fatal(err)
	}
	if mp, ok := a.(MetricsPath); a.Name() != "trtllm-serve" || !ok || mp.MetricsPath() != "/prometheus/metrics" {
		t.Errorf("Detect = %s (MetricsPath %v), want trtllm-serve with /prometheus/metrics", a.Name(), ok)
	}
	if _, ok := a.(ExtraPaths); ok {
		t.Error("the combined adapter implements ExtraPaths; trtllm-serve does not")
	}
}

// TestForcedEngineDoesNotCombine: with engine: set, the page is that
// engine's and nothing else is read or warned about.
func TestForcedEngineDoesNotCombine(t *testing.T) {
	r := NewRegistry()
	p, err := expo.Parse([]byte("vllm:num_requests_running 2\ndynamo_component_kvstats_gpu_cache_usage_percent 0.4\n"), "", r.Want)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.ByName("vllm")
	s, err := a.Normalize(Input{Page: p})
	if err != nil {
		t.Fatal(err)
	}
	if s.UsageRatio.OK() || len(s.Warnings) != 0 {
		t.Errorf("forced vllm: usage %v, warnings %v; want unknown usage and no warning", s.UsageRatio, s.Warnings)
	}
}

func TestDuplicateSeries(t *testing.T) {
	tests := []struct {
		name, body string
		want       []kv.Warning
	}{
		{
			name: "the same series twice",
			body: "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 5\n",
			want: []kv.Warning{{Reason: kv.WarnDuplicateSeries, Detail: "vllm:num_requests_running: 1 duplicate series (same name and labels); the adapter kept one per its rule (largest gauge, counters summed per rank)"}},
		},
		{
			name: "both prefixes with one label set",
			body: "sglang:num_running_reqs{tp_rank=\"0\"} 3\nsglang_num_running_reqs{tp_rank=\"0\"} 3\nsglang:num_running_reqs{tp_rank=\"1\"} 3\n",
			want: []kv.Warning{{Reason: kv.WarnDuplicateSeries, Detail: "sglang:num_running_reqs: 1 duplicate series (same name and labels); the adapter kept one per its rule (largest gauge, counters summed per rank)"}},
		},
		{
			name: "the same labels written in another order",
			body: "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\nvllm:num_requests_running{model_name=\"m\",engine=\"0\"} 5\n",
			want: []kv.Warning{{Reason: kv.WarnDuplicateSeries, Detail: "vllm:num_requests_running: 1 duplicate series (same name and labels); the adapter kept one per its rule (largest gauge, counters summed per rank)"}},
		},
		{
			name: "labels differ: no warning",
			body: "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_running{engine=\"1\"} 5\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, got.Warnings); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
	// Pages with more samples of a name than are compared pairwise: 40
	// ranks, one written again with the other prefix and its labels in
	// another order, finds one duplicate; 40 distinct ranks none.
	var ranks strings.Builder
	for i := range 40 {
		fmt.Fprintf(&ranks, "sglang:num_running_reqs{tp_rank=\"%d\",model_name=\"m\"} 3\n", i)
	}
	if got := normalizeBody(t, ranks.String(), "", nil); len(got.Warnings) != 0 {
		t.Errorf("40 distinct ranks: warnings %+v, want none", got.Warnings)
	}
	ranks.WriteString("sglang_num_running_reqs{model_name=\"m\",tp_rank=\"17\"} 4\n")
	got := normalizeBody(t, ranks.String(), "", nil)
	if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0].Detail, "sglang:num_running_reqs: 1 duplicate series") {
		t.Errorf("40 ranks and one again: warnings %+v, want one duplicate", got.Warnings)
	}
	// 99,999 copies of one series: one warning with the count, and the
	// value kept by the rule (the largest).
	var b strings.Builder
	for i := 0; i < 99999; i++ {
		fmt.Fprintf(&b, "vllm:num_requests_running{engine=\"0\"} %d\n", i%7)
	}
	got = normalizeBody(t, b.String(), "", nil)
	if len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0].Detail, "99998 duplicate series") || got.Running != dir(6) {
		t.Errorf("99,999 copies: warnings %+v, running %+v; want one warning of 99998 duplicates and running 6", got.Warnings, got.Running)
	}
}
