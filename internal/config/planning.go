package config

// Capacity-planning settings. A target's max_running_requests is the
// engine's running-request limit (vLLM --max-num-seqs, TGI
// --max-concurrent-requests, TensorRT-LLM max_batch_size...) for engines
// that do not put it on their metrics page; it wins over the engine's own
// value where both exist. kvwatch uses it for the "batch" limiting factor
// and the saturation ratio (docs/planning.md).

// validatePlanning checks the planning keys of every target.
func (c *Config) validatePlanning(v *validator) {
	for i, t := range c.Targets {
		if t.MaxRunningRequests < 0 {
			v.addf([]any{"targets", i, "max_running_requests"},
				"%d must be a positive number of requests (or leave it out to use the engine's)", t.MaxRunningRequests)
		}
	}
}
