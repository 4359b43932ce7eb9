package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// builtins are the scenarios kvwatch simulate knows by name. Each is YAML so
// that it goes through the same parser, defaults and validation as a file.
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
