package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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

// EngineDynamoFrontend is Dynamo's HTTP frontend running the KV router in
// front of Dynamo workers (dynamo_frontend_*).
const EngineDynamoFrontend = "dynamo-frontend"

// dynamoFrontendEngine is the Dynamo frontend: a router over the dynamo
// servers it lists in workers, no KV of its own.
var dynamoFrontendEngine = engine{name: EngineDynamoFrontend, render: renderDynamoFrontend, role: RoleRouter,
	validate: func(s ServerSpec, servers []ServerSpec, names map[string]int, add func(key, format string, args ...any)) {
		for j, w := range s.Workers {
			if i, ok := names[w]; ok && servers[i].Engine != EngineDynamo {
				add(fmt.Sprintf("workers[%d]", j), "%q is a %s server; a Dynamo frontend routes to Dynamo workers (engine %s)", w, servers[i].Engine, EngineDynamo)
			}
		}
	},
	truth: dynamoFrontendTruth}

// DynamoFrontendTruth is what a Dynamo frontend's page shows: its HTTP
// requests, the model card of its workers and the KV router's load per
// worker and DP rank.
type DynamoFrontendTruth struct {
	// Inflight are the requests the frontend routed that have not
	// finished; Queued, of those, the ones without a first token yet (the
	// HTTP queue, a part of Inflight); Requests the finished ones.
	Inflight, Queued int
	Requests         int64
	// The model card: a worker's total blocks (vLLM's num_gpu_blocks: one
	// worker's, the null block included), the block size in tokens, the
	// context length and the running-request limit per DP rank.
	TotalBlocks, BlockSize, ContextLength int64
	MaxNumSeqs                            int
	// Workers is the KV router's view, per worker and DP rank in the
	// order of workers.
	Workers []DynamoWorkerLoad
}

// DynamoWorkerLoad is the KV router's prediction for one DP rank of one
// worker, from the requests this frontend routed there and that have not
// finished (waiting in the engine or running). With the router's defaults
// (router_track_output_blocks false, router_assume_kv_reuse true) it
// counts each request's prompt blocks, a shared prefix's full blocks once,
// and no decode growth: not the engine's used KV.
type DynamoWorkerLoad struct {
	Worker   string // the worker's name in the scenario
	WorkerID string // its worker_id label
	DPRank   int
	// DecodeBlocks is worker_active_decode_blocks; PrefillTokens is
	// worker_active_prefill_tokens: the prompt tokens of the requests
	// without a first token, less their device cache hits (none predicted
	// before the engine admits a request).
	DecodeBlocks, PrefillTokens int64
}

// dynamoWorkerIDBase is the first simulated worker_id (Dynamo's are etcd
// lease ids); a worker's is the base plus its index in the scenario.
const dynamoWorkerIDBase = 7587890012398311424

// dynamoFrontendTruth fills t.DynamoFrontend (dynamoFrontendEngine.truth).
func dynamoFrontendTruth(s *server, t *Truth) {
	d := &DynamoFrontendTruth{}
	for i, w := range s.workers {
		d.Requests += s.processed[i]
		if i == len(s.workers)-1 { // the model card: the last writer wins
			d.TotalBlocks, d.BlockSize, d.ContextLength, d.MaxNumSeqs = vllmBlocks(w.spec), w.spec.PageSize, w.spec.ContextLength, w.spec.MaxRunningRequests
		}
		for _, k := range w.ranks {
			l := DynamoWorkerLoad{Worker: w.spec.Name, WorkerID: strconv.FormatUint(dynamoWorkerIDBase+uint64(w.idx), 10), DPRank: k.dp}
			shared := w.spec.Load.PrefixTokens / k.page * k.page // a shared prefix's full blocks
			if !w.cacheOn {
				shared = 0
			}
			groups := map[int]bool{}
			for _, q := range [][]*request{k.waiting, k.running} {
				for _, r := range q {
					if r.router != s {
						continue
					}
					d.Inflight++
					own := r.prompt
					if r.group >= 0 && shared > 0 {
						own -= shared
						if !groups[r.group] {
							groups[r.group] = true
							l.DecodeBlocks += shared / k.page
						}
					}
					l.DecodeBlocks += (own + k.page - 1) / k.page
					if r.generated == 0 {
						d.Queued++
						l.PrefillTokens += r.prompt - r.hit
					}
				}
			}
			d.Workers = append(d.Workers, l)
		}
	}
	t.DynamoFrontend = d
}

// renderDynamoFrontend writes the Dynamo frontend's page (ai-dynamo/dynamo;
// docs/engines.md, NVIDIA Dynamo): the Rust prometheus crate, families
// sorted by name, labels sorted, integers. The HTTP service's gauges and
// counters carry the request's model name in lower case and the model
// card's gauges the card's name, as on docs/observability/metrics_examples/
// fe.log; the KV router's per-worker gauges (lib/llm/src/kv_router/
// metrics.rs @c7810b035df4, WORKER_LOAD_METRICS and its PEF test: labels
// worker_id, dp_rank, worker_type, "decode" for an aggregated worker) and
// its queue gauges (a later revision of that file: label worker_type; the
// newest adds model and policy_class, not simulated), which stay 0: the
// simulated router sends every request on at once (to the least-loaded
// worker, a stand-in for the KV router's cost function). Not simulated:
// the latency and sequence-length histograms, output_tokens_total,
// model_max_num_batched_tokens and the router's overhead histograms.
func renderDynamoFrontend(p *snapshot) []byte {
	spec := p.srv.spec
	d, ld := p.gauges().DynamoFrontend, p.truth.DynamoFrontend
	w := &page{style: rustNum, b: make([]byte, 0, 4<<10)}
	req := labels(true, "model", strings.ToLower(spec.ModelName))
	card := labels(true, "model", spec.ModelName)
	one := func(name, help, typ, lbl string, v float64) {
		w.family(name, help, typ)
		w.sample(name, lbl, v)
	}
	// The Rust registry sorts a family's series by their label values:
	// dp_rank, then worker_id.
	sorted := slices.SortedStableFunc(slices.Values(d.Workers), func(a, b DynamoWorkerLoad) int {
		return cmp.Or(cmp.Compare(strconv.Itoa(a.DPRank), strconv.Itoa(b.DPRank)), cmp.Compare(a.WorkerID, b.WorkerID))
	})
	perWorker := func(name, help string, v func(l DynamoWorkerLoad) int64) {
		w.family(name, help, "gauge")
		for _, l := range sorted {
			w.sample(name, labels(true, "worker_id", l.WorkerID, "dp_rank", strconv.Itoa(l.DPRank), "worker_type", "decode"), float64(v(l)))
		}
	}
	one("dynamo_frontend_disconnected_clients", "Number of disconnected clients", "gauge", "", 0)
	one("dynamo_frontend_inflight_requests", "Number of inflight requests", "gauge", req, float64(d.Inflight))
	one("dynamo_frontend_model_context_length", "Maximum context length in tokens for a worker serving the model", "gauge", card, float64(d.ContextLength))
	one("dynamo_frontend_model_kv_cache_block_size", "KV cache block size in tokens for a worker serving the model", "gauge", card, float64(d.BlockSize))
	one("dynamo_frontend_model_max_num_seqs", "Maximum number of sequences for a worker serving the model", "gauge", card, float64(d.MaxNumSeqs))
	one("dynamo_frontend_model_migration_limit", "Maximum number of request migrations allowed for the model", "gauge", card, 0)
	one("dynamo_frontend_model_total_kv_blocks", "Total KV cache blocks available for a worker serving the model", "gauge", card, float64(d.TotalBlocks))
	one("dynamo_frontend_queued_requests", "Number of requests in HTTP processing queue", "gauge", req, float64(d.Queued))
	one("dynamo_frontend_requests_total", "Total number of LLM requests processed", "counter",
		labels(true, "endpoint", "chat_completions", "model", strings.ToLower(spec.ModelName), "request_type", "stream", "status", "success"), float64(ld.Requests))
	one("dynamo_frontend_router_queue_pending_isl_tokens", "Sum of isl_tokens for requests pending in the router scheduler queue", "gauge", labels(true, "worker_type", "decode"), 0)
	one("dynamo_frontend_router_queue_pending_requests", "Number of requests pending in the router scheduler queue", "gauge", labels(true, "worker_type", "decode"), 0)
	perWorker("dynamo_frontend_worker_active_decode_blocks", "Active KV cache decode blocks per worker", func(l DynamoWorkerLoad) int64 { return l.DecodeBlocks })
	perWorker("dynamo_frontend_worker_active_prefill_tokens", "Active prefill tokens queued per worker", func(l DynamoWorkerLoad) int64 { return l.PrefillTokens })
	return w.b
}
