package engine

import (
	"slices"
	"testing"
)

// TestMeanings: a known change is named when its marker (or its gone
// name) comes or goes with the page, for its engine only, in either
// direction; an unrelated change of names names nothing.
func TestMeanings(t *testing.T) {
	oldSG := []string{"sglang:max_total_num_tokens", "sglang:num_prefill_prealloc_queue_reqs", "sglang:num_used_tokens", "sglang:token_usage"}
	newSG := []string{"sglang:full_token_usage", "sglang:kv_used_tokens", "sglang:max_total_num_tokens", "sglang:num_prefill_bootstrap_queue_reqs", "sglang:token_usage"}
	tests := []struct {
		name          string
		engine        string
		before, after []string
		want          []string // markers
	}{
		{"sglang upgrade", "sglang", oldSG, newSG, []string{"sglang:num_prefill_bootstrap_queue_reqs", "sglang:full_token_usage", "sglang:kv_used_tokens"}},
		{"sglang downgrade", "sglang", newSG, oldSG, []string{"sglang:num_prefill_bootstrap_queue_reqs", "sglang:full_token_usage", "sglang:kv_used_tokens"}},
		{"only the old queue name goes", "sglang", []string{"sglang:num_prefill_prealloc_queue_reqs"}, nil, []string{"sglang:num_prefill_bootstrap_queue_reqs"}},
		{"same names", "sglang", newSG, newSG, nil},
		{"another engine's table", "vllm", oldSG, newSG, nil},
		{"unrelated name", "sglang", oldSG, append(slices.Clone(oldSG), "sglang:zz_new"), nil},
		{"vllm 0.8 to 0.12", "vllm", []string{"vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_hits"}, []string{"vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits"},
			[]string{"vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits"}},
		{"dynamo across #5704", "dynamo", []string{"dynamo_component_kvstats_active_blocks", "dynamo_component_kvstats_total_blocks"},
			[]string{"dynamo_component_gpu_cache_usage_percent", "dynamo_component_total_blocks"}, []string{"dynamo_component_total_blocks"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range Meanings(tc.engine, tc.before, tc.after) {
				got = append(got, m.Marker)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("markers %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMeaningsAreRead: every name the table tells dialects apart by is
// one the engine's adapter reads; the sentinel's fingerprint covers only
// those, so a marker nobody reads would never be seen.
func TestMeaningsAreRead(t *testing.T) {
	reg := NewRegistry()
	for _, m := range meanings {
		a, err := reg.ByName(m.Engine)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{m.Marker, m.Gone} {
			if n != "" && !slices.Contains(a.MetricNames(), n) && !slices.Contains(a.MetricNames(), n+"_total") {
				t.Errorf("%s: %s is not a name the adapter reads", m.Engine, n)
			}
		}
	}
}
