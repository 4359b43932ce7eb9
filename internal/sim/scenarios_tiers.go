package sim

import "fmt"

// The cache-tier scenarios, registered with the built-ins.
func init() {
	// SGLang with HiCache: a small device pool under shared prefixes, so
	// the radix cache evicts to the host and prompts are found there; the
	// host fills within minutes (partly full at 2m, full at 6m).
	builtins["sglang-hicache"] = `
servers:
  - name: hicache
    engine: sglang
    dp: 2
    tp: 2
    capacity_tokens: 65536
    hicache_tokens: 2000000
    load: {rate: 6, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`
}

func init() {
	// A hybrid model on SGLang: sliding-window layers keep the last 6,144
	// tokens of each request in their own pool.
	builtins["sglang-hybrid"] = `
servers:
  - name: hybrid
    engine: sglang
    tp: 2
    capacity_tokens: 262144
    swa_window: 6144
    load: {rate: 8, prompt_mean: 6000}
`
	// vLLM V1 with native CPU offloading, the same pressure.
	builtins["vllm-offload"] = `
servers:
  - name: offload
    engine: vllm
    dp: 2
    capacity_tokens: 65536
    cpu_offload_tokens: 2000000
    load: {rate: 6, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`
}

// validateTiers checks a server's tier keys.
func validateTiers(path string, s ServerSpec) []problem {
	var ps []problem
	switch {
	case s.HiCacheTokens < 0:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("must not be negative, got %d", s.HiCacheTokens)})
	case s.HiCacheTokens > 0 && s.Engine != EngineSGLang:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("HiCache is simulated for engine %s only, got %s", EngineSGLang, s.Engine)})
	}
	switch {
	case s.SWAWindow < 0:
		ps = append(ps, problem{path + ".swa_window", fmt.Sprintf("must not be negative, got %d", s.SWAWindow)})
	case s.SWAWindow > 0 && s.Engine != EngineSGLang:
		ps = append(ps, problem{path + ".swa_window", fmt.Sprintf("hybrid models are simulated for engine %s only, got %s", EngineSGLang, s.Engine)})
	}
	switch {
	case s.CPUOffloadTokens < 0:
		ps = append(ps, problem{path + ".cpu_offload_tokens", fmt.Sprintf("must not be negative, got %d", s.CPUOffloadTokens)})
	case s.CPUOffloadTokens > 0 && s.Engine != EngineVLLM:
		ps = append(ps, problem{path + ".cpu_offload_tokens", fmt.Sprintf("KV offloading is simulated for engine %s only, got %s", EngineVLLM, s.Engine)})
	case s.CPUOffloadTokens > 0 && s.HiCacheTokens > 0:
		ps = append(ps, problem{path + ".cpu_offload_tokens", "a server has one host tier; set hicache_tokens or cpu_offload_tokens"})
	}
	return ps
}
