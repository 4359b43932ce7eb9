package sim

// The capacity-planning scenario (docs/planning.md, docs/simulator.md): a
// pool of three unified SGLang servers whose loads do what planning must
// see. fill ramps from a fifth of its rate to three times it over four
// minutes and stays there: a steady fill that ends KV-limited. drain takes traffic for 2m30s,
// then none: its KV drains as its requests finish. batch allows 8 running
// requests per DP rank for long generations: its batch is full while its
// KV (1,000,000 tokens) is mostly free, so requests queue — batch-limited.
func init() {
	builtins["planning"] = `
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
`
}
