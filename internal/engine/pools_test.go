package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TestSGLangPools: hybrid-model pools and HiCache tiers, written from
// SGLang's collector (python/sglang/srt/metrics/collector.py), and the
// primary pool's usage never taken from the max over pools.
func TestSGLangPools(t *testing.T) {
	const r0, r1 = `{dp_rank="0",tp_rank="0"}`, `{dp_rank="1",tp_rank="0"}`
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "dense model: SWA and Mamba gauges at 0 make no pool; token_usage is the full pool's",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.4\nsglang:swa_token_usage 0\nsglang:mamba_usage 0\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.4), Running: dir(1)}, Spread: der(0)},
		},
		{
			name: "hybrid: token_usage is the max over pools and equals SWA's: the full pool's usage is unknown",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.9\nsglang:swa_token_usage 0.9\nsglang:mamba_usage 0.3\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(1)},
				Pools: []kv.CachePool{
					{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.9)},
					{Type: kv.PoolMamba, Tier: kv.TierGPU, Unit: kv.UnitSlots, UsageRatio: dir(0.3)},
				},
				// and the server says why, not a bare unknown.
				Unavailable: []string{kv.UnknownVersion}},
		},
		{
			name: "hybrid: token_usage above both other pools is the full pool's",
			body: "sglang:num_running_reqs 1\nsglang:token_usage 0.7\nsglang:swa_token_usage 0.5\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{UsageRatio: dir(0.7), Running: dir(1)}, Spread: der(0),
				Pools: []kv.CachePool{{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.5)}}},
		},
		{
			name: "hybrid with token gauges: the primary from kv_used_tokens, untouched by the pools",
			body: "sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 100\nsglang:token_usage 0.8\nsglang:swa_token_usage 0.8\n",
			want: summary{Engine: "sglang", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: dir(1000), Used: dir(100), UsageRatio: der(0.1)}, Spread: der(0),
				Pools: []kv.CachePool{{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.8)}}},
		},
		{
			name: "no HiCache: SGLang's zero host_hit and storage_hit modes make no pool",
			body: "sglang:num_running_reqs 0\n" + `sglang:prefill_effective_tokens_total{mode="device_hit"} 5` + "\n" +
				`sglang:prefill_effective_tokens_total{mode="host_hit"} 0` + "\n" + `sglang:prefill_effective_tokens_total{mode="storage_hit"} 0` + "\n" +
				`sglang:prefill_effective_tokens_total{mode="input"} 15` + "\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 1,
				Signals: kv.Signals{Running: dir(0), Counters: kv.Counters{PrefixHitTokens: dir(5), PrefixQueryTokens: dir(20)}}},
		},
		{
			name: "HiCache on two DP ranks: host pools summed, hits by tier",
			body: "sglang:num_running_reqs" + r0 + " 1\nsglang:num_running_reqs" + r1 + " 2\n" +
				"sglang:hicache_host_total_tokens" + r0 + " 4000\nsglang:hicache_host_total_tokens" + r1 + " 4000\n" +
				"sglang:hicache_host_used_tokens" + r0 + " 1000\nsglang:hicache_host_used_tokens" + r1 + " 3000\n" +
				`sglang:cached_tokens_total{cache_source="device"} 700` + "\n" +
				`sglang:cached_tokens_total{cache_source="host"} 200` + "\n" +
				`sglang:cached_tokens_total{cache_source="storage"} 100` + "\n" +
				"sglang:prompt_tokens_total 2000\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(3),
					// Every source: 700 + 200 + 100.
					Counters: kv.Counters{PrefixHitTokens: dir(1000), PrefixQueryTokens: dir(2000), PromptTokens: dir(2000)}},
				Pools: []kv.CachePool{
					// 4,000 + 4,000; 1,000 + 3,000; 4,000 / 8,000.
					{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(8000), Used: dir(4000), UsageRatio: der(0.5), HitTokens: dir(200)},
					{Type: kv.PoolFull, Tier: kv.TierRemote, Unit: kv.UnitTokens, HitTokens: dir(100)},
				}},
		},
		{
			name: "HiCache on two DP ranks, one without its used gauge: the host's used is unknown, not one rank's",
			body: "sglang:num_running_reqs" + r0 + " 1\nsglang:num_running_reqs" + r1 + " 2\n" +
				"sglang:hicache_host_total_tokens" + r0 + " 4000\nsglang:hicache_host_total_tokens" + r1 + " 4000\n" +
				"sglang:hicache_host_used_tokens" + r0 + " 1000\n",
			want: summary{Engine: "sglang", Generation: "legacy", Ranks: 2,
				Signals: kv.Signals{Running: dir(3)},
				Pools:   []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(8000)}}},
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

// TestTierPools: vLLM offload, LMCache (multi-process server) and Dynamo
// KVBM, each on a page written from its source, and the older pages of the
// same engines (without those families) giving no pool.
func TestTierPools(t *testing.T) {
	const cc = `vllm:cache_config_info{block_size="16",engine="0",kv_offloading_backend="%s",kv_offloading_size="%s",num_gpu_blocks="1000"} 1.0` + "\n"
	vl := "vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n"
	tests := []struct {
		name, body string
		want       summary
	}{
		{
			name: "vLLM V1 without offloading: no pool",
			body: vl + fmt.Sprintf(cc, "None", "None"),
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: der(16000), Used: der(8000), UsageRatio: dir(0.5)}, Spread: der(0)},
		},
		{
			name: "vLLM V1 native offloading: host pool without fill, hits from external_kv_transfer",
			body: vl + fmt.Sprintf(cc, "native", "8") +
				"vllm:kv_offload_cpu_cache_usage_perc{engine=\"0\"} 0.02\n" +
				`vllm:prompt_tokens_by_source_total{engine="0",source="local_compute"} 600` + "\n" +
				`vllm:prompt_tokens_by_source_total{engine="0",source="local_cache_hit"} 300` + "\n" +
				`vllm:prompt_tokens_by_source_total{engine="0",source="external_kv_transfer"} 100` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1,
				// No prefix_cache_* counters: hits are local_cache_hit 300
				// plus the host tier's 100, queries every source, 600 +
				// 300 + 100.
				Signals: kv.Signals{Capacity: der(16000), Used: der(8000), UsageRatio: dir(0.5),
					Counters: kv.Counters{PrefixHitTokens: der(400), PrefixQueryTokens: der(1000)}}, Spread: der(0),
				// The 0.02 pinned-block gauge is not the tier's fill.
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitTokens: dir(100), Note: vlOffloadNote}}},
		},
		{
			name: "vLLM V1 offloading to LMCache: external transfers are not the host tier's hits",
			body: vl + fmt.Sprintf(cc, "lmcache", "8") +
				`vllm:prompt_tokens_by_source_total{engine="0",source="external_kv_transfer"} 100` + "\n",
			want: summary{Engine: "vllm", Generation: "current", Ranks: 1,
				Signals: kv.Signals{Capacity: der(16000), Used: der(8000), UsageRatio: dir(0.5)}, Spread: der(0),
				Pools: []kv.CachePool{{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Note: vlOffloadNote}}},
		},
		{
			name: "LMCache server: L1 with capacity from bytes over ratio, one L2 adapter with the L2 hits",
			body: "lmcache_mp_l1_memory_usage_bytes 3e9\nlmcache_mp_l1_usage_ratio 0.75\n" +
				`lmcache_mp_l2_usage_bytes{l2_name="fs"} 5e10` + "\n" +
				`lmcache_mp_lookup_requested_tokens_total{cache_salt="",model_name="m"} 10000` + "\n" +
				`lmcache_mp_lookup_hit_tokens_total{cache_salt="",model_name="m"} 6000` + "\n" +
				`lmcache_mp_lookup_hit_l1_tokens_total{cache_salt="",model_name="m"} 4500` + "\n" +
				`lmcache_mp_lookup_hit_l2_tokens_total{cache_salt="",model_name="m"} 1500` + "\n",
			want: summary{Engine: "lmcache", Generation: "mp", Role: kv.RoleCache, Model: "m",
				Signals: kv.Signals{Counters: kv.Counters{PrefixHitTokens: dir(6000), PrefixQueryTokens: dir(10000)}},
				Pools: []kv.CachePool{
					// 3e9 / 0.75 = 4e9 bytes.
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL1, Unit: kv.UnitBytes, Capacity: der(4e9), Used: dir(3e9), UsageRatio: dir(0.75), HitTokens: dir(4500)},
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: dir(5e10), HitTokens: dir(1500)},
				}},
		},
		{
			name: "LMCache server with two L2 adapters: the L2 hits belong to neither",
			body: `lmcache_mp_l2_usage_bytes{l2_name="fs"} 10` + "\n" + `lmcache_mp_l2_usage_bytes{l2_name="mooncake_store"} 20` + "\n" +
				"lmcache_mp_lookup_hit_l2_tokens_total 7\n",
			want: summary{Engine: "lmcache", Generation: "mp", Role: kv.RoleCache,
				Pools: []kv.CachePool{
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: dir(10)},
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "mooncake_store", Unit: kv.UnitBytes, Used: dir(20)},
					{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Unit: kv.UnitBytes, HitTokens: dir(7)},
				}},
		},
		{
			name: "Dynamo KVBM page: windowed hit rates of host and disk",
			body: "kvbm_host_cache_hit_rate 0.75\nkvbm_disk_cache_hit_rate 0.18\n",
			want: summary{Engine: "dynamo", Generation: "current", Role: kv.RoleCache,
				Pools: []kv.CachePool{
					{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, HitRate: dir(0.75)},
					{Type: kv.PoolFull, Tier: kv.TierDisk, Unit: kv.UnitTokens, HitRate: dir(0.18)},
				}},
		},
		{
			name: "Dynamo worker without KVBM: no pool",
			body: "dynamo_component_kvstats_gpu_cache_usage_percent{worker_id=\"w\"} 0.5\n",
			want: summary{Engine: "dynamo", Generation: "kvstats", Ranks: 1, Signals: kv.Signals{UsageRatio: dir(0.5)}, Spread: der(0)},
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

// TestImplausiblePools: a negative or overfull tier is warned about and its
// usage is not shown as a plausible percentage.
func TestImplausiblePools(t *testing.T) {
	tests := []struct {
		name, body string
		want       []kv.Warning
	}{
		{"used beyond capacity", "sglang:num_running_reqs 0\nsglang:hicache_host_total_tokens 1000\nsglang:hicache_host_used_tokens 5000\n",
			[]kv.Warning{{Reason: kv.WarnOverCapacity, Detail: "host full pool: used 5000 beyond capacity 1000"}}},
		{"negative used", "sglang:num_running_reqs 0\nsglang:hicache_host_total_tokens 1000\nsglang:hicache_host_used_tokens -50\n",
			[]kv.Warning{{Reason: kv.WarnNegative, Detail: "host full pool: used is -50"}}},
		{"ratio above 1", "trtllm_kv_cache_utilization 0.5\ntrtllm_kv_cache_host_utilization 3.5\n",
			[]kv.Warning{{Reason: kv.WarnOverCapacity, Detail: "host full pool: usage ratio 3.5 above 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeBody(t, tt.body, "", nil)
			if diff := cmp.Diff(tt.want, got.Warnings); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
			if len(got.CachePools) != 1 || got.CachePools[0].UsageRatio.OK() {
				t.Errorf("pools %+v, want one with its usage unavailable", got.CachePools)
			}
		})
	}
}

// TestSGLangPoolsManyRanks: a host tier over 40 DP ranks of 2 TP ranks
// each (more values than the pool collector searches without its index):
// TP duplicates collapse by max, DP ranks add up.
func TestSGLangPoolsManyRanks(t *testing.T) {
	var b strings.Builder
	b.WriteString("sglang:max_total_num_tokens 1000\n")
	wantTotal, wantUsed := 0.0, 0.0
	for dp := range 40 {
		for tp := range 2 {
			r := fmt.Sprintf(`{dp_rank="%d",tp_rank="%d"}`, dp, tp)
			used := float64(100*dp + tp) // the larger TP rank's counts
			fmt.Fprintf(&b, "sglang:hicache_host_total_tokens%s 5000\nsglang:hicache_host_used_tokens%s %g\n", r, r, used)
		}
		wantTotal += 5000
		wantUsed += float64(100*dp + 1)
	}
	got := normalizeBody(t, b.String(), "", nil)
	var host *kv.CachePool
	for i := range got.CachePools {
		if got.CachePools[i].Tier == kv.TierHost {
			host = &got.CachePools[i]
		}
	}
	if host == nil || host.Capacity != kv.Of(wantTotal) || host.Used != kv.Of(wantUsed) {
		t.Fatalf("host pool %+v, want capacity %g and used %g", host, wantTotal, wantUsed)
	}
}

// TestPoolsOutliveTheirPage: a server's pools are its own. They are built
// in the pool collector's scratch space, which the next page reuses; the
// pools of a server kept from an earlier page must not change when later
// pages are read, and the zero-hit tiers SGLang writes without HiCache
// are left out without a slice of their own.
func TestPoolsOutliveTheirPage(t *testing.T) {
	page := func(used int) string {
		var b strings.Builder
		for tp := range 2 {
			r := fmt.Sprintf(`{tp_rank="%d"}`, tp)
			fmt.Fprintf(&b, "sglang:max_total_num_tokens%s 1000\nsglang:kv_used_tokens%s 10\n", r, r)
			fmt.Fprintf(&b, "sglang:hicache_host_total_tokens%s 5000\nsglang:hicache_host_used_tokens%s %d\n", r, r, used)
			fmt.Fprintf(&b, "sglang:swa_token_usage%s 0.%d\n", r, used/100)
		}
		b.WriteString(`sglang:prefill_effective_tokens_total{mode="storage_hit",tp_rank="0"} 0` + "\n")
		return b.String()
	}
	first := normalizeBody(t, page(100), "", nil)
	for used := 200; used < 600; used += 100 {
		normalizeBody(t, page(used), "", nil)
	}
	want := []kv.CachePool{
		{Type: kv.PoolSWA, Tier: kv.TierGPU, Unit: kv.UnitTokens, UsageRatio: dir(0.1)},
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(5000), Used: dir(100), UsageRatio: der(0.02)},
	}
	if diff := cmp.Diff(want, first.CachePools, valueCmp); diff != "" {
		t.Errorf("first page's pools after later pages (-want +got):\n%s", diff)
	}
	if cap(first.CachePools) != len(want) {
		t.Errorf("pools slice has cap %d, want %d (its own, at its length)", cap(first.CachePools), len(want))
	}
}

// TestCheckPlausiblePoolsAllocatesNothing: a pool's name in a warning is
// written only for a warning.
func TestCheckPlausiblePoolsAllocatesNothing(t *testing.T) {
	srv := kv.Server{CachePools: []kv.CachePool{
		{Type: kv.PoolFull, Tier: kv.TierHost, Unit: kv.UnitTokens, Capacity: dir(5000), Used: dir(100), UsageRatio: der(0.02)},
		{Type: kv.PoolFull, Tier: kv.TierLMCacheL2, Name: "fs", Unit: kv.UnitBytes, Used: dir(7)},
	}}
	if n := testing.AllocsPerRun(100, func() { checkPools(&srv) }); n != 0 {
		t.Errorf("checkPools allocates %v times per call, want 0", n)
	}
	if len(srv.Warnings) != 0 {
		t.Errorf("warnings %+v, want none", srv.Warnings)
	}
}
