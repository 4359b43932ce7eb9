package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestTriton(t *testing.T) {
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "two models: one rank each, summed",
			body: `# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="llama",version="1"} 1000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="llama",version="1"} 250
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="llama",version="1"} 64
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="llama",version="1"} 0.25
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="qwen",version="2"} 3000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="qwen",version="2"} 3000
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="qwen",version="2"} 32
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="llama",request_type="scheduled",version="1"} 7
nv_trt_llm_request_metrics{model="llama",request_type="waiting",version="1"} 3
nv_trt_llm_request_metrics{model="qwen",request_type="active",version="2"} 9
nv_trt_llm_request_metrics{model="qwen",request_type="waiting",version="2"} 0
# TYPE nv_trt_llm_inflight_batcher_metrics gauge
nv_trt_llm_inflight_batcher_metrics{inflight_batcher_specific_metric="paused_requests",model="qwen",version="2"} 4
# TYPE nv_llm_output_token_len histogram
nv_llm_output_token_len_bucket{le="+Inf",model="llama",response_metric_type="total_output_tokens",version="1"} 5
nv_llm_output_token_len_sum{model="llama",response_metric_type="total_output_tokens",version="1"} 900
nv_llm_output_token_len_count{model="llama",response_metric_type="total_output_tokens",version="1"} 5
`,
			want: summary{Engine: "triton", Generation: "inflight_batcher", Model: "llama,qwen", Ranks: 2,
				Signals: kv.Signals{
					// 1000×64 + 3000×32 = 64,000 + 96,000; used 250×64 + 3000×32 = 16,000 + 96,000.
					Capacity: der(160000), Used: der(112000), UsageRatio: der(112000.0 / 160000),
					// scheduled 7 (llama) + active 9 (qwen, no scheduled series).
					Running: dir(16), Queued: kv.Queues{Waiting: dir(3)},
					// Only llama reports output tokens: a partial sum (issue 11).
					Counters: kv.Counters{GenerationTokens: kv.Value{V: 900, Prov: kv.Partial}},
				},
				// llama 0.25, qwen 1.0.
				Spread: der(0.75)},
		},
		{
			name: "fraction only when a block count is missing",
			body: `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",model="m",version="1"} 0.4
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="m",version="1"} 100
`,
			want: summary{Engine: "triton", Generation: "trtllm", Model: "m", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.4)}, Spread: der(0)},
		},
		{
			name: "NaN blocks are unknown",
			body: `nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max",model="m",version="1"} NaN
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="used",model="m",version="1"} 10
nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model="m",version="1"} +Inf
`,
			want: summary{Engine: "triton", Generation: "trtllm", Model: "m", Ranks: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTritonRanksNamed(t *testing.T) {
	s := normalizeBody(t, `nv_trt_llm_request_metrics{model="b",request_type="waiting",version="1"} 1
nv_trt_llm_request_metrics{model="a",request_type="waiting",version="10"} 2
`, "", nil)
	var got []string
	for _, r := range s.Ranks {
		got = append(got, r.DP)
	}
	if diff := cmp.Diff([]string{"b/1", "a/10"}, got); diff != "" {
		t.Errorf("rank DP labels (-want +got):\n%s", diff)
	}
}
