package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

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

// lmdeployFinishedPage is an LMDeploy page with two DP engines, written from
// PrometheusStatLogger (lmdeploy/metrics/loggers.py @7c8d16f5): the
// request_prompt_tokens and request_generation_tokens histograms observed
// per finished request, 1-2-5 buckets up to max_model_len, labels
// model_name and engine.
const lmdeployFinishedPage = `# HELP lmdeploy:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE lmdeploy:gpu_cache_usage_perc gauge
lmdeploy:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5
lmdeploy:gpu_cache_usage_perc{engine="1",model_name="m"} 0.3
# TYPE lmdeploy:num_requests_running gauge
lmdeploy:num_requests_running{engine="0",model_name="m"} 4
lmdeploy:num_requests_running{engine="1",model_name="m"} 2
# HELP lmdeploy:request_prompt_tokens Number of prefill tokens processed.
# TYPE lmdeploy:request_prompt_tokens histogram
lmdeploy:request_prompt_tokens_bucket{engine="0",le="1000.0",model_name="m"} 10
lmdeploy:request_prompt_tokens_bucket{engine="0",le="2000.0",model_name="m"} 30
lmdeploy:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="m"} 30
lmdeploy:request_prompt_tokens_count{engine="0",model_name="m"} 30
lmdeploy:request_prompt_tokens_sum{engine="0",model_name="m"} 36000.0
lmdeploy:request_prompt_tokens_bucket{engine="1",le="1000.0",model_name="m"} 10
lmdeploy:request_prompt_tokens_bucket{engine="1",le="2000.0",model_name="m"} 10
lmdeploy:request_prompt_tokens_bucket{engine="1",le="+Inf",model_name="m"} 10
lmdeploy:request_prompt_tokens_count{engine="1",model_name="m"} 10
lmdeploy:request_prompt_tokens_sum{engine="1",model_name="m"} 4000.0
# HELP lmdeploy:request_generation_tokens Number of generation tokens processed.
# TYPE lmdeploy:request_generation_tokens histogram
lmdeploy:request_generation_tokens_bucket{engine="0",le="500.0",model_name="m"} 30
lmdeploy:request_generation_tokens_bucket{engine="0",le="+Inf",model_name="m"} 30
lmdeploy:request_generation_tokens_count{engine="0",model_name="m"} 30
lmdeploy:request_generation_tokens_sum{engine="0",model_name="m"} 9000.0
lmdeploy:request_generation_tokens_bucket{engine="1",le="500.0",model_name="m"} 10
lmdeploy:request_generation_tokens_bucket{engine="1",le="+Inf",model_name="m"} 10
lmdeploy:request_generation_tokens_count{engine="1",model_name="m"} 10
lmdeploy:request_generation_tokens_sum{engine="1",model_name="m"} 1000.0
`

// TestLMDeployFinishedSizes: the finished-request sizes are summed over the
// DP engines; without KV tokens on the page there is a size but no
// headroom at it (unavailable, not 0).
func TestLMDeployFinishedSizes(t *testing.T) {
	s := normalizeBody(t, lmdeployFinishedPage, "text/plain", nil)
	if s.Engine != "lmdeploy" {
		t.Fatalf("engine %q, want lmdeploy", s.Engine)
	}
	f := s.Finished
	// 30 + 10 requests; 36,000 + 4,000 prompt and 9,000 + 1,000 generation
	// tokens: (40,000 + 10,000) / 40 = 1,250 each.
	for _, c := range []struct {
		what      string
		got, want kv.Value
	}{{"requests", f.Requests, dir(40)}, {"prompt", f.PromptTokens, dir(40000)},
		{"generation", f.GenerationTokens, dir(10000)}, {"mean", f.MeanTokens(nil), der(1250)}} {
		if !cmp.Equal(c.got, c.want, valueCmp) {
			t.Errorf("%s = %+v, want %+v", c.what, c.got, c.want)
		}
	}
	// A later scrape: 10 more requests of 1,500 prompt + 500 generation
	// tokens each on engine 1 give 2,000 tokens each since the first.
	prev := f
	later := normalizeBody(t, replaceAll(lmdeployFinishedPage,
		`request_prompt_tokens_count{engine="1",model_name="m"} 10`, `request_prompt_tokens_count{engine="1",model_name="m"} 20`,
		`request_prompt_tokens_sum{engine="1",model_name="m"} 4000.0`, `request_prompt_tokens_sum{engine="1",model_name="m"} 19000.0`,
		`request_generation_tokens_count{engine="1",model_name="m"} 10`, `request_generation_tokens_count{engine="1",model_name="m"} 20`,
		`request_generation_tokens_sum{engine="1",model_name="m"} 1000.0`, `request_generation_tokens_sum{engine="1",model_name="m"} 6000.0`),
		"text/plain", nil)
	if got := later.Finished.MeanTokens(&prev); !cmp.Equal(got, der(2000), valueCmp) {
		t.Errorf("mean since the previous scrape = %+v, want 2000", got)
	}
	p := kv.PlanServer(&s, 0, kv.Value{}, 0.9)
	p.WithFinished(&s, nil)
	if !cmp.Equal(p.FinishedRequestTokens, der(1250), valueCmp) || p.FinishedHeadroom.OK() {
		t.Errorf("finished size %+v, headroom %+v; want 1250 and no headroom (no KV tokens on an LMDeploy page)",
			p.FinishedRequestTokens, p.FinishedHeadroom)
	}
	// The two histograms count different requests: no sizes.
	odd := normalizeBody(t, replaceAll(lmdeployFinishedPage,
		`request_generation_tokens_count{engine="1",model_name="m"} 10`, `request_generation_tokens_count{engine="1",model_name="m"} 9`), "text/plain", nil)
	if odd.Finished.Requests.OK() || odd.Finished.MeanTokens(nil).OK() {
		t.Errorf("counts disagree: sizes %+v, want unavailable", odd.Finished)
	}
}

// replaceAll applies the old, new pairs to s; each old must occur (a
// fixture edit that matches nothing would test the unedited page).
func replaceAll(s string, pairs ...string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			panic("lmdeploy fixture: no " + pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}
