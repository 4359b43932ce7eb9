package engine

import "testing"

// TestVLLMGeneration: the generation label comes from names only one
// generation exports, not from the engine label (early V1 lacks it too) nor
// from the usage gauge alone (a V0 page may lack it).
func TestVLLMGeneration(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"V0 without a usage gauge", "vllm:num_requests_running{model_name=\"m\"} 1\nvllm:num_requests_swapped{model_name=\"m\"} 0\n", "v0"},
		{"V0 with its CPU cache gauge", "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.1\nvllm:cpu_cache_usage_perc{model_name=\"m\"} 0\n", "v0"},
		{"V0 throughput gauges only", "vllm:num_requests_waiting{model_name=\"m\"} 0\nvllm:avg_prompt_throughput_toks_per_s{model_name=\"m\"} 3\n", "v0"},
		{"V1 ~0.8 without the engine label", "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\nvllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 10\n", "legacy"},
		{"V1 before the rename, engine label", "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n", "legacy"},
		{"V1 ~0.8 without any usage gauge", "vllm:num_requests_running{model_name=\"m\"} 1\nvllm:gpu_prefix_cache_queries_total{model_name=\"m\"} 4\n", "legacy"},
		{"current", "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\nvllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n", "current"},
		{"nothing generation-specific", "vllm:num_requests_running{model_name=\"m\"} 1\n", "current"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeBody(t, tt.body, "", nil).Generation; got != tt.want {
				t.Errorf("Generation = %q, want %q", got, tt.want)
			}
		})
	}
}
