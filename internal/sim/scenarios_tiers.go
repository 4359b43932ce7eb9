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

func init() {
	// vLLM V1 with an LMCache server (multi-process mode) under the same
	// pressure at a third of the rate (the queue stays short): L1 fills within two minutes and spills to L2.
	builtins["vllm-lmcache"] = `
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
`
	// trtllm-serve with a host cache below the GPU pool.
	builtins["trtllm-serve"] = `
servers:
  - name: trtllm
    engine: trtllm-serve
    capacity_tokens: 65536
    cpu_offload_tokens: 1000000
    load: {rate: 2, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`
	// A Dynamo worker's KVBM: host (G2) and disk (G3) tiers.
	builtins["dynamo-kvbm"] = `
servers:
  - name: kvbm
    engine: dynamo-kvbm
    capacity_tokens: 65536
    cpu_offload_tokens: 300000
    disk_offload_tokens: 20000000
    load: {rate: 2, prefix_groups: 64, prefix_tokens: 4096, prefix_share: 0.8, prompt_mean: 3000}
`
}

// validateTiers checks a server's tier keys; servers and names are the
// scenario's (an lmcache server's worker is one of them).
func validateTiers(path string, s ServerSpec, servers []ServerSpec, names map[string]int) []problem {
	var ps []problem
	add := func(key, format string, args ...any) {
		ps = append(ps, problem{path + "." + key, fmt.Sprintf(format, args...)})
	}
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
	case s.CPUOffloadTokens > 0 && s.Engine != EngineVLLM && s.Engine != EngineTRTLLMServe && s.Engine != EngineKVBM:
		ps = append(ps, problem{path + ".cpu_offload_tokens", fmt.Sprintf("KV offloading is simulated for engines %s, %s and %s only, got %s", EngineVLLM, EngineTRTLLMServe, EngineKVBM, s.Engine)})
	case s.CPUOffloadTokens > 0 && s.HiCacheTokens > 0:
		ps = append(ps, problem{path + ".cpu_offload_tokens", "a server has one host tier; set hicache_tokens or cpu_offload_tokens"})
	}
	for _, t := range []struct {
		key string
		v   int64
	}{{"cpu_offload_tokens", s.CPUOffloadTokens}, {"disk_offload_tokens", s.DiskOffloadTokens}, {"lmcache_l1_tokens", s.LMCacheL1Tokens}, {"lmcache_l2_tokens", s.LMCacheL2Tokens}} {
		if t.v > 0 && s.PageSize > 0 && t.v%s.PageSize != 0 {
			add(t.key, "must be a multiple of page_size %d, got %d", s.PageSize, t.v)
		}
	}
	switch {
	case s.DiskOffloadTokens < 0:
		add("disk_offload_tokens", "must not be negative, got %d", s.DiskOffloadTokens)
	case s.DiskOffloadTokens > 0 && s.Engine != EngineKVBM:
		add("disk_offload_tokens", "a disk tier is simulated for engine %s only, got %s", EngineKVBM, s.Engine)
	case s.DiskOffloadTokens > 0 && s.CPUOffloadTokens <= 0:
		add("disk_offload_tokens", "the disk tier takes what the host tier drops; set cpu_offload_tokens too")
	}
	if s.Engine == EngineKVBM && s.CPUOffloadTokens <= 0 {
		add("cpu_offload_tokens", "a %s server needs its host tier (G2); set cpu_offload_tokens", EngineKVBM)
	}
	switch {
	case s.LMCacheL1Tokens < 0 || s.LMCacheL2Tokens < 0:
		add("lmcache_l1_tokens", "must not be negative, got %d and lmcache_l2_tokens %d", s.LMCacheL1Tokens, s.LMCacheL2Tokens)
	case (s.LMCacheL1Tokens > 0 || s.LMCacheL2Tokens > 0) && s.Engine != EngineVLLM:
		add("lmcache_l1_tokens", "LMCache is simulated next to engine %s only, got %s", EngineVLLM, s.Engine)
	case s.LMCacheL2Tokens > 0 && s.LMCacheL1Tokens <= 0:
		add("lmcache_l2_tokens", "L2 takes what L1 drops; set lmcache_l1_tokens too")
	case s.LMCacheL1Tokens > 0 && (s.CPUOffloadTokens > 0 || s.HiCacheTokens > 0):
		add("lmcache_l1_tokens", "a server has one host tier; set lmcache_l1_tokens or cpu_offload_tokens")
	case s.LMCacheL1Tokens > 0 && s.DP > 1:
		add("dp", "an LMCache server serves one vLLM engine in the simulator; use dp 1 with lmcache_l1_tokens")
	}
	if s.Engine == EngineLMCache {
		if s.Load.Rate != 0 {
			add("load.rate", "an lmcache server takes no requests of its own (its vLLM server does); remove the rate")
		}
		if len(s.Workers) != 1 {
			add("workers", "an lmcache server serves exactly one vLLM server; list its name, got %d names", len(s.Workers))
		} else if i, ok := names[s.Workers[0]]; !ok {
			add("workers[0]", "unknown server %q", s.Workers[0])
		} else if w := servers[i]; w.Engine != EngineVLLM || w.LMCacheL1Tokens <= 0 {
			add("workers[0]", "%q must be a vllm server with lmcache_l1_tokens set", s.Workers[0])
		}
	}
	return ps
}
