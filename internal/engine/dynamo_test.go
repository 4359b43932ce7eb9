package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

const dynamoWorkers = `# TYPE dynamo_component_kvstats_active_blocks gauge
dynamo_component_kvstats_active_blocks{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033398"} 77
dynamo_component_kvstats_active_blocks{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033401"} 29
# TYPE dynamo_component_kvstats_total_blocks gauge
dynamo_component_kvstats_total_blocks{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033398"} 100
dynamo_component_kvstats_total_blocks{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033401"} 100
# TYPE dynamo_component_kvstats_gpu_cache_usage_percent gauge
dynamo_component_kvstats_gpu_cache_usage_percent{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033398"} 0.77
dynamo_component_kvstats_gpu_cache_usage_percent{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="7587884888253033401"} 0.29
`

const dynamoFrontend = `# TYPE dynamo_frontend_model_kv_cache_block_size gauge
dynamo_frontend_model_kv_cache_block_size{model="llama"} 16
# TYPE dynamo_frontend_queued_requests gauge
dynamo_frontend_queued_requests{model="llama"} 4
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{model="llama"} 10
# TYPE dynamo_frontend_model_context_length gauge
dynamo_frontend_model_context_length{model="llama"} 8192
`

func TestDynamo(t *testing.T) {
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "workers without a block size: ratio only",
			body: dynamoWorkers,
			want: summary{Engine: "dynamo", Generation: "current", Ranks: 2,
				// No capacities: mean of 0.77 and 0.29.
				Signals: kv.Signals{UsageRatio: der(0.53)}, Spread: der(0.48)},
		},
		{
			name: "workers and frontend: blocks × 16 tokens",
			body: dynamoWorkers + dynamoFrontend,
			want: summary{Engine: "dynamo", Generation: "current", Model: "llama", Ranks: 2, ContextLength: dir(8192),
				Signals: kv.Signals{
					// (100 + 100) × 16; (77 + 29) × 16.
					Capacity: der(3200), Used: der(1696), UsageRatio: der(1696.0 / 3200),
					Running: dir(10), Queued: kv.Queues{Waiting: dir(4)},
				},
				Spread: der(0.48)},
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

// TestDynamoPassThroughIsTheEngine: a worker page that carries the engine's
// own metrics is read by that engine's adapter.
func TestDynamoPassThroughIsTheEngine(t *testing.T) {
	got := normalizeBody(t, dynamoWorkers+"sglang:max_total_num_tokens{tp_rank=\"0\"} 1000\nsglang:kv_used_tokens{tp_rank=\"0\"} 10\n", "", nil)
	if got.Engine != "sglang" {
		t.Errorf("Engine = %q, want sglang", got.Engine)
	}
}
