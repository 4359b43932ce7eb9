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

// validateTiers checks a server's tier keys.
func validateTiers(path string, s ServerSpec) []problem {
	var ps []problem
	switch {
	case s.HiCacheTokens < 0:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("must not be negative, got %d", s.HiCacheTokens)})
	case s.HiCacheTokens > 0 && s.Engine != EngineSGLang:
		ps = append(ps, problem{path + ".hicache_tokens", fmt.Sprintf("HiCache is simulated for engine %s only, got %s", EngineSGLang, s.Engine)})
	}
	return ps
}
