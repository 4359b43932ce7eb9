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

// TestLlamaCppSlotsLimit: the real capture under load has 4 requests in its
// 4 slots and 12 deferred while its KV (4 × 1024 tokens) has room: batch.
func TestLlamaCppSlotsLimit(t *testing.T) {
	s := normalizeBody(t, string(readFixture(t, "llamacpp-real-load-queued.prom")), "", map[string][]byte{
		PathSlots: readFixture(t, "llamacpp-real-load-queued.slots.json"),
		PathProps: readFixture(t, "llamacpp-real-props.json"),
	})
	if !cmp.Equal(s.MaxRunning, dir(4), valueCmp) {
		t.Fatalf("MaxRunning = %+v, want 4 (total_slots)", s.MaxRunning)
	}
	p := kv.PlanServer(&s, 0, kv.Value{}, 0.9)
	if p.Limit != kv.FactorBatch || !cmp.Equal(p.BatchHeadroom, der(0), valueCmp) {
		t.Errorf("limit = %s (%s), batch headroom %+v; want batch with 0 left (usage %+v)", p.Limit, p.Why, p.BatchHeadroom, s.UsageRatio)
	}
}

func TestFinishedRequestSizes(t *testing.T) {
	vllm := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
vllm:num_requests_running{engine="1",model_name="m"} 1
# TYPE vllm:request_prompt_tokens histogram
vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="m"} 100
vllm:request_prompt_tokens_sum{engine="0",model_name="m"} 180000
vllm:request_prompt_tokens_count{engine="0",model_name="m"} 100
vllm:request_prompt_tokens_bucket{engine="1",le="+Inf",model_name="m"} 40
vllm:request_prompt_tokens_sum{engine="1",model_name="m"} 100000
vllm:request_prompt_tokens_count{engine="1",model_name="m"} 40
# TYPE vllm:request_generation_tokens histogram
vllm:request_generation_tokens_sum{engine="0",model_name="m"} 30000
vllm:request_generation_tokens_count{engine="0",model_name="m"} 100
vllm:request_generation_tokens_sum{engine="1",model_name="m"} 12000
vllm:request_generation_tokens_count{engine="1",model_name="m"} 40
`
	sglang := `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 3
# TYPE sglang:prompt_tokens_histogram histogram
sglang:prompt_tokens_histogram_sum{model_name="m"} 5000
sglang:prompt_tokens_histogram_count{model_name="m"} 4
# TYPE sglang:generation_tokens_histogram histogram
sglang:generation_tokens_histogram_sum{model_name="m"} 1000
sglang:generation_tokens_histogram_count{model_name="m"} 4
`
	tests := []struct {
		name    string
		body    string
		n, p, g kv.Value
		mean    kv.Value
	}{
		// 140 requests, 280,000 prompt and 42,000 generation tokens over both
		// engines: (280,000 + 42,000) / 140 = 2,300 each.
		{"vllm DP", vllm, dir(140), dir(280000), dir(42000), der(2300)},
		// (5,000 + 1,000) / 4 = 1,500.
		{"sglang", sglang, dir(4), dir(5000), dir(1000), der(1500)},
		{"absent", "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 3\n", na, na, na, na},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "text/plain", nil)
			f := s.Finished
			for _, c := range []struct {
				what      string
				got, want kv.Value
			}{{"requests", f.Requests, tt.n}, {"prompt", f.PromptTokens, tt.p}, {"generation", f.GenerationTokens, tt.g},
				{"mean", f.MeanTokens(nil), tt.mean}} {
				if !cmp.Equal(c.got, c.want, valueCmp) {
					t.Errorf("%s = %+v, want %+v", c.what, c.got, c.want)
				}
			}
		})
	}
}
