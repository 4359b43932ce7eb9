package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// checkFinite fails on a known Value that is NaN or ±Inf, and on a known
// ratio outside what its inputs allow (negative or not finite).
func checkFinite(t *testing.T, who string, s *kv.Server) {
	t.Helper()
	check := func(where string, v kv.Value) {
		if v.OK() && (math.IsNaN(v.V) || math.IsInf(v.V, 0)) {
			t.Errorf("%s: %s = %v (%s), want a finite value or unavailable", who, where, v.V, v.Prov)
		}
		// Partial is Rollup's (a DP rank without the value, e.g. an asleep
		// vLLM engine); Implausible only Check's, after the adapter.
		if v.Prov > kv.Reserved && v.Prov != kv.Partial {
			t.Errorf("%s: %s has provenance %d", who, where, v.Prov)
		}
	}
	signals := func(prefix string, sg *kv.Signals) {
		for name, v := range map[string]kv.Value{
			"capacity": sg.Capacity, "used": sg.Used, "evictable": sg.Evictable, "usage": sg.UsageRatio,
			"reserved": sg.ReservedRatio, "running": sg.Running, "waiting": sg.Queued.Waiting,
			"prealloc": sg.Queued.Prealloc, "bootstrap": sg.Queued.Bootstrap, "transfer": sg.Queued.Transfer,
			"inflight": sg.Queued.Inflight, "hit": sg.Counters.PrefixHitTokens, "query": sg.Counters.PrefixQueryTokens,
			"preemptions": sg.Counters.Preemptions, "prompt": sg.Counters.PromptTokens, "generation": sg.Counters.GenerationTokens,
			"available": sg.Available(),
		} {
			check(prefix+name, v)
		}
	}
	signals("", &s.Signals)
	check("spread", s.Spread)
	check("context length", s.ContextLength)
	for i := range s.Ranks {
		signals(fmt.Sprintf("rank %d ", i), &s.Ranks[i].Signals)
	}
	for _, p := range s.CachePools {
		for name, v := range map[string]kv.Value{"capacity": p.Capacity, "used": p.Used, "usage": p.UsageRatio,
			"hit tokens": p.HitTokens, "hit rate": p.HitRate} {
			check(fmt.Sprintf("pool %s/%s/%s %s", p.Type, p.Tier, p.Name, name), v)
		}
	}
	for _, n := range []int{1, 4096, 524288} {
		h := s.Headroom(n)
		check(fmt.Sprintf("headroom(%d)", n), h)
		if h.OK() && h.V < 0 {
			t.Errorf("%s: headroom(%d) = %v, want ≥ 0", who, n, h.V)
		}
	}
	for _, p := range kv.PoolsOf([]kv.Member{{Key: kv.PoolKey{Role: kv.RoleUnified}, Server: s}}, []int{4096}) {
		check("pool usage", p.UsageRatio)
	}
}

// FuzzNormalize: for any body (and llama.cpp /slots and /props bodies),
// parse + detect + normalize never panics, and every adapter (not only the
// one detected) returns only finite known values.
//
//	go test ./internal/engine -run '^$' -fuzz FuzzNormalize -fuzztime 60s -fuzzminimizetime 3s
//
// (the large seeds make the default 60 s minimization of each new input
// dominate a short run).
func FuzzNormalize(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "fixtures", "*.prom"))
	slots, _ := os.ReadFile(filepath.Join("testdata", "fixtures", "llamacpp-real-load.slots.json"))
	props, _ := os.ReadFile(filepath.Join("testdata", "fixtures", "llamacpp-real-props.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(dropEllipses(string(b))), slots, props)
	}
	for _, body := range []string{tgiPage, lmdeployPage, dynamoWorkers + dynamoFrontend, sglangTPDP("sglang_"),
		"lmcache_mp_l1_memory_usage_bytes 3e9\nlmcache_mp_l1_usage_ratio 1e-320\n",
		`lmcache_mp_l1_memory_usage_bytes{l1_tag="a"} 1e308` + "\n" + `lmcache_mp_l1_memory_usage_bytes{l1_tag="b"} 1e308` + "\n" +
			`lmcache_mp_l1_usage_ratio{l1_tag="a"} 1e-300` + "\n" + `lmcache_mp_l1_usage_ratio{l1_tag="b"} 0.5` + "\n",
		`vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 1e308` + "\n" + `vllm:num_requests_waiting_by_reason{engine="0",reason="deferred"} 1e308` + "\n" +
			`vllm:cache_config_info{engine="0",kv_cache_size_tokens="1e300",kv_cache_max_concurrency="1e-300"} 1` + "\n",
		"trtllm_max_num_active_requests 1e308\ntrtllm_kv_cache_max_blocks 1e308\ntrtllm_kv_cache_tokens_per_block 1e308\n",
		"trtllm_kv_cache_tokens_per_block 1e300\ntrtllm_kv_cache_reused_blocks_total 1e300\ntrtllm_kv_cache_missed_blocks_total 1e308\n",
		"dynamo_frontend_model_kv_cache_block_size 1e300\ndynamo_frontend_model_total_kv_blocks 1e300\n" +
			`dynamo_frontend_worker_active_decode_blocks{worker_id="a",dp_rank="0"} 1e300` + "\n" +
			"dynamo_component_total_blocks 1e-320\ndynamo_component_kvstats_total_blocks 1e308\n",
		"sglang:hicache_host_total_tokens 0\nsglang:hicache_host_used_tokens 5\nsglang:swa_token_usage 0.3\n",
		"sglang:page_size{dp_rank=\"0\"} 1e308\nsglang:num_pages{dp_rank=\"0\"} 1e308\nsglang:kv_used_tokens{dp_rank=\"0\"} 5\nsglang:streaming_session_held_tokens{dp_rank=\"0\"} 1e308\n",
		`sglang:cache_config_info{page_size="1e300",num_pages="1e300"} 1` + "\n" + `sglang:num_prefill_prealloc_queue_reqs{engine_type="prefill"} 1` + "\n" +
			`sglang:num_prefill_bootstrap_queue_reqs{engine_type="prefill"} NaN` + "\n" + `sglang:num_running_reqs{engine_type="prefill"} 0` + "\n",
		`vllm:engine_sleep_state{engine="0",sleep_state="awake"} 0` + "\n" + `vllm:kv_cache_usage_perc{engine="0"} 0.5` + "\n" +
			`vllm:gpu_cache_usage_perc{engine="0"} 0.7` + "\n" + `vllm:cache_config_info{engine="1",num_gpu_blocks="1e308",block_size="1e308"} 1` + "\n"} {
		f.Add([]byte(body), []byte(nil), []byte(nil))
	}
	r := NewRegistry()
	f.Fuzz(func(t *testing.T, body, slots, props []byte) {
		p, err := expo.Parse(body, "", r.Want)
		if err != nil {
			return
		}
		in := Input{Page: p, Extra: map[string][]byte{PathSlots: slots, PathProps: props}}
		for _, a := range r.Adapters() {
			s, err := a.Normalize(in)
			if err != nil {
				continue
			}
			checkFinite(t, a.Name(), &s)
		}
	})
}

// FuzzConsistent writes each engine's page from consistent numbers (used ≤
// capacity, ratio = used / capacity) and checks that the normalized used
// never exceeds capacity and the ratio stays in [0, 1]. Engines can break
// this themselves (the Triton README sample's fraction 0.4875 beside used
// 1 of 6239 blocks; llama.cpp with a unified KV cache reports per-slot n_ctx
// as the whole context, which only overstates capacity); adapters must not
// add to it.
func FuzzConsistent(f *testing.F) {
	f.Add(uint32(2581504), uint32(310112), uint16(16), uint8(2))
	f.Add(uint32(0), uint32(0), uint16(0), uint8(0))
	f.Add(uint32(4096), uint32(4096), uint16(1), uint8(4))
	f.Add(uint32(1), uint32(7), uint16(64), uint8(255))
	f.Fuzz(func(t *testing.T, capacity, used uint32, block uint16, n uint8) {
		if used > capacity {
			used, capacity = capacity, used
		}
		c, u := float64(capacity), float64(used)
		ratio := 0.0
		if c > 0 {
			ratio = u / c
		}
		bs := float64(block%128) + 1
		blocks := math.Floor(c / bs)
		usedBlocks := math.Floor(u / bs)
		ranks := int(n%4) + 1
		var sg strings.Builder
		for dp := 0; dp < ranks; dp++ {
			fmt.Fprintf(&sg, "sglang:max_total_num_tokens{dp_rank=\"%d\"} %g\nsglang:kv_used_tokens{dp_rank=\"%d\"} %g\n", dp, c, dp, u)
		}
		slot := math.Floor(c / 4)
		pages := map[string]struct {
			body  string
			extra map[string][]byte
		}{
			"sglang": {body: sg.String()},
			"vllm": {body: fmt.Sprintf("vllm:cache_config_info{block_size=\"%g\",num_gpu_blocks=\"%g\"} 1\nvllm:kv_cache_usage_perc %v\n",
				bs, blocks, func() float64 {
					if blocks == 0 {
						return 0
					}
					return usedBlocks / blocks
				}())},
			"tgi": {body: fmt.Sprintf("tgi_batch_max_total_tokens %g\ntgi_batch_current_max_tokens %g\n", c, u)},
			"triton": {body: fmt.Sprintf("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"max\",model=\"m\",version=\"1\"} %g\n"+
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"used\",model=\"m\",version=\"1\"} %g\n"+
				"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"tokens_per\",model=\"m\",version=\"1\"} %g\n", blocks, usedBlocks, bs)},
			"trtllm-serve": {body: fmt.Sprintf("trtllm_kv_cache_utilization %v\ntrtllm_kv_cache_max_blocks %g\ntrtllm_kv_cache_tokens_per_block %g\n", ratio, blocks, bs)},
			"dynamo":       {body: fmt.Sprintf("dynamo_component_kvstats_total_blocks{worker_id=\"1\"} %g\ndynamo_component_kvstats_active_blocks{worker_id=\"1\"} %g\ndynamo_frontend_model_kv_cache_block_size %g\n", blocks, usedBlocks, bs)},
			"dynamo current": {body: fmt.Sprintf("dynamo_component_total_blocks{dp_rank=\"0\"} %g\ndynamo_component_gpu_cache_usage_percent{dp_rank=\"0\"} %v\ndynamo_frontend_model_kv_cache_block_size %g\n",
				blocks, func() float64 {
					if blocks == 0 {
						return 0
					}
					return usedBlocks / blocks
				}(), bs)},
			"dynamo frontend": {body: fmt.Sprintf("dynamo_frontend_model_total_kv_blocks %g\ndynamo_frontend_worker_active_decode_blocks{worker_id=\"w\",dp_rank=\"0\"} %g\ndynamo_frontend_model_kv_cache_block_size %g\n", blocks, usedBlocks, bs)},
			"llamacpp": {body: "llamacpp:requests_processing 1\n", extra: map[string][]byte{
				PathProps: fmt.Appendf(nil, `{"default_generation_settings":{"n_ctx":%g},"total_slots":4}`, slot),
				PathSlots: fmt.Appendf(nil, `[{"id":0,"n_ctx":%g,"id_task":1,"n_prompt_tokens":%g},{"id":1,"n_ctx":%g},{"id":2,"n_ctx":%g},{"id":3,"n_ctx":%g}]`,
					slot, math.Min(u, slot), slot, slot, slot),
			}},
		}
		for key, pg := range pages {
			engine := strings.Fields(key)[0] // "dynamo current": the dynamo adapter
			s := normalizeBody(t, pg.body, "", pg.extra)
			if s.Engine != engine {
				t.Fatalf("page for %s detected as %s", engine, s.Engine)
			}
			checkFinite(t, engine, &s)
			if s.Used.OK() && s.Capacity.OK() && s.Used.V > s.Capacity.V {
				t.Errorf("%s: used %v > capacity %v (from used %g of %g)", engine, s.Used.V, s.Capacity.V, u, c)
			}
			if r := s.UsageRatio; r.OK() && (r.V < 0 || r.V > 1) {
				t.Errorf("%s: usage ratio %v outside [0, 1]", engine, r.V)
			}
		}
	})
}
