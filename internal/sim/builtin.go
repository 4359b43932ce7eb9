package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// builtins are the scenarios kvwatch simulate knows by name, every one of
// them. Each is YAML so that it goes through the same parser, defaults and
// validation as a file.
var builtins = map[string]string{
	// The default: PD-disaggregated SGLang as kvwatch was made for it: a
	// model gateway in front of a prefill server (TP=4) and a decode server
	// (TP=4, one DP rank, 2,581,504 tokens).
	"pd-sglang": `
model_name: deepseek-ai/DeepSeek-V3
servers:
  - name: router
    engine: sglang-router
    workers: [prefill, decode]
    load: {rate: 6, burst_factor: 3, burst_every: 120s, burst_duration: 20s}
  - name: prefill
    engine: sglang
    role: prefill
    tp: 4
    capacity_tokens: 1048576
    context_length: 524288
  - name: decode
    engine: sglang
    role: decode
    tp: 4
    capacity_tokens: 2581504
    context_length: 524288
    max_running_requests: 1024
`,
	// The same with DP attention on decode: 2 DP ranks of TP=4 (1,290,752
	// tokens and 512 running requests each, 2,581,504 tokens in all), so
	// per-DP-rank views have data.
	"pd-sglang-dp": `
model_name: deepseek-ai/DeepSeek-V3
servers:
  - name: router
    engine: sglang-router
    workers: [prefill, decode]
    load: {rate: 6, burst_factor: 3, burst_every: 120s, burst_duration: 20s}
  - name: prefill
    engine: sglang
    role: prefill
    tp: 4
    capacity_tokens: 1048576
    context_length: 524288
  - name: decode
    engine: sglang
    role: decode
    dp: 2
    tp: 4
    capacity_tokens: 1290752
    context_length: 524288
    max_running_requests: 512
`,
	// vLLM V1 with data parallelism: one engine label per DP rank.
	"vllm-dp": `
servers:
  - name: vllm
    engine: vllm
    dp: 4
    tp: 2
    capacity_tokens: 262144
    load: {rate: 8, burst_factor: 2}
`,
	// One of every engine, each with its own load.
	"mixed": `
servers:
  - name: sglang
    engine: sglang
    tp: 2
    load: {rate: 2}
  - name: sglang-legacy
    engine: sglang-legacy
    load: {rate: 1}
  - name: sglang-underscore
    engine: sglang
    metric_prefix: sglang_
    tp: 2
    load: {rate: 1}
  - name: vllm
    engine: vllm
    dp: 2
    capacity_tokens: 131072
    load: {rate: 2}
  - name: vllm-v0
    engine: vllm-v0
    capacity_tokens: 131072
    load: {rate: 1}
  - name: llamacpp
    engine: llamacpp
    load: {rate: 0.5, output_mean: 150, output_max: 192}
  - name: tgi
    engine: tgi
    capacity_tokens: 160000
    load: {rate: 1}
  - name: triton
    engine: triton
    capacity_tokens: 399296
    load: {rate: 1}
  - name: router
    engine: sglang-router
    workers: [sglang, vllm]
    load: {rate: 2}
  - name: router-legacy
    engine: sglang-router-legacy
    workers: [sglang-legacy]
    load: {rate: 1}
`,
	// The older SGLang metric generation, PD with a legacy router.
	"sglang-legacy": `
servers:
  - name: router
    engine: sglang-router-legacy
    workers: [prefill, decode]
    load: {rate: 4}
  - name: prefill
    engine: sglang-legacy
    role: prefill
    tp: 2
  - name: decode
    engine: sglang-legacy
    role: decode
    tp: 2
    capacity_tokens: 800000
`,
	// The capacity-planning scenario (docs/planning.md, docs/simulator.md): a
	// pool of three unified SGLang servers whose loads do what planning must
	// see. fill ramps from a fifth of its rate to three times it over four
	// minutes and stays there: a steady fill that ends KV-limited. drain takes traffic for 2m30s,
	// then none: its KV drains as its requests finish. batch allows 8 running
	// requests per DP rank for long generations: its batch is full while its
	// KV (1,000,000 tokens) is mostly free, so requests queue — batch-limited.
	"planning": `
model_name: meta-llama/Llama-3.1-8B-Instruct
servers:
  - name: fill
    engine: sglang
    capacity_tokens: 200000
    context_length: 32768
    load:
      rate: 4
      schedule: [{at: 0s, factor: 0.2}, {at: 240s, factor: 3}]
  - name: drain
    engine: sglang
    capacity_tokens: 200000
    context_length: 32768
    load:
      rate: 3
      schedule: [{at: 150s, factor: 1}, {at: 151s, factor: 0}]
  - name: batch
    engine: sglang
    capacity_tokens: 1000000
    context_length: 32768
    max_running_requests: 8
    load: {rate: 1, output_mean: 1500, output_max: 2000, decode_rate: 20}
`,
	// The cache tiers and hybrid pools (tiers.go).
	//
	// SGLang with HiCache: a small device pool under shared prefixes, so
	// the radix cache evicts to the host and prompts are found there; the
	// host fills within minutes (partly full at 2m, full at 6m).
	"sglang-hicache": `
servers:
  - name: hicache
    engine: sglang
    dp: 2
    tp: 2
    capacity_tokens: 65536
    hicache_tokens: 2000000
    load: {rate: 6, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`,
	// A hybrid Mamba model on SGLang (Qwen3-Next-like): 12 state slots
	// per rank under a running limit of 64 and KV for far more, and more
	// load than the slots take: the state pool caps concurrency.
	"sglang-mamba": `
servers:
  - name: mamba
    engine: sglang
    tp: 2
    capacity_tokens: 262144
    max_running_requests: 64
    mamba_slots: 12
    load: {rate: 20, prompt_mean: 2000}
`,
	// A hybrid model on SGLang: sliding-window layers keep the last 6,144
	// tokens of each request in their own pool.
	"sglang-hybrid": `
servers:
  - name: hybrid
    engine: sglang
    tp: 2
    capacity_tokens: 262144
    swa_window: 6144
    load: {rate: 8, prompt_mean: 6000}
`,
	// vLLM V1 with native CPU offloading, the same pressure.
	"vllm-offload": `
servers:
  - name: offload
    engine: vllm
    dp: 2
    capacity_tokens: 65536
    cpu_offload_tokens: 2000000
    load: {rate: 6, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`,
	// vLLM V1 with an LMCache server (multi-process mode) under the same
	// pressure at a third of the rate (the queue stays short): L1 fills within two minutes and spills to L2.
	"vllm-lmcache": `
servers:
  - name: vllm
    engine: vllm
    capacity_tokens: 65536
    lmcache_l1_tokens: 800000
    lmcache_l2_tokens: 20000000
    load: {rate: 2, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
  - name: lmcache
    engine: lmcache
    workers: [vllm]
`,
	// trtllm-serve with a host cache below the GPU pool.
	"trtllm-serve": `
servers:
  - name: trtllm
    engine: trtllm-serve
    capacity_tokens: 65536
    cpu_offload_tokens: 1000000
    load: {rate: 2, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`,
	// A Dynamo worker's KVBM: host (G2) and disk (G3) tiers.
	"dynamo-kvbm": `
servers:
  - name: kvbm
    engine: dynamo-kvbm
    capacity_tokens: 65536
    cpu_offload_tokens: 300000
    disk_offload_tokens: 20000000
    load: {rate: 2, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`,
	// Dynamo: a frontend running the KV router in front of two vLLM
	// workers with two DP ranks each. The workers' own pages are in the
	// dialect since PR #5704 (total_blocks and gpu_cache_usage_percent per
	// dp_rank) or, with version before-5704, the kvstats gauges of DP rank
	// 0. At most 12 running requests per rank: 4 requests/s are served,
	// the 3× bursts of 10 s every minute (at the minute's end) wait in the
	// engines and drain.
	"dynamo": `
servers:
  - name: frontend
    engine: dynamo-frontend
    workers: [worker-0, worker-1]
    load: {rate: 4, burst_factor: 3}
  - name: worker-0
    engine: dynamo
    dp: 2
    capacity_tokens: 131072
    max_running_requests: 12
  - name: worker-1
    engine: dynamo
    dp: 2
    capacity_tokens: 131072
    max_running_requests: 12
`,
}

// BuiltinNames lists the built-in scenario names, sorted.
func BuiltinNames() []string { return slices.Sorted(maps.Keys(builtins)) }

// BuiltinScenario returns a built-in scenario by name (see BuiltinNames).
func BuiltinScenario(name string) (*Scenario, error) {
	src, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("unknown built-in scenario %q; want one of %s", name, strings.Join(BuiltinNames(), ", "))
	}
	return ParseScenario(name, []byte(src))
}
