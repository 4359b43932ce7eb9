package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// fixtureCase is one real capture from testdata/fixtures (see SOURCES.md
// there) with the values worked out by hand from the file.
type fixtureCase struct {
	file string
	// extra maps an endpoint path to a fixture file served there.
	extra map[string]string
	// kvUnified is the target's kv_unified (llama.cpp).
	kvUnified *bool
	// edit is an explicit change made before parsing (documents' elisions).
	edit func(string) string
	want summary
	// wantErr, when set, is a substring of the detection error.
	wantErr string
}

var fixtureCases = []fixtureCase{
	{
		// Dynamo's HTTP frontend, idle after one request.
		file: "dynamo-docs-metrics_examples-fe.prom",
		want: summary{Engine: "dynamo", Generation: "current", Model: "Qwen/Qwen3-0.6B", ContextLength: dir(40960),
			Signals: kv.Signals{
				// model_total_kv_blocks 92,962 × kv_cache_block_size 1 (an
				// SGLang worker: its blocks are tokens). Used is not on a
				// frontend page: usage unknown.
				Capacity: der(92962),
				// inflight 0 − queued 0.
				Running: der(0), Queued: kv.Queues{Waiting: dir(0)},
			}},
	},
	{
		// Dynamo's README example: 10 clients, a backend taking 3.
		file: "dynamo-deploy-metrics-README-http_queue.prom",
		want: summary{Engine: "dynamo", Generation: "current", Model: "qwen/qwen3-0.6b",
			// inflight 10 includes the 7 queued: 3 running.
			Signals: kv.Signals{Running: der(3), Queued: kv.Queues{Waiting: dir(7)}}},
	},
	{
		// A Dynamo SGLang worker: dynamo_component_* (kvstats not yet
		// published: total_blocks 0) and SGLang's own sglang:* families.
		file: "dynamo-docs-metrics_examples-sglang-partial.prom",
		want: summary{Engine: "sglang", Generation: "legacy", Model: "Qwen/Qwen3-0.6B", Role: kv.RoleUnified, Ranks: 1,
			Signals: kv.Signals{
				// max_total_num_tokens 92,962, num_used_tokens 0: 0 / 92,962.
				Capacity: dir(92962), Used: dir(0), UsageRatio: der(0),
				// pending_prealloc_token_usage 0.
				Demand: der(0), DemandRatio: dir(0), // 0 × 92,962 tokens
				Running: dir(0),
				Queued:  kv.Queues{Waiting: dir(0), Bootstrap: dir(0), Inflight: dir(0), Prealloc: dir(0), Transfer: dir(0)},
				// realtime_tokens_total: prefill_cache 0 hit of 0 + prefill_compute 33.
				Counters: kv.Counters{PrefixHitTokens: dir(0), PrefixQueryTokens: dir(33), PromptTokens: dir(33), GenerationTokens: dir(300)},
			},
			Spread: der(0), Warnings: []string{kv.WarnTwoEngines}},
	},
	{
		// A Dynamo vLLM worker: kvstats in blocks (5,943, no block size on
		// the page) next to vLLM's own vllm:* families.
		file: "dynamo-docs-metrics_examples-vllm-partial.prom",
		want: summary{Engine: "vllm", Generation: "current", Model: "Qwen/Qwen3-0.6B", Ranks: 1,
			Signals: kv.Signals{
				// cache_config_info num_gpu_blocks 5,943 × block_size 16; used
				// = ratio 0 × capacity.
				Capacity: der(95088), Used: der(0), UsageRatio: dir(0),
				Running: dir(0), Queued: kv.Queues{Waiting: dir(0)},
				Counters: kv.Counters{PrefixHitTokens: dir(0), PrefixQueryTokens: dir(0), Preemptions: dir(0),
					PromptTokens: dir(66), GenerationTokens: dir(600)},
			},
			Spread: der(0), Warnings: []string{kv.WarnTwoEngines},
			// LMCache's in-process connector: its local CPU backend holds 0
			// bytes; local_storage_usage and remote_cache_usage are 0 too,
			// backends not configured, so no L2 pool.
			Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes, Used: dir(0)}}},
	},
	{
		// A Dynamo TensorRT-LLM worker before it published kvstats: every
		// kvstats value 0, so KV is unavailable (not 0 % used); the
		// generate handler has 0 requests in flight.
		file: "dynamo-docs-metrics_examples-trtllm-partial.prom",
		want: summary{Engine: "dynamo", Generation: "kvstats", Model: "Qwen/Qwen3-0.6B",
			Signals: kv.Signals{Running: dir(0)}},
	},
	{
		// A Dynamo worker after PR #5704, written from its source (see
		// SOURCES.md): two DP ranks, no active-blocks gauge and no block
		// size on a worker page, so ratios only.
		file: "dynamo-src-worker-current-dp2.prom",
		want: summary{Engine: "dynamo", Generation: "current", Model: "Qwen/Qwen3-0.6B", Ranks: 2,
			Signals: kv.Signals{
				// No capacities in tokens: the mean of 0.25 and 0.625.
				UsageRatio: der(0.4375),
				// The generate handler's 7; clear_kv_blocks' 0 is not a request.
				Running: dir(7),
			},
			// 0.625 − 0.25.
			Spread: der(0.375)},
	},
	{
		// A Dynamo frontend running the KV router, written from its source:
		// the router's blocks per worker make ranks; the prefill worker's
		// 800 blocks are another pool and are not read.
		file: "dynamo-src-frontend-kv-router.prom",
		want: summary{Engine: "dynamo", Generation: "current", Model: "qwen/qwen3-0.6b", Ranks: 2, ContextLength: dir(40960),
			Signals: kv.Signals{
				// Per decode worker 5,943 blocks × 16 = 95,088 tokens; two workers.
				Capacity: der(190176),
				// (1,500 + 3,000) × 16.
				Used: der(72000), UsageRatio: der(72000.0 / 190176),
				// inflight 12 includes the 5 queued; the router's 2 pending
				// are among the 5.
				Running: der(7), Queued: kv.Queues{Waiting: dir(5)},
			},
			// 3,000 × 16 / 95,088 − 1,500 × 16 / 95,088.
			Spread: der(24000.0 / 95088)},
	},
	{
		// trtllm-serve with iteration stats only (enable_iter_perf_stats,
		// no return_perf_metrics), written from collector.py (see
		// SOURCES.md).
		file: "trtllm-serve-src-collector-iteration-stats.prom",
		want: summary{Engine: "trtllm-serve", Generation: "current", Model: "nvidia/Llama-3.1-8B-Instruct-FP8",
			Signals: kv.Signals{
				// 4,000 blocks × 32 tokens; used 1,500 × 32; utilization 1,500 / 4,000.
				Capacity: der(128000), Used: der(48000), UsageRatio: dir(0.375),
				Running: dir(12), Queued: kv.Queues{Waiting: dir(3)},
				// No per-request counters: reused 1,200 × 32 of (1,200 + 800) × 32;
				// the lifetime hit-rate gauge 0.6 is not used.
				Counters: kv.Counters{PrefixHitTokens: der(38400), PrefixQueryTokens: der(64000)},
			},
			// The host utilization 1/128 as the engine gives it, with what it
			// does not mean; its traffic: onboard 256 MiB loaded host → GPU,
			// offload 768 MiB stored GPU → host. The 64 MiB copied within
			// the GPU cross no tier: not read.
			Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, UsageRatio: dir(0.0078125),
				LoadBytes: dir(256 << 20), StoreBytes: dir(768 << 20), Note: tsHostNote}}},
	},
	{
		file: "sglang-docs-production_metrics.prom",
		want: summary{Engine: "sglang", Generation: "legacy", Model: "meta-llama/Llama-3.1-8B-Instruct", Ranks: 1,
			Signals: kv.Signals{
				// No max_total_num_tokens on this page: capacity unknown, and
				// not back-computed from the 0.01-rounded token_usage.
				Used: dir(123859), UsageRatio: dir(0.28),
				Running: dir(162), Queued: kv.Queues{Waiting: dir(2826)},
				Counters: kv.Counters{PromptTokens: dir(8128902), GenerationTokens: dir(7557572)},
			},
			Spread: der(0)},
	},
	{
		file: "sglang-pr1853-review-partial.prom",
		want: summary{Engine: "sglang", Generation: "first",
			Model: "/shared/public/elr-models/meta-llama/Llama-3.2-3B/5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/",
			Ranks: 1, ContextLength: dir(131072),
			Signals: kv.Signals{Capacity: dir(570979), Counters: kv.Counters{PromptTokens: dir(230794)}}},
	},
	{
		file: "sglang-pr4412-description-partial.prom",
		want: summary{Engine: "sglang", Generation: "legacy", Model: "/shared/public/models/Meta-Llama-3-8B-Instruct",
			Role: kv.RoleUnified, Ranks: 1,
			Signals: kv.Signals{Used: dir(0), UsageRatio: dir(0), Running: dir(0)}, Spread: der(0)},
	},
	{
		// Current SGLang, PD decode, DP 2 (written from the collector's
		// source, see SOURCES.md): HiCache, streaming sessions, KV-transfer
		// histograms, cached tokens by source.
		file: "sglang-source-current-pd-decode-dp2.prom",
		want: summary{Engine: "sglang", Generation: "current", Model: "Qwen/Qwen3-8B", Role: kv.RoleDecode, Ranks: 2,
			ContextLength: dir(40960),
			Signals: kv.Signals{
				// max_total_num_tokens 400,000 per DP rank.
				Capacity: dir(800000),
				// kv_used_tokens 120,000 + 10,000 held by streaming sessions
				// (derived) on DP 0, 80,000 on DP 1 (none held).
				Used: der(210000), Evictable: dir(50000),
				// The ratio of the sums: 210,000 / 800,000.
				UsageRatio: der(0.2625),
				// pending_prealloc_token_usage 0.01 × 400,000 on DP 0, 0 on DP 1;
				// its ratio weighted by capacity: 4,000 / 800,000.
				Demand: der(4000), DemandRatio: der(0.005),
				Running: dir(20),
				Queued:  kv.Queues{Waiting: dir(3), Prealloc: dir(2), Transfer: dir(2)},
				// cached_tokens_total: device 5,000 + host 2,000 +
				// storage_mooncake 1,000 of prompt_tokens_total 40,000.
				Counters: kv.Counters{PrefixHitTokens: dir(8000), PrefixQueryTokens: dir(40000), Preemptions: dir(5),
					PromptTokens: dir(40000), GenerationTokens: dir(9000)},
			},
			// full_token_usage 0.325 (130,000 / 400,000) and 0.25.
			Spread: der(0.075),
			Pools: []kv.CachePool{
				// HiCache host: 800,000 per DP rank, 200,000 + 100,000 used,
				// 2,000 hit tokens served from it.
				{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(1600000), Used: dir(300000),
					UsageRatio: der(0.1875), HitTokens: dir(2000)},
				// The storage backend named by its cache_source.
				{Type: kv.PoolFull, Tier: kv.TierRemote, Name: "mooncake", Unit: kv.UnitTokens, HitTokens: dir(1000)},
			}},
	},
	{
		// SGLang of early 2026, PD prefill (the collector @44cedc2b9c7d):
		// the bootstrap queue under its old name, KV-transfer gauges,
		// cache_config_info.
		file: "sglang-source-early2026-pd-prefill.prom",
		want: summary{Engine: "sglang", Generation: "legacy", Model: "Qwen/Qwen3-8B", Role: kv.RolePrefill, Ranks: 1,
			Signals: kv.Signals{
				// num_used_tokens 52,000 of max_total_num_tokens 400,000.
				Capacity: dir(400000), Used: dir(52000), UsageRatio: der(0.13),
				// num_running_reqs 0 on a prefill page of this version is no
				// count (sglang #31495): unavailable.
				Queued:   kv.Queues{Waiting: dir(6), Bootstrap: dir(4), Inflight: dir(2), Prealloc: dir(0), Transfer: dir(0)},
				Counters: kv.Counters{PromptTokens: dir(90000), GenerationTokens: dir(300)},
			},
			Spread: der(0), Unavailable: []string{kv.UnknownVersion}},
	},
	{
		// Current vLLM, DP 2, engine 1 asleep at level 1 (written from
		// vllm/v1/metrics/loggers.py, see SOURCES.md).
		file: "vllm-source-current-dp2-asleep.prom",
		want: summary{Engine: "vllm", Generation: "current", Model: "meta-llama/Llama-3.1-8B-Instruct", Ranks: 2,
			// kv_cache_size_tokens 524,288 / kv_cache_max_concurrency 4.
			ContextLength: der(131072),
			Signals: kv.Signals{
				// Engine 0 only: kv_cache_size_tokens 524,288 at 0.4 (used
				// round(0.4 × 524,288)); engine 1 released its KV, so every
				// KV total lacks a part.
				Capacity: kv.Value{V: 524288, Prov: kv.Partial}, Used: kv.Value{V: 209715, Prov: kv.Partial},
				UsageRatio: kv.Value{V: 0.4, Prov: kv.Partial},
				// num_requests_waiting 3 (its reasons 2 + 1 not added again).
				Running: dir(5), Queued: kv.Queues{Waiting: dir(3)},
				// Every tier's hits: the GPU's prefix_cache_hits 60,000 +
				// 10,000 (local_cache_hit, the same tokens: not added) and
				// the native CPU tier's external_kv_transfer 10,000 + 0;
				// prompt_tokens_cached 70,000 + 10,000 says the same.
				Counters: kv.Counters{PrefixHitTokens: der(80000), PrefixQueryTokens: dir(120000), Preemptions: dir(2),
					PromptTokens: dir(120000), GenerationTokens: dir(10000)},
			},
			Unavailable: []string{kv.UnknownAsleep},
			// The native CPU offload tier: external_kv_transfer 10,000 + 0;
			// loaded 4e8 + 0 and stored 1.2e9 + 0 bytes (the deprecated
			// total_bytes{transfer_type} beside them, equal, not added).
			Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: dir(10000),
				LoadBytes: dir(4e8), StoreBytes: dir(1.2e9), Note: vlOffloadNote}}},
	},
	{
		// vLLM 0.11 with --api-server-count 2 (before vllm #28792): one
		// gauge series per API server process (pid), and only
		// cache_config_info labelled with its engine.
		file: "vllm-source-0.11-api-servers.prom",
		want: summary{Engine: "vllm", Generation: "current", Model: "Qwen/Qwen3-4B", Ranks: 1,
			Signals: kv.Signals{
				// num_gpu_blocks 27,000 × block_size 16 of engine "0", the
				// page's only engine; the pids' 0.3 is one engine's, not 0.6.
				Capacity: der(432000), Used: der(129600), UsageRatio: dir(0.3),
				Running: dir(4), Queued: kv.Queues{Waiting: dir(1)},
				Counters: kv.Counters{PrefixHitTokens: dir(1000), PrefixQueryTokens: dir(5000), Preemptions: dir(0),
					PromptTokens: dir(5000), GenerationTokens: dir(700)},
			},
			Spread: der(0)},
	},
	{
		file: "vllm-docs-design-metrics-example_output.prom", edit: dropEllipses,
		want: summary{Engine: "vllm", Generation: "current", Model: "meta-llama/Llama-3.1-8B-Instruct", Ranks: 1,
			Signals: kv.Signals{Running: dir(8), Counters: kv.Counters{GenerationTokens: dir(27453)}}},
	},
	{
		// The document elides labels inside the braces ("...}"); with the
		// elision removed the info series has block_size but no
		// num_gpu_blocks: capacity unknown.
		file: "vllm-docs-design-metrics-cache_config_info.prom",
		edit: func(s string) string { return strings.Replace(s, `,...}`, `}`, 1) },
		want: summary{Engine: "vllm", Generation: "current"},
	},
	{
		file:    "vllm-docs-design-metrics-http_filtered.prom",
		wantErr: "no known engine metrics among the page's 5 families (e.g. http_requests, http_request_size_bytes, http_response_size_bytes, http_request_duration_highr_seconds, http_request_duration_seconds)",
	},
	{
		// Only an iteration-tokens histogram survives the elision: nothing
		// kvwatch reads.
		file: "vllm-docs-usage-metrics.prom", edit: dropEllipses,
		wantErr: "no known engine metrics among the page's 1 families (e.g. vllm:iteration_tokens_total)",
	},
	{
		file: "vllm-v0-aibrix-docs-runtime_rst-passthrough.prom",
		want: summary{Engine: "vllm", Generation: "v0", Model: "Qwen/Qwen2.5-Coder-1.5B-Instruct", Ranks: 1,
			Signals: kv.Signals{
				// cache_config_info: num_gpu_blocks 81767 × block_size 16.
				Capacity: der(1308272), Used: der(0), UsageRatio: dir(0),
				Running: dir(0), Queued: kv.Queues{Waiting: dir(0)},
				Counters: kv.Counters{Preemptions: dir(0), PromptTokens: dir(148), GenerationTokens: dir(955)},
			},
			Spread: der(0),
			// V0's swap space: num_cpu_blocks 9,362 × block_size 16, at
			// cpu_cache_usage_perc 0.
			Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens,
				Capacity: der(149792), Used: der(0), UsageRatio: dir(0),
				Note: "V0 swap space: the KV of preempted requests swapped out to host memory"}}},
	},
	{
		file: "triton-trtllm-tensorrtllm_backend-README-inflight_batcher.prom",
		want: summary{Engine: "triton", Generation: "inflight_batcher", Model: "tensorrt_llm", Ranks: 1,
			Signals: kv.Signals{
				// max 6239 × tokens_per 64, used 1 × 64; ratio used/max =
				// 1/6239, not the sample's inconsistent fraction 0.4875.
				Capacity: der(399296), Used: der(64), UsageRatio: der(1.0 / 6239),
				Running: dir(1), Queued: kv.Queues{Waiting: dir(1)},
			},
			Spread: der(0)},
	},
	{
		file: "triton-trtllm-tensorrtllm_backend-README-v1_model.prom",
		want: summary{Engine: "triton", Generation: "v1", Model: "tensorrt_llm", Ranks: 1},
	},
	{
		file: "triton-core-tensorrtllm_backend-README-base_metrics.prom",
		want: summary{Engine: "triton", Generation: "core", Model: "tensorrt_llm",
			Signals: kv.Signals{Queued: kv.Queues{Waiting: dir(0)}}},
	},
	{
		file: "llamacpp-pr13196-comment-partial.prom",
		want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified,
			Signals:     kv.Signals{Counters: kv.Counters{PromptTokens: dir(143), GenerationTokens: dir(673)}},
			Unavailable: []string{kv.UnknownRemoved}},
	},
	{
		// A current llama-server page written from get_metrics (see
		// SOURCES.md), read without /slots and /props: KV unavailable with
		// the reason; what the page still tells is read.
		file: "llamacpp-src-current-spec.prom",
		want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified,
			Signals: kv.Signals{
				Running: dir(3), Queued: kv.Queues{Waiting: dir(2)},
				// cached 2,048; queried = 2,048 + processed 5,120.
				Counters: kv.Counters{PrefixHitTokens: dir(2048), PrefixQueryTokens: der(7168), PromptTokens: dir(5120), GenerationTokens: dir(7680)},
			},
			Unavailable: []string{kv.UnknownRemoved}},
	},
	{
		// An LMDeploy api_server of DP rank 1 (one api_server per rank),
		// written from loggers.py @1263d5cd (see SOURCES.md).
		file: "lmdeploy-src-loggers-dp-rank1.prom",
		want: summary{Engine: "lmdeploy", Generation: "current", Model: "internlm/internlm3-8b-instruct", Ranks: 1,
			Signals: kv.Signals{
				// A ratio only: no capacity or used tokens on the page.
				UsageRatio: dir(0.18), Running: dir(2), Queued: kv.Queues{Waiting: dir(0)},
				// cached 2,000 of the 19,000 prompt tokens of the same 30
				// finished requests (not of prompt_tokens_total's 20,000,
				// credited at first tokens); the 0.1 gauge is not used.
				Counters: kv.Counters{PromptTokens: dir(20000), GenerationTokens: dir(8000), PrefixHitTokens: dir(2000), PrefixQueryTokens: dir(19000)},
			},
			Spread: der(0)},
	},
	{
		// No slot has had a task yet: every slot holds 0 tokens.
		file:  "llamacpp-real-idle.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-idle.slots.json", PathProps: "llamacpp-real-props.json"},
		// Started with --parallel 4 (shared/reference/llamacpp-real.md): KV per slot.
		kvUnified: new(false),
		want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				// /props: n_ctx 1024 per slot × total_slots 4.
				Capacity: der(4096), Used: der(0), UsageRatio: der(0),
				Running: dir(0), Queued: kv.Queues{Waiting: dir(0)},
				Counters: kv.Counters{PrefixHitTokens: dir(0), PrefixQueryTokens: der(0), PromptTokens: dir(0), GenerationTokens: dir(0)},
			}},
	},
	{
		file:  "llamacpp-real-load-queued.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-load-queued.slots.json", PathProps: "llamacpp-real-props.json"},
		// Started with --parallel 4 (shared/reference/llamacpp-real.md): KV per slot.
		kvUnified: new(false),
		want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				// n_prompt_tokens 502 + 723 + 635 + 530.
				Capacity: der(4096), Used: der(2390), UsageRatio: der(2390.0 / 4096),
				Running: dir(4), Queued: kv.Queues{Waiting: dir(12)},
				// cached 0; queried = cached 0 + processed 1833.
				Counters: kv.Counters{PrefixHitTokens: dir(0), PrefixQueryTokens: der(1833), PromptTokens: dir(1833), GenerationTokens: dir(0)},
			}},
	},
	{
		file:  "llamacpp-real-load.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-load.slots.json", PathProps: "llamacpp-real-props.json"},
		// Started with --parallel 4 (shared/reference/llamacpp-real.md): KV per slot.
		kvUnified: new(false),
		want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				// n_prompt_tokens 549 + 420 + 337 + 661.
				Capacity: der(4096), Used: der(1967), UsageRatio: der(1967.0 / 4096),
				Running: dir(4), Queued: kv.Queues{Waiting: dir(4)},
				// cached 45; queried = 45 + processed 4806.
				Counters: kv.Counters{PrefixHitTokens: dir(45), PrefixQueryTokens: der(4851), PromptTokens: dir(4806), GenerationTokens: dir(1536)},
			}},
	},
	{
		file:  "llamacpp-real-b5440-idle.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-b5440-idle.slots.json", PathProps: "llamacpp-real-b5440-props.json"},
		want: summary{Engine: "llamacpp", Generation: "legacy", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				Capacity: der(4096), Used: dir(0), UsageRatio: dir(0),
				Running: dir(0), Queued: kv.Queues{Waiting: dir(0)},
				Counters: kv.Counters{PromptTokens: dir(0), GenerationTokens: dir(0)},
			}},
	},
	{
		file:  "llamacpp-real-b5440-load-queued.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-b5440-load-queued.slots.json", PathProps: "llamacpp-real-b5440-props.json"},
		want: summary{Engine: "llamacpp", Generation: "legacy", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				// kv_cache_tokens 2494 and kv_cache_usage_ratio 0.608887 (= 2494/4096 to 6 digits).
				Capacity: der(4096), Used: dir(2494), UsageRatio: dir(0.608887),
				Running: dir(4), Queued: kv.Queues{Waiting: dir(12)},
				Counters: kv.Counters{PromptTokens: dir(1833), GenerationTokens: dir(0)},
			}},
	},
	{
		file:  "llamacpp-real-b5440-load.prom",
		extra: map[string]string{PathSlots: "llamacpp-real-b5440-load.slots.json", PathProps: "llamacpp-real-b5440-props.json"},
		want: summary{Engine: "llamacpp", Generation: "legacy", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
			ContextLength: dir(1024),
			Signals: kv.Signals{
				Capacity: der(4096), Used: dir(2583), UsageRatio: dir(0.630615),
				Running: dir(4), Queued: kv.Queues{Waiting: dir(4)},
				Counters: kv.Counters{PromptTokens: dir(6106), GenerationTokens: dir(1536)},
			}},
	},
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixtures(t *testing.T) {
	for _, tc := range fixtureCases {
		t.Run(tc.file, func(t *testing.T) {
			body := string(readFixture(t, tc.file))
			if tc.edit != nil {
				body = tc.edit(body)
			}
			extra := map[string][]byte{}
			for path, f := range tc.extra {
				extra[path] = readFixture(t, f)
			}
			r := NewRegistry()
			p, err := expo.Parse([]byte(body), "text/plain; version=0.0.4", r.Want)
			if err != nil {
				t.Fatalf("expo.Parse: %v", err)
			}
			a, err := r.Detect(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Detect = %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			s, err := a.Normalize(Input{Page: p, Extra: extra, KVUnified: tc.kvUnified})
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if diff := cmp.Diff(tc.want, summarize(s), valueCmp); diff != "" {
				t.Errorf("Normalize(%s) (-want +got):\n%s", tc.file, diff)
			}
		})
	}
}

// TestFixturesCovered fails when a fixture file has no case, so a new
// capture cannot be added without its hand-worked values.
func TestFixturesCovered(t *testing.T) {
	covered := map[string]bool{"SOURCES.md": true}
	for _, tc := range fixtureCases {
		covered[tc.file] = true
		for _, f := range tc.extra {
			covered[f] = true
		}
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("fixture %s has no case in fixtureCases", e.Name())
		}
	}
}

// TestFixturesWithElisionsFail checks that a page with the documents' "..."
// lines, served as is, is a clear parse error naming the line.
func TestFixturesWithElisionsFail(t *testing.T) {
	tests := []struct{ file, want string }{
		{"vllm-docs-design-metrics-example_output.prom", `line 4: "..." is not a metric line`},
		{"vllm-docs-usage-metrics.prom", `line 12: "..." is not a metric line`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, err := expo.Parse(readFixture(t, tt.file), "", NewRegistry().Want)
			if err == nil || !errors.Is(err, expo.ErrNotMetrics) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("expo.Parse(%s) = %v, want ErrNotMetrics containing %q", tt.file, err, tt.want)
			}
		})
	}
	// The elision inside a label set is caught by the Prometheus parser.
	_, err := expo.Parse(readFixture(t, "vllm-docs-design-metrics-cache_config_info.prom"), "", NewRegistry().Want)
	if err == nil || !strings.HasPrefix(err.Error(), "parse metrics:") {
		t.Fatalf("expo.Parse(cache_config_info) = %v, want a parse error", err)
	}
}

// dropEllipses removes the lines that are only "..." (elisions in the
// documents the fixtures were copied from; not valid exposition).
func dropEllipses(body string) string {
	lines := strings.SplitAfter(body, "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.TrimSpace(l) == "..." {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}
