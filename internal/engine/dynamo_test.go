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
			want: summary{Engine: "dynamo", Generation: "kvstats", Ranks: 2,
				// No capacities: mean of 0.77 and 0.29.
				Signals: kv.Signals{UsageRatio: der(0.53)}, Spread: der(0.48)},
		},
		{
			name: "workers and frontend: blocks × 16 tokens",
			body: dynamoWorkers + dynamoFrontend,
			want: summary{Engine: "dynamo", Generation: "kvstats", Model: "llama", Ranks: 2, ContextLength: dir(8192),
				Signals: kv.Signals{
					// (100 + 100) × 16; (77 + 29) × 16.
					Capacity: der(3200), Used: der(1696), UsageRatio: der(1696.0 / 3200),
					// inflight 10 includes the 4 queued.
					Running: der(6), Queued: kv.Queues{Waiting: dir(4)},
				},
				Spread: der(0.48)},
		},
		{
			name: "a worker that has not published kvstats yet (total 0) is no rank, its 0 % usage unknown",
			body: "dynamo_component_kvstats_active_blocks{worker_id=\"a\"} 0\ndynamo_component_kvstats_total_blocks{worker_id=\"a\"} 0\ndynamo_component_kvstats_gpu_cache_usage_percent{worker_id=\"a\"} 0\n" +
				"dynamo_component_kvstats_active_blocks{worker_id=\"b\"} 25\ndynamo_component_kvstats_total_blocks{worker_id=\"b\"} 100\ndynamo_component_kvstats_gpu_cache_usage_percent{worker_id=\"b\"} 0.25\n",
			want: summary{Engine: "dynamo", Generation: "kvstats", Ranks: 1,
				// Only b: its direct ratio; no block size, so no tokens.
				Signals: kv.Signals{UsageRatio: dir(0.25)}, Spread: der(0)},
		},
		{
			name: "every worker unpublished: KV unavailable",
			body: "dynamo_component_kvstats_active_blocks 0\ndynamo_component_kvstats_total_blocks 0\ndynamo_component_kvstats_gpu_cache_usage_percent 0\n",
			want: summary{Engine: "dynamo", Generation: "kvstats"},
		},
		{
			name: "more queued than inflight (scraped between two updates): running clamped at 0",
			body: "dynamo_frontend_inflight_requests{model=\"m\"} 2\ndynamo_frontend_queued_requests{model=\"m\"} 5\n",
			want: summary{Engine: "dynamo", Generation: "current", Model: "m",
				Signals: kv.Signals{Running: der(0), Queued: kv.Queues{Waiting: dir(5)}}},
		},
		{
			name: "inflight without the queue gauge: running unknown, not inflight",
			body: "dynamo_frontend_inflight_requests{model=\"m\"} 9\n",
			want: summary{Engine: "dynamo", Generation: "current", Model: "m"},
		},
		{
			name: "frontend with two models: capacity summed over the model cards",
			body: "dynamo_frontend_model_total_kv_blocks{model=\"a\"} 1000\ndynamo_frontend_model_kv_cache_block_size{model=\"a\"} 16\n" +
				"dynamo_frontend_model_total_kv_blocks{model=\"b\"} 500\ndynamo_frontend_model_kv_cache_block_size{model=\"b\"} 32\n",
			// 1,000 × 16 + 500 × 32.
			want: summary{Engine: "dynamo", Generation: "current", Model: "a", Signals: kv.Signals{Capacity: der(32000)}},
		},
		{
			name: "a model card without a block size: capacity unknown, not the other model's alone",
			body: "dynamo_frontend_model_total_kv_blocks{model=\"a\"} 1000\ndynamo_frontend_model_kv_cache_block_size{model=\"a\"} 16\n" +
				"dynamo_frontend_model_total_kv_blocks{model=\"b\"} 500\n",
			want: summary{Engine: "dynamo", Generation: "current", Model: "a"},
		},
		{
			name: "current names: blocks × 16 tokens, used from the ratio",
			body: "dynamo_component_total_blocks{dp_rank=\"0\",model=\"m\"} 1000\ndynamo_component_gpu_cache_usage_percent{dp_rank=\"0\",model=\"m\"} 0.4\n" +
				"dynamo_frontend_model_kv_cache_block_size{model=\"m\"} 16\n",
			want: summary{Engine: "dynamo", Generation: "current", Model: "m", Ranks: 1,
				// 1,000 × 16; 0.4 × 16,000.
				Signals: kv.Signals{Capacity: der(16000), Used: der(6400), UsageRatio: dir(0.4)}, Spread: der(0)},
		},
		{
			name: "current names, total 0: not published, KV unavailable",
			body: "dynamo_component_total_blocks{dp_rank=\"0\"} 0\ndynamo_component_gpu_cache_usage_percent{dp_rank=\"0\"} 0\n",
			want: summary{Engine: "dynamo", Generation: "current"},
		},
		{
			name: "both dialects agreeing: read as current, no warning",
			body: "dynamo_component_total_blocks{dp_rank=\"0\"} 1000\ndynamo_component_gpu_cache_usage_percent{dp_rank=\"0\"} 0.4\n" +
				"dynamo_component_kvstats_total_blocks{dp_rank=\"0\"} 1000\ndynamo_component_kvstats_gpu_cache_usage_percent{dp_rank=\"0\"} 0.4\ndynamo_component_kvstats_active_blocks{dp_rank=\"0\"} 400\n",
			want: summary{Engine: "dynamo", Generation: "current", Ranks: 1, Signals: kv.Signals{UsageRatio: dir(0.4)}, Spread: der(0)},
		},
		{
			name: "both dialects disagreeing: the current value, a mixed_dialect warning per value",
			body: "dynamo_component_total_blocks{dp_rank=\"0\"} 1000\ndynamo_component_gpu_cache_usage_percent{dp_rank=\"0\"} 0.4\n" +
				"dynamo_component_kvstats_total_blocks{dp_rank=\"0\"} 800\ndynamo_component_kvstats_gpu_cache_usage_percent{dp_rank=\"0\"} 0.9\n" +
				"dynamo_frontend_model_kv_cache_block_size 16\n",
			want: summary{Engine: "dynamo", Generation: "current", Ranks: 1,
				// 1,000 × 16 and 0.4 of it: not 800 blocks, not 0.9, no mean.
				Signals: kv.Signals{Capacity: der(16000), Used: der(6400), UsageRatio: dir(0.4)}, Spread: der(0),
				Warnings: []string{kv.WarnMixedDialect, kv.WarnMixedDialect}},
		},
		{
			name: "both dialects, one worker named two ways (worker_id, dp_rank), disagreeing: still a warning",
			body: "dynamo_component_gpu_cache_usage_percent{dp_rank=\"0\"} 0.4\ndynamo_component_kvstats_gpu_cache_usage_percent{worker_id=\"w\"} 0.9\n",
			want: summary{Engine: "dynamo", Generation: "current", Ranks: 1, Signals: kv.Signals{UsageRatio: dir(0.4)}, Spread: der(0),
				Warnings: []string{kv.WarnMixedDialect}},
		},
		{
			name: "the router's pending queue when the HTTP queue gauge is missing",
			body: "dynamo_frontend_router_queue_pending_requests{worker_type=\"prefill\"} 3\ndynamo_frontend_router_queue_pending_requests{worker_type=\"decode\"} 1\n",
			want: summary{Engine: "dynamo", Generation: "current", Signals: kv.Signals{Queued: kv.Queues{Waiting: dir(4)}}},
		},
		{
			name: "frontend worker blocks without a block size: no ranks, nothing made up",
			body: "dynamo_frontend_worker_active_decode_blocks{dp_rank=\"0\",worker_id=\"a\",worker_type=\"decode\"} 10\n",
			want: summary{Engine: "dynamo", Generation: "current"},
		},
		{
			name: "worker handler: only the generate endpoint's requests",
			body: "dynamo_component_inflight_requests{dynamo_endpoint=\"generate\",model=\"m\"} 4\ndynamo_component_inflight_requests{dynamo_endpoint=\"clear_kv_blocks\",model=\"m\"} 1\n",
			want: summary{Engine: "dynamo", Generation: "current", Model: "m", Signals: kv.Signals{Running: dir(4)}},
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
	if !got.Warned(kv.WarnTwoEngines) {
		t.Errorf("Warnings = %v, want a %s warning", got.Warnings, kv.WarnTwoEngines)
	}
}

// TestKVBMPage: a whole KVBM listener page, written from Dynamo's code
// (lib/runtime prometheus_names, kvbm module: Rust counters without
// _total, no labels; no real capture was found, see docs/engines.md).
// Values worked out by hand: the hit rates are the pools' windowed rates,
// the transfer counters are not fill, and a KVBM page has no GPU KV: its
// role is cache.
func TestKVBMPage(t *testing.T) {
	body := "# HELP kvbm_offload_blocks_d2h The number of offload blocks from device to host\n# TYPE kvbm_offload_blocks_d2h counter\nkvbm_offload_blocks_d2h 48809\n" +
		"# TYPE kvbm_offload_blocks_h2d counter\nkvbm_offload_blocks_h2d 30059\n" +
		"# TYPE kvbm_onboard_blocks_h2d counter\nkvbm_onboard_blocks_h2d 11407\n" +
		"# TYPE kvbm_onboard_blocks_d2d counter\nkvbm_onboard_blocks_d2d 5285\n" +
		"# TYPE kvbm_matched_tokens counter\nkvbm_matched_tokens 267091\n" +
		"# TYPE kvbm_host_cache_hit_rate gauge\nkvbm_host_cache_hit_rate 0.2303497212366954\n" +
		"# TYPE kvbm_disk_cache_hit_rate gauge\nkvbm_disk_cache_hit_rate 0.10655854029396858\n"
	got := summarize(normalizeBody(t, body, "", nil))
	want := summary{Engine: "dynamo", Generation: "current", Role: kv.RoleCache, Pools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitRate: dir(0.2303497212366954)},
		{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: dir(0.10655854029396858)},
	}}
	if diff := cmp.Diff(want, got, valueCmp); diff != "" {
		t.Errorf("Normalize (-want +got):\n%s", diff)
	}
}

// TestKVBMBesideWorkerKV: a page with a worker's kvstats and KVBM's hit
// rates (one process serving both) holds a KV pool: not a cache server.
// Only a page of KVBM's gauges alone is role cache (TestKVBMPage).
func TestKVBMBesideWorkerKV(t *testing.T) {
	body := "dynamo_component_kvstats_total_blocks{dp_rank=\"0\"} 1000\n" +
		"dynamo_component_kvstats_active_blocks{dp_rank=\"0\"} 250\n" +
		"dynamo_component_kvstats_gpu_cache_usage_percent{dp_rank=\"0\"} 0.25\n" +
		"kvbm_host_cache_hit_rate 0.5\n"
	got := normalizeBody(t, body, "", nil)
	if got.Role == kv.RoleCache {
		t.Errorf("role = %q: a page with the worker's KV is no cache server", got.Role)
	}
	if !got.UsageRatio.OK() || got.UsageRatio.V != 0.25 || len(got.CachePools) != 1 {
		t.Errorf("usage %v, %d pools; want 0.25 and the host tier", got.UsageRatio, len(got.CachePools))
	}
}

// TestDynamoMixedDialectsWarning: the warning names both names and both
// values, so the operator sees which exporter is stale.
func TestDynamoMixedDialectsWarning(t *testing.T) {
	got := normalizeBody(t, "dynamo_component_gpu_cache_usage_percent{dp_rank=\"1\"} 0.4\ndynamo_component_kvstats_gpu_cache_usage_percent{dp_rank=\"1\"} 0.9\n", "", nil)
	want := []kv.Warning{{Reason: kv.WarnMixedDialect, Detail: `rank "1": dynamo_component_gpu_cache_usage_percent is 0.4 but dynamo_component_kvstats_gpu_cache_usage_percent (the name before Dynamo PR #5704) is 0.9; read dynamo_component_gpu_cache_usage_percent`}}
	if diff := cmp.Diff(want, got.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
