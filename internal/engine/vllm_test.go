package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

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

// TestVLLMNewFamilies: the families newer vLLM adds are read, and a page
// without them (older vLLM) keeps its values. Pages written from vLLM's
// metrics (cache_config_info labels of vllm #42206, waiting by reason of
// vllm #38435); values worked out by hand.
func TestVLLMNewFamilies(t *testing.T) {
	const l = `engine="0",model_name="m"`
	old := "vllm:num_requests_running{" + l + "} 3.0\nvllm:num_requests_waiting{" + l + "} 5.0\n" +
		"vllm:kv_cache_usage_perc{" + l + "} 0.25\n" +
		`vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="4097"} 1.0` + "\n"
	newer := "vllm:num_requests_running{" + l + "} 3.0\nvllm:num_requests_waiting{" + l + "} 5.0\n" +
		"vllm:num_requests_waiting_by_reason{" + l + `,reason="capacity"} 4.0` + "\n" +
		"vllm:num_requests_waiting_by_reason{" + l + `,reason="deferred"} 1.0` + "\n" +
		"vllm:kv_cache_usage_perc{" + l + "} 0.25\n" +
		`vllm:cache_config_info{block_size="16",engine="0",kv_cache_max_concurrency="2.5",kv_cache_size_tokens="327680",num_gpu_blocks="20481"} 1.0` + "\n"
	// Only the breakdown, no total (a scrape filtered to it).
	byReason := "vllm:num_requests_running{" + l + "} 3.0\n" +
		"vllm:num_requests_waiting_by_reason{" + l + `,reason="capacity"} 4.0` + "\n" +
		"vllm:num_requests_waiting_by_reason{" + l + `,reason="deferred"} 1.0` + "\n" +
		`vllm:cache_config_info{engine="0",kv_cache_max_concurrency="None",kv_cache_size_tokens="327680"} 1.0` + "\n"
	tests := []struct {
		name, body     string
		capacity, used kv.Value
		waiting, ctx   kv.Value
	}{
		// 4,097 blocks × 16 = 65,552 (older pages count the null block); used 0.25 × that.
		{"older vLLM: no new families", old, der(65552), der(16388), dir(5), kv.Value{}},
		// capacity 327,680 direct; context 327,680 / 2.5 = 131,072.
		{"newer vLLM", newer, dir(327680), der(81920), dir(5), der(131072)},
		// waiting 4 + 1 = 5 (derived); max concurrency "None": no context length.
		{"breakdown without the total", byReason, dir(327680), kv.Value{}, der(5), kv.Value{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "", nil)
			for _, c := range []struct {
				what      string
				got, want kv.Value
			}{{"capacity", s.Capacity, tt.capacity}, {"used", s.Used, tt.used}, {"waiting", s.Queued.Waiting, tt.waiting}, {"context length", s.ContextLength, tt.ctx}} {
				if diff := cmp.Diff(c.want, c.got, valueCmp); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.what, diff)
				}
			}
		})
	}
}

// TestVLLMDialects: names and meanings that changed across vLLM versions
// (pages written from vllm/v1/metrics/loggers.py and the PRs cited in
// docs/engines.md; values worked out by hand).
func TestVLLMDialects(t *testing.T) {
	const e0 = `engine="0",model_name="m"`
	tests := []struct {
		name string
		body string
		want summary
	}{
		{
			// 0.9.2–0.11 wrote both names from one statistic; a page where
			// they differ mixes two versions: the new one is read, warned.
			name: "usage under both names, different",
			body: "vllm:kv_cache_usage_perc{" + e0 + "} 0.4\nvllm:gpu_cache_usage_perc{" + e0 + "} 0.6\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.4)}, Spread: der(0), Warnings: []string{kv.WarnMixedDialect}},
		},
		{
			name: "prefix counters under both names, different",
			body: "vllm:num_requests_running{" + e0 + "} 1\nvllm:prefix_cache_hits_total{" + e0 + "} 10\nvllm:prefix_cache_queries_total{" + e0 + "} 40\n" +
				"vllm:gpu_prefix_cache_hits_total{" + e0 + "} 20\nvllm:gpu_prefix_cache_queries_total{" + e0 + "} 40\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals:  kv.Signals{Running: dir(1), Counters: kv.Counters{PrefixHitTokens: dir(10), PrefixQueryTokens: dir(40)}},
				Warnings: []string{kv.WarnMixedDialect}},
		},
		{
			// Sleep level 2: KV released; never 0 % full.
			name: "asleep, discard_all",
			body: "vllm:num_requests_running{" + e0 + "} 0\nvllm:kv_cache_usage_perc{" + e0 + "} 0\n" +
				"vllm:engine_sleep_state{" + e0 + `,sleep_state="awake"} 0` + "\n" +
				"vllm:engine_sleep_state{" + e0 + `,sleep_state="weights_offloaded"} 0` + "\n" +
				"vllm:engine_sleep_state{" + e0 + `,sleep_state="discard_all"} 1` + "\n" +
				`vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Running: dir(0)}, Unavailable: []string{kv.UnknownAsleep}},
		},
		{
			name: "awake",
			body: "vllm:num_requests_running{" + e0 + "} 0\nvllm:kv_cache_usage_perc{" + e0 + "} 0\n" +
				"vllm:engine_sleep_state{" + e0 + `,sleep_state="awake"} 1` + "\n" +
				"vllm:engine_sleep_state{" + e0 + `,sleep_state="weights_offloaded"} 0` + "\n" +
				`vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1` + "\n",
			// 1,000 blocks × 16, at 0.
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Capacity: der(16000), Used: der(0), UsageRatio: dir(0), Running: dir(0)}, Spread: der(0)},
		},
		{
			// Two engines on a page whose gauges carry no engine label: no
			// engine's capacity is the unlabelled rank's.
			name: "cache_config_info of two engines, gauges unlabelled",
			body: "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n" +
				`vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1` + "\n" +
				`vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="1000"} 1` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.5)}, Spread: der(0)},
		},
		{
			// The deprecated offload counter (vllm #35669) alone tells that
			// the server offloads KV to the CPU, and its GPU_to_CPU bytes
			// are the host tier's stores.
			name: "deprecated offload counter",
			body: "vllm:num_requests_running{" + e0 + "} 1\nvllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="GPU_to_CPU"} 1024` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1, Signals: kv.Signals{Running: dir(1)},
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, StoreBytes: dir(1024), Note: vlOffloadNote}}},
		},
		{
			// Before vllm #35669, two engines: CPU_to_GPU is a load,
			// GPU_to_CPU a store, summed over engines; a pair of other
			// mediums is no traffic of the CPU tier.
			name: "deprecated offload counter by transfer_type",
			body: "vllm:num_requests_running{" + e0 + "} 1\n" +
				"vllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="CPU_to_GPU"} 4096` + "\n" +
				"vllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="GPU_to_CPU"} 8192` + "\n" +
				`vllm:kv_offload_total_bytes_total{engine="1",model_name="m",transfer_type="CPU_to_GPU"} 1000` + "\n" +
				`vllm:kv_offload_total_bytes_total{engine="1",model_name="m",transfer_type="GPU_to_CPU"} 2000` + "\n" +
				"vllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="DISK_to_GPU"} 7` + "\n",
			// loads 4,096 + 1,000; stores 8,192 + 2,000.
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1, Signals: kv.Signals{Running: dir(1)},
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens,
					LoadBytes: dir(5096), StoreBytes: dir(10192), Note: vlOffloadNote}}},
		},
		{
			// The connector after #35669 writes the deprecated counter
			// beside the new ones with the same increments: only the new
			// ones are read, never both added.
			name: "new and deprecated offload counters",
			body: "vllm:num_requests_running{" + e0 + "} 1\n" +
				"vllm:kv_offload_load_bytes_total{" + e0 + "} 4096\nvllm:kv_offload_store_bytes_total{" + e0 + "} 8192\n" +
				"vllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="CPU_to_GPU"} 4096` + "\n" +
				"vllm:kv_offload_total_bytes_total{" + e0 + `,transfer_type="GPU_to_CPU"} 8192` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1, Signals: kv.Signals{Running: dir(1)},
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens,
					LoadBytes: dir(4096), StoreBytes: dir(8192), Note: vlOffloadNote}}},
		},
		{
			// prompt_tokens_by_source without prefix_cache_* (a filtered
			// scrape), no offloading: hits are local_cache_hit, queries
			// every source (70 + 25 + 5); the external 5 (a connector's)
			// are no hit of this server's cache, and prompt_tokens_cached
			// (25 + 5) is never added.
			name: "prefix hits from prompt tokens by source",
			body: "vllm:num_requests_running{" + e0 + "} 1\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="local_compute"} 70` + "\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="local_cache_hit"} 25` + "\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="external_kv_transfer"} 5` + "\n" +
				"vllm:prompt_tokens_cached_total{" + e0 + "} 30\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Running: dir(1), Counters: kv.Counters{PrefixHitTokens: dir(25), PrefixQueryTokens: der(100)}}},
		},
		{
			// With prefix_cache_* on the page, local_cache_hit is the same
			// tokens as prefix_cache_hits: never added; with native
			// offloading the external 5 are the host tier's hits, added to
			// the device's 20 (derived).
			name: "prefix hits with native offloading",
			body: "vllm:num_requests_running{" + e0 + "} 1\n" +
				"vllm:prefix_cache_hits_total{" + e0 + "} 20\nvllm:prefix_cache_queries_total{" + e0 + "} 100\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="local_compute"} 75` + "\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="local_cache_hit"} 20` + "\n" +
				"vllm:prompt_tokens_by_source_total{" + e0 + `,source="external_kv_transfer"} 5` + "\n" +
				`vllm:cache_config_info{block_size="16",engine="0",kv_offloading_backend="native"} 1` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Model: "m", Ranks: 1,
				Signals: kv.Signals{Running: dir(1), Counters: kv.Counters{PrefixHitTokens: der(25), PrefixQueryTokens: dir(100)}},
				Pools:   []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: dir(5), Note: vlOffloadNote}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, summarize(s), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}
