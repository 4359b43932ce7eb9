package sim

import "strconv"

// EngineDynamo is a Dynamo worker running vLLM: the page of its system
// server (DYN_SYSTEM_PORT), Dynamo's own dynamo_component_* families.
const EngineDynamo = "dynamo"

// VersionDynamoBefore is the Dynamo worker before ai-dynamo/dynamo PR #5704:
// the runtime's dynamo_component_kvstats_* gauges, one unlabelled series of
// the process's own DP rank; VersionCurrent has
// dynamo_component_total_blocks and dynamo_component_gpu_cache_usage_percent
// per dp_rank.
const VersionDynamoBefore = "before-5704"

// dynamoEngine is a Dynamo vLLM worker: DP ranks, blocks of 16 tokens. Its
// page holds Dynamo's own families only: the vllm:* families Dynamo passes
// through are the vllm engine's page (vllm.go), and a page with both is
// read as vLLM, so a worker page with them would not exercise Dynamo's.
var dynamoEngine = engine{name: EngineDynamo, render: renderDynamo, dp: true, defaults: serverDefaults{pageSize: 16},
	versions: []string{VersionCurrent, VersionDynamoBefore}, truth: dynamoTruth}

// DynamoTruth is what a Dynamo worker's page shows besides the load model's
// KV: whether each DP rank has published its KV gauges, the blocks it
// reports and the requests in the worker's handler.
type DynamoTruth struct {
	// Published is per DP rank: true once the rank's engine has recorded
	// stats since the worker (re)started. Until then its gauges hold the
	// values of init_publish: total blocks 0 and usage 0.0, which mean
	// "not published", not "empty".
	Published []bool
	// TotalBlocks is the page's total_blocks of a published rank: vLLM's
	// num_gpu_blocks of one engine, the null block included
	// (CapacityTokens/PageSize + 1).
	TotalBlocks int64
	// Inflight is dynamo_component_inflight_requests of the generate
	// endpoint: every request in the worker, running or waiting in the
	// engine (Running + Queued); Requests is requests_total of the
	// generate endpoint: the requests the handler took since (re)start.
	Inflight int
	Requests int64
}

// dynamoTruth fills t.Dynamo (dynamoEngine.truth).
func dynamoTruth(s *server, t *Truth) {
	d := &DynamoTruth{TotalBlocks: vllmBlocks(s.spec), Inflight: t.Running + t.Queued}
	d.Requests = t.Counters.RequestsFinished + int64(d.Inflight)
	for _, k := range s.ranks {
		// vLLM calls its stat loggers with the scheduler's stats of a
		// step; an engine that has had no request has not stepped.
		d.Published = append(d.Published, k.c.prefixQueried > 0 || k.load() > 0)
	}
	t.Dynamo = d
}

// dynamoLoadSeconds is the model load time the page reports: the simulator
// loads no weights, so it is a fixed number of seconds.
const dynamoLoadSeconds = 41.7

// dynamoEndpoints are the endpoints a Dynamo vLLM worker serves, in the
// order the runtime's page sorts them (docs/observability/metrics_examples/
// vllm.log @a7b23c000e38).
var dynamoEndpoints = []string{"clear_kv_blocks", "generate", "list_loras", "load_lora", "unload_lora"}

// renderDynamo writes a Dynamo vLLM worker's page (ai-dynamo/dynamo; see
// docs/engines.md, NVIDIA Dynamo). First the runtime's registry, written by
// the Rust prometheus crate: families sorted by name, labels sorted, Rust
// numbers; the work handler's gauges and counters per endpoint with labels
// dynamo_component, dynamo_endpoint, dynamo_namespace and model
// (lib/runtime/src/metrics/prometheus_names.rs, work_handler). Before PR
// #5704 the runtime's WorkerMetricsPublisher also registered the kvstats
// gauges (lib/llm/src/kv_router/publisher.rs, KvStatsPrometheusGauges:
// component labels only, no dp_rank), set by the vLLM publisher of the
// worker's own data_parallel_rank (components/.../vllm/publisher.py: the
// StatLoggerFactory returns a NullStatLogger for every other rank), so the
// page shows DP rank 0's KV only: kv_active_blocks =
// int(num_gpu_blocks × kv_cache_usage), kv_total_blocks = num_gpu_blocks,
// the usage, and the prefix hit rate of the last recorded step (the
// simulator's last prefill batch stands in for it). Since PR #5704 the
// worker appends its own prometheus_client registry
// (components/src/dynamo/common/utils/prometheus.py, LLMBackendMetrics):
// total_blocks and gpu_cache_usage_percent (0.0-1.0) per dp_rank, labels
// model, dynamo_component, dp_rank in declaration order, Python floats, and
// model_load_time_seconds. A rank that has not recorded stats yet shows
// init_publish's 0 blocks and 0.0 usage. The byte counters and the
// request-duration histogram of the work handler are not simulated.
func renderDynamo(p *snapshot) []byte {
	spec := p.srv.spec
	g, live := p.gauges(), &p.truth
	d, ld := g.Dynamo, live.Dynamo
	before := live.Version == VersionDynamoBefore
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	handler := func(endpoint string) string {
		return labels(true, "dynamo_component", "backend", "dynamo_endpoint", endpoint, "dynamo_namespace", "dynamo", "model", spec.ModelName)
	}
	w.family("dynamo_component_inflight_requests", "Number of requests currently being processed by work handler", "gauge")
	for _, e := range dynamoEndpoints {
		n := 0
		if e == "generate" {
			n = d.Inflight
		}
		w.sample("dynamo_component_inflight_requests", handler(e), float64(n))
	}
	if before {
		// DP rank 0, the worker's own data_parallel_rank.
		r := &g.Ranks[0]
		var active, total, usage, hit float64
		if d.Published[0] {
			usage = float64(r.UsedTokens) / float64(r.CapacityTokens)
			total = float64(d.TotalBlocks)
			active = float64(int64(total * usage))
			hit = r.LastBatchHitRate
		}
		comp := labels(true, "dynamo_component", "backend", "dynamo_namespace", "dynamo")
		for _, f := range []struct {
			name, help string
			v          float64
		}{
			{"dynamo_component_kvstats_active_blocks", "Number of active KV cache blocks currently in use", active},
			{"dynamo_component_kvstats_gpu_cache_usage_percent", "GPU cache usage as a percentage (0.0-1.0)", usage},
			{"dynamo_component_kvstats_gpu_prefix_cache_hit_rate", "GPU prefix cache hit rate as a percentage (0.0-1.0)", hit},
			{"dynamo_component_kvstats_total_blocks", "Total number of KV cache blocks available", total},
		} {
			w.family(f.name, f.help, "gauge")
			w.sample(f.name, comp, f.v)
		}
	}
	w.family("dynamo_component_requests_total", "Total number of requests processed by work handler", "counter")
	for _, e := range dynamoEndpoints {
		var n int64
		if e == "generate" {
			n = ld.Requests
		}
		w.sample("dynamo_component_requests_total", handler(e), float64(n))
	}
	w.family("dynamo_component_uptime_seconds", "Total uptime of the DistributedRuntime in seconds", "gauge")
	w.sample("dynamo_component_uptime_seconds", "", p.wall.Sub(p.created).Seconds())
	if before {
		return w.b
	}
	// The worker's prometheus_client registry, through the runtime's
	// expfmt callback.
	w.style = pyNum
	rank := func(dp int) string {
		return labels(false, "model", spec.ModelName, "dynamo_component", "backend", "dp_rank", strconv.Itoa(dp))
	}
	w.family("dynamo_component_total_blocks", "Total number of KV cache blocks available on the worker.", "gauge")
	for i, r := range g.Ranks {
		var total float64
		if d.Published[i] {
			total = float64(d.TotalBlocks)
		}
		w.sample("dynamo_component_total_blocks", rank(r.DPRank), total)
	}
	w.family("dynamo_component_gpu_cache_usage_percent", "GPU cache usage as a percentage (0.0-1.0).", "gauge")
	for i, r := range g.Ranks {
		var usage float64
		if d.Published[i] {
			usage = float64(r.UsedTokens) / float64(r.CapacityTokens)
		}
		w.sample("dynamo_component_gpu_cache_usage_percent", rank(r.DPRank), usage)
	}
	w.family("dynamo_component_model_load_time_seconds", "Model load time in seconds.", "gauge")
	w.sample("dynamo_component_model_load_time_seconds", labels(false, "model", spec.ModelName, "dynamo_component", "backend"), dynamoLoadSeconds)
	return w.b
}
