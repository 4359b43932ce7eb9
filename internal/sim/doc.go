// Package sim simulates LLM inference engines for demos, end-to-end tests and
// scale benchmarks: each simulated server listens on loopback and serves a
// /metrics page (and, for llama.cpp, /slots and /props) in the names, types,
// HELP texts and label sets of the real engine, with values driven by a
// deterministic load model of a KV cache (arrivals, prefix cache, admission,
// queueing, retraction, PD hand-off).
//
// The exposition is written by this package's own code from the engines'
// sources (see ../shared/reference/engine-metrics.md), not by kvwatch's
// adapters in reverse, so the two can catch each other's mistakes. Truth
// returns the ground truth that a page shows. The package imports no other
// kvwatch package and does not model GPU compute or latency beyond simple
// rates.
package sim
