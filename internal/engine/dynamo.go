package engine

import (
	"math"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// dynamoSpec reads NVIDIA Dynamo: the workers' dynamo_component_* gauges
// and the HTTP frontend's dynamo_frontend_* gauges. Dynamo also passes the
// engine's own metrics through (sglang:*, vllm:*); those have the exact
// semantics, so Dynamo comes after the engines in detection order and a
// page with both is read as the engine (see Registry.Detect).
//
// Worker KV, in two dialects. Generation "current" (since ai-dynamo/dynamo
// PR #5704): dynamo_component_total_blocks and
// dynamo_component_gpu_cache_usage_percent (0–1), labels model,
// dynamo_component and dp_rank (LLMBackendMetrics in
// components/src/dynamo/common/utils/prometheus.py); no active-blocks
// gauge, so used is ratio × capacity (derived). Generation "kvstats" (the
// releases before): dynamo_component_kvstats_{active_blocks,total_blocks,
// gpu_cache_usage_percent}. Each series' dp_rank (else worker_id) is a
// rank. Blocks become tokens only with dynamo_frontend_model_kv_cache_block_size
// on the page (derived); for SGLang workers Dynamo's "blocks" already are
// tokens, which the page does not say, so without a block size capacity and
// used stay unavailable and the ratio (direct) is still shown. A rank whose
// total is 0 has not published its KV yet: all its KV values, the ratio
// included, are unavailable (Dynamo's own examples show 0 everywhere then).
// A page with both dialects is read as current; where the two disagree on a
// rank's total or ratio it carries a kv.WarnMixedDialect warning naming
// both values.
//
// dynamo_component_inflight_requests of the "generate" endpoint are the
// requests in the worker's handler: running, plus any the engine queues
// inside (Dynamo does not split them).
//
// Frontend: dynamo_frontend_inflight_requests counts a request from the
// HTTP handler's start to its last token and includes the requests in
// dynamo_frontend_queued_requests (handler start to first token; Dynamo's
// deploy/metrics README: "HTTP Queue ≤ Inflight", 10 inflight with 7
// queued means 3 running). So running = inflight − queued (derived,
// clamped at 0) and queued is the waiting queue; without the queue gauge,
// dynamo_frontend_router_queue_pending_requests (the KV router's pending
// queue, a part of the HTTP queue) is the waiting queue. Capacity is
// dynamo_frontend_model_total_kv_blocks × dynamo_frontend_model_kv_cache_block_size
// (derived), summed over models: Dynamo's help calls it the KV "available
// for a worker serving the model". A frontend running the KV router also
// exports dynamo_frontend_worker_active_decode_blocks{worker_id, dp_rank,
// worker_type}: the router's own count of each worker's in-flight blocks.
// Each decode or aggregated worker series is then a rank: used is its
// blocks × the block size, capacity the model card's per-worker capacity
// (one model on the page; derived). Prefill workers' series are not read:
// their KV is another pool than the decode workers' (never a blend).
// dynamo_frontend_worker_active_prefill_tokens (prompt tokens routed to a
// worker and not yet prefilled) is no KV held and is not read.
//
// KVBM (the KV block manager's page): the host (G2) and disk (G3) tiers'
// hit rates, kvbm_{host,disk}_cache_hit_rate, 0–1 over KVBM's own sliding
// window of the last 1,000 requests (a pool's HitRate, not a counter: its
// fill and capacity are not exported). A page with KVBM's gauges and no
// worker or frontend signal is KVBM's own listener: role cache, in no
// pool's KV sums.
var dynamoSpec = Spec{
	Name:         "dynamo",
	DisabledHint: "Dynamo workers serve /metrics on DYN_SYSTEM_PORT (set DYN_SYSTEM_ENABLED=true); the frontend on its HTTP port",
	Detect: []string{dyTotalNow, dyUsageNow, dyActive, dyTotal, dyUsage, dyQueued, dyInflight, dyRequests, dyModelBlocks,
		dyWorkerInflight, dyWorkerDecode, dyRouterPending, dyKVBMHost, dyKVBMDisk},
	Reads:     []string{dyBlockSize, dyCtxLen},
	Normalize: normalizeDynamo,
}

const (
	// The worker KV gauges since PR #5704 (kvstats names without kvstats_).
	dyTotalNow = "dynamo_component_total_blocks"
	dyUsageNow = "dynamo_component_gpu_cache_usage_percent"
	// The kvstats dialect, before PR #5704.
	dyActive         = "dynamo_component_kvstats_active_blocks"
	dyTotal          = "dynamo_component_kvstats_total_blocks"
	dyUsage          = "dynamo_component_kvstats_gpu_cache_usage_percent"
	dyWorkerInflight = "dynamo_component_inflight_requests"
	dyBlockSize      = "dynamo_frontend_model_kv_cache_block_size"
	dyModelBlocks    = "dynamo_frontend_model_total_kv_blocks"
	dyQueued         = "dynamo_frontend_queued_requests"
	dyInflight       = "dynamo_frontend_inflight_requests"
	dyRequests       = "dynamo_frontend_requests_total"
	dyCtxLen         = "dynamo_frontend_model_context_length"
	// The KV router's view in the frontend (frontend_service in
	// prometheus_names): blocks per worker, its pending queue.
	dyWorkerDecode  = "dynamo_frontend_worker_active_decode_blocks"
	dyRouterPending = "dynamo_frontend_router_queue_pending_requests"
	// KVBM, Dynamo's KV block manager (its own listener,
	// DYN_KVBM_METRICS_PORT): hit rates of the host and disk tiers, gauges
	// over a sliding window of the last 1,000 requests.
	dyKVBMHost = "kvbm_host_cache_hit_rate"
	dyKVBMDisk = "kvbm_disk_cache_hit_rate"
)

func dyRank(s expo.Sample) kv.RankID {
	if dp := s.Labels.Get("dp_rank"); dp != "" {
		return kv.RankID{DP: dp}
	}
	return kv.RankID{DP: s.Labels.Get("worker_id")}
}

// dyWorkerRank is a frontend per-worker series' rank: the worker and, when
// the worker has several, its DP rank.
func dyWorkerRank(s expo.Sample) kv.RankID {
	id, dp := s.Labels.Get("worker_id"), s.Labels.Get("dp_rank")
	if dp != "" {
		id += "/" + dp
	}
	return kv.RankID{DP: id}
}

// dyDecodeWorker keeps the frontend's series of decode and aggregated
// workers (and those without a worker type), not prefill workers'.
func dyDecodeWorker(s expo.Sample) bool { return s.Labels.Get("worker_type") != "prefill" }

// dyGenerate keeps the handler series of the inference endpoint (and
// series without an endpoint label), not clear_kv_blocks, list_loras and
// the other admin endpoints a worker serves.
func dyGenerate(s expo.Sample) bool {
	e := s.Labels.Get("dynamo_endpoint")
	return e == "" || e == "generate"
}

// dyCapacity and dyRatio are the rank fields the worker gauges set.
func dyCapacity(s *kv.Signals) *kv.Value { return &s.Capacity }
func dyRatio(s *kv.Signals) *kv.Value    { return &s.UsageRatio }

// normalizeDynamo is dynamoSpec's Normalize.
func normalizeDynamo(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "dynamo", Generation: "current"}
	current := p.Has(dyTotalNow) || p.Has(dyUsageNow)
	old := p.Has(dyActive) || p.Has(dyTotal) || p.Has(dyUsage)
	if old && !current {
		srv.Generation = "kvstats"
	}
	srv.Model = firstLabel(p, "model", dyModelBlocks, dyBlockSize, dyQueued, dyInflight, dyRequests, dyTotalNow, dyUsageNow, dyWorkerInflight)
	block := single(p, dyBlockSize, nil, kv.Of)
	r := newRanks()
	if current {
		r.read(p, dyUsageNow, dyRank, nil, maxf, dyRatio, kv.Of)
		r.read(p, dyTotalNow, dyRank, nil, maxf, dyCapacity, kv.Of)
		if old {
			dyCompareDialects(p, r, &srv)
		}
	} else {
		r.read(p, dyUsage, dyRank, nil, maxf, dyRatio, kv.Of)
		r.read(p, dyTotal, dyRank, nil, maxf, dyCapacity, kv.Of)
		r.read(p, dyActive, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.Used }, kv.Of)
	}
	r.each(func(_ kv.RankID, s *kv.Signals) {
		if s.Capacity.OK() && s.Capacity.V == 0 { // not published yet
			s.Capacity, s.Used, s.UsageRatio = kv.Value{}, kv.Value{}, kv.Value{}
			return
		}
		if block.OK() && block.V > 0 { // blocks to tokens, or unknown
			s.Capacity, s.Used = s.Capacity.Mul(block), s.Used.Mul(block)
		} else {
			s.Capacity, s.Used = kv.Value{}, kv.Value{}
		}
	})
	if r.len() == 0 && block.OK() && block.V > 0 { // a frontend: the router's per-worker blocks
		perWorker := dyModelCapacity(p)
		if len(p.Samples(dyModelBlocks)) != 1 || (perWorker.OK() && perWorker.V == 0) {
			perWorker = kv.Value{}
		}
		r.read(p, dyWorkerDecode, dyWorkerRank, dyDecodeWorker, maxf, func(s *kv.Signals) *kv.Value { return &s.Used }, kv.DerivedOf)
		r.each(func(_ kv.RankID, s *kv.Signals) {
			s.Used = s.Used.Mul(block)
			s.Capacity = perWorker
		})
	}
	for _, rk := range r.list() { // a worker left with nothing known is no rank
		if rk.Signals != (kv.Signals{}) {
			srv.Ranks = append(srv.Ranks, rk)
		}
	}
	srv.Rollup()

	// Frontend: the model card's capacity, running out of inflight.
	if !srv.Capacity.OK() && len(srv.Ranks) == 0 {
		srv.Capacity = dyModelCapacity(p)
		if srv.Capacity.OK() && srv.Capacity.V == 0 {
			srv.Capacity = kv.Value{}
		}
	}
	inflight := summed(p, dyInflight, nil, kv.Of)
	queued := summed(p, dyQueued, nil, kv.Of)
	if running := inflight.Sub(queued); running.OK() {
		if running.V < 0 {
			running.V = 0
		}
		srv.Running = running
	}
	srv.Queued.Waiting = queued.Or(srv.Queued.Waiting).Or(summed(p, dyRouterPending, nil, kv.Of))
	// Worker: requests in the inference handler.
	srv.Running = srv.Running.Or(summed(p, dyWorkerInflight, dyGenerate, kv.Of))
	srv.ContextLength = single(p, dyCtxLen, nil, kv.Of)
	ps := newPools()
	ps.read(p, dyKVBMHost, fixed(kv.PoolFull, kv.TierHost, ""), kv.UnitTokens, pfHitRate, nil, maxf, kv.Of)
	ps.read(p, dyKVBMDisk, fixed(kv.PoolFull, kv.TierDisk, ""), kv.UnitTokens, pfHitRate, nil, maxf, kv.Of)
	srv.CachePools = ps.list(nil)
	if len(srv.CachePools) > 0 && srv.Signals == (kv.Signals{}) && len(srv.Ranks) == 0 {
		srv.Role = kv.RoleCache // KVBM's own listener: tiers, no KV pool
	}
	return srv, nil
}

// dyCompareDialects warns for every rank where the kvstats gauges on a
// current page disagree with the current ones (r holds the current
// values, in blocks): one value, two answers, and kvwatch keeps the new.
func dyCompareDialects(p *expo.Page, r *ranks, srv *kv.Server) {
	o := newRanks()
	o.read(p, dyUsage, dyRank, nil, maxf, dyRatio, kv.Of)
	o.read(p, dyTotal, dyRank, nil, maxf, dyCapacity, kv.Of)
	olds := o.list()
	for _, rk := range olds {
		var now kv.Signals
		r.each(func(id kv.RankID, s *kv.Signals) {
			// The same rank; or, one worker on each side, that worker
			// (the kvstats series may name it by worker_id, the new by
			// dp_rank).
			if id == rk.RankID || (len(olds) == 1 && r.len() == 1) {
				now = *s
			}
		})
		for _, c := range []struct {
			name, oldName string
			was, is       kv.Value
		}{
			{dyTotalNow, dyTotal, rk.Capacity, now.Capacity},
			{dyUsageNow, dyUsage, rk.UsageRatio, now.UsageRatio},
		} {
			if c.was.OK() && c.is.OK() && !sameValue(c.was.V, c.is.V) {
				srv.Warn(kv.WarnMixedDialect, "rank %q: %s is %g but %s (the name before Dynamo PR #5704) is %g; read %s",
					rk.DP, c.name, c.is.V, c.oldName, c.was.V, c.name)
			}
		}
	}
}

// sameValue reports whether two readings of one value agree to float
// rounding (1e-9 relative).
func sameValue(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// dyModelCapacity is Σ over models of total_kv_blocks × kv_cache_block_size
// (derived); unknown unless every model with blocks has a block size.
func dyModelCapacity(p *expo.Page) kv.Value {
	sizes := map[string]float64{}
	for _, s := range p.Samples(dyBlockSize) {
		if expo.Finite(s.Value) && s.Value > 0 {
			sizes[s.Labels.Get("model")] = s.Value
		}
	}
	var out kv.Value
	for _, s := range p.Samples(dyModelBlocks) {
		if !expo.Finite(s.Value) {
			continue
		}
		bs, ok := sizes[s.Labels.Get("model")]
		if !ok {
			return kv.Value{}
		}
		c := kv.DerivedOf(s.Value * bs)
		if out.OK() {
			c.V += out.V
		}
		out = c
	}
	return out
}
