package engine

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestSGLangMaxRunning(t *testing.T) {
	fixture, err := os.ReadFile("testdata/fixtures/sglang-pr1853-review-partial.prom")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body string
		want kv.Value
	}{
		// The first generation's gauge, label "name": 2231 as printed.
		{"first generation", string(fixture), dir(2231)},
		// Newest: one series per scheduler with cap_source; TP ranks of a DP
		// rank repeat it, DP ranks each have their share: 40 + 40 + 40.
		{"per DP rank", `# TYPE sglang:max_running_requests gauge
sglang:max_running_requests{cap_source="requested",dp_rank="0",tp_rank="0",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="0",tp_rank="1",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="1",tp_rank="0",pp_rank="0",model_name="m"} 40
sglang:max_running_requests{cap_source="requested",dp_rank="2",tp_rank="0",pp_rank="0",model_name="m"} 40
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",tp_rank="0",pp_rank="0",model_name="m"} 12
`, der(120)},
		{"absent", "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 3\n", na},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "text/plain", nil)
			if !cmp.Equal(s.MaxRunning, tt.want, valueCmp) {
				t.Errorf("MaxRunning = %+v, want %+v", s.MaxRunning, tt.want)
			}
		})
	}
}

// TestSGLangDialects: names and meanings that changed across SGLang
// versions, each read as its version means (pages written from
// metrics_collector.py and the PRs cited in docs/engines.md; values worked
// out by hand).
func TestSGLangDialects(t *testing.T) {
	tests := []struct {
		name string
		body string
		want summary
	}{
		{
			// sglang #24197's gauges, per rank, when the page lacks
			// max_total_num_tokens (a scrape filtered to these names).
			name: "capacity from page_size × num_pages",
			body: "sglang:page_size{dp_rank=\"0\"} 16\nsglang:num_pages{dp_rank=\"0\"} 1000\nsglang:page_size{dp_rank=\"1\"} 16\nsglang:num_pages{dp_rank=\"1\"} 500\n" +
				"sglang:kv_used_tokens{dp_rank=\"0\"} 4000\nsglang:kv_used_tokens{dp_rank=\"1\"} 2000\n",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 2,
				// 16 × 1,000 + 16 × 500; 6,000 of 24,000; both ranks at 0.25.
				Signals: kv.Signals{Capacity: der(24000), Used: dir(6000), UsageRatio: der(0.25)}, Spread: der(0)},
		},
		{
			// sglang #17273's info gauge carries no rank label: it is every
			// rank's, whichever family names the ranks.
			name: "capacity from cache_config_info on every rank",
			body: "sglang:cache_config_info{num_pages=\"2000\",page_size=\"64\"} 1\n" +
				"sglang:num_used_tokens{dp_rank=\"0\"} 32000\nsglang:num_used_tokens{dp_rank=\"1\"} 0\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				// 64 × 2,000 = 128,000 per DP rank; 32,000 of 256,000.
				Signals: kv.Signals{Capacity: der(256000), Used: dir(32000), UsageRatio: der(0.125)}, Spread: der(0.25)},
		},
		{
			// A version with the full pool's own gauges writes the max over
			// pools into token_usage (sglang #22555): never the KV ratio.
			name: "token_usage beside kv_available_tokens, no capacity",
			body: "sglang:num_running_reqs 1\nsglang:kv_available_tokens 500\nsglang:token_usage 0.4\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1, Signals: kv.Signals{Running: dir(1)},
				Unavailable: []string{kv.UnknownVersion}},
		},
		{
			name: "max_total_num_tokens beats the pages",
			body: "sglang:max_total_num_tokens 1000\nsglang:page_size 16\nsglang:num_pages 99\nsglang:kv_used_tokens 100\n",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(100), UsageRatio: der(0.1)}, Spread: der(0)},
		},
		{
			// A running count above 0 is the fixed version's, whatever the
			// queue's name.
			name: "PD prefill, old queue name, 3 running",
			body: "sglang:num_running_reqs{engine_type=\"prefill\"} 3\nsglang:num_prefill_prealloc_queue_reqs{engine_type=\"prefill\"} 1\n",
			want: summary{Engine: "sglang", Generation: "legacy", Role: kv.RolePrefill, Ranks: 1,
				Signals: kv.Signals{Running: dir(3), Queued: kv.Queues{Bootstrap: dir(1)}}},
		},
		{
			name: "PD prefill, old queue name, 0 running: no count",
			body: "sglang:num_running_reqs{engine_type=\"prefill\"} 0\nsglang:num_prefill_prealloc_queue_reqs{engine_type=\"prefill\"} 1\n",
			want: summary{Engine: "sglang", Generation: "legacy", Role: kv.RolePrefill, Ranks: 1,
				Signals: kv.Signals{Queued: kv.Queues{Bootstrap: dir(1)}}, Unavailable: []string{kv.UnknownVersion}},
		},
		{
			name: "PD prefill, current queue name, 0 running",
			body: "sglang:num_running_reqs{engine_type=\"prefill\"} 0\nsglang:num_prefill_bootstrap_queue_reqs{engine_type=\"prefill\"} 1\n",
			want: summary{Engine: "sglang", Generation: "legacy", Role: kv.RolePrefill, Ranks: 1,
				Signals: kv.Signals{Running: dir(0), Queued: kv.Queues{Bootstrap: dir(1)}}},
		},
		{
			// Both names, one value: a version that wrote both, no conflict.
			name: "bootstrap queue under both names, equal",
			body: "sglang:num_running_reqs{tp_rank=\"0\"} 0\nsglang:num_prefill_bootstrap_queue_reqs{tp_rank=\"0\"} 4\nsglang:num_prefill_prealloc_queue_reqs{tp_rank=\"0\"} 4\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1, Signals: kv.Signals{Running: dir(0), Queued: kv.Queues{Bootstrap: dir(4)}}},
		},
		{
			// Streaming sessions hold KV outside kv_used_tokens; on a page
			// without kv_used_tokens (num_used_tokens) they are not added.
			name: "held tokens only beside kv_used_tokens",
			body: "sglang:max_total_num_tokens 1000\nsglang:num_used_tokens 100\nsglang:streaming_session_held_tokens 50\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(100), UsageRatio: der(0.1)}, Spread: der(0)},
		},
		{
			// sglang #19009: the KV-transfer gauges became histograms; a
			// page with either reads the same.
			name: "KV-transfer histogram",
			body: "# TYPE sglang:kv_transfer_latency_ms histogram\nsglang:kv_transfer_latency_ms_bucket{le=\"5.0\"} 1.0\nsglang:kv_transfer_latency_ms_bucket{le=\"+Inf\"} 2.0\n" +
				"sglang:kv_transfer_latency_ms_count 2.0\nsglang:kv_transfer_latency_ms_sum 9.0\nsglang:num_running_reqs 1\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1, Signals: kv.Signals{Running: dir(1)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "text/plain", nil)
			if diff := cmp.Diff(tt.want, summarize(s), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSGLangMixedDialectDetail: the warning names both names and values.
func TestSGLangMixedDialectDetail(t *testing.T) {
	s := normalizeBody(t, "sglang:num_running_reqs{dp_rank=\"1\"} 2\nsglang:num_prefill_bootstrap_queue_reqs{dp_rank=\"1\"} 3\nsglang:num_prefill_prealloc_queue_reqs{dp_rank=\"1\"} 9\n", "", nil)
	want := []kv.Warning{{Reason: kv.WarnMixedDialect,
		Detail: "sglang:num_prefill_bootstrap_queue_reqs is 3 but its older name sglang:num_prefill_prealloc_queue_reqs is 9 (rank dp=1): two versions' names on one page; read sglang:num_prefill_bootstrap_queue_reqs"}}
	if diff := cmp.Diff(want, s.Warnings); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
}
