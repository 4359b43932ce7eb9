package config

// Capacity-planning settings. A target's max_running_requests is the
// engine's running-request limit (vLLM --max-num-seqs, TGI
// --max-concurrent-requests, TensorRT-LLM max_batch_size...) for engines
// that do not put it on their metrics page; it wins over the engine's own
// value where both exist. kvwatch uses it for the "batch" limiting factor
// and the saturation ratio (docs/planning.md).

// validatePlanning checks the planning keys of every target. Left out,
// max_running_requests is 0 (the engine's own); written, 0 is no limit at
// all and an error, like a negative one.
func (c *Config) validatePlanning(v *validator) {
	for i, t := range c.Targets {
		p := []any{"targets", i, "max_running_requests"}
		if t.MaxRunningRequests < 0 || (t.MaxRunningRequests == 0 && nodeAt(v.root, p) != nil) {
			v.addf(p,
				"%d must be a positive number of requests (or leave it out to use the engine's)", t.MaxRunningRequests)
		}
	}
}
