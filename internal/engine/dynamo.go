package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// dynamoSpec reads NVIDIA Dynamo: the workers' dynamo_component_* gauges
// and the HTTP frontend's dynamo_frontend_* gauges. Dynamo also passes the
// engine's own metrics through (sglang:*, vllm:*); those have the exact
// semantics, so Dynamo comes after the engines in detection order and a
// page with both is read as the engine (see Registry.Detect).
//
// Worker kvstats: used and capacity are active and total blocks, in tokens
// when dynamo_frontend_model_kv_cache_block_size is on the page (derived);
// for SGLang workers Dynamo's "blocks" already are tokens, which the page
// does not say, so without a block size capacity and used stay unavailable
// and the ratio (gpu_cache_usage_percent, 0–1, direct) is still shown. A
// worker whose total_blocks is 0 has not published its KV yet: all its
// kvstats, the ratio included, are unavailable (Dynamo's own examples show
// 0 everywhere then). Each worker series (dp_rank label, else worker_id)
// is a rank. dynamo_component_inflight_requests of the "generate" endpoint
// are the requests in the worker's handler: running, plus any the engine
// queues inside (Dynamo does not split them).
//
// Frontend: dynamo_frontend_inflight_requests counts a request from the
// HTTP handler's start to its last token and includes the requests in
// dynamo_frontend_queued_requests (handler start to first token; Dynamo's
// deploy/metrics README: "HTTP Queue ≤ Inflight", 10 inflight with 7
// queued means 3 running). So running = inflight − queued (derived,
// clamped at 0) and queued is the waiting queue. Capacity is
// dynamo_frontend_model_total_kv_blocks × dynamo_frontend_model_kv_cache_block_size
// (derived), summed over models: Dynamo's help calls it the KV "available
// for a worker serving the model".
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
	Detect:       []string{dyActive, dyTotal, dyUsage, dyQueued, dyInflight, dyRequests, dyModelBlocks, dyWorkerInflight, dyKVBMHost, dyKVBMDisk},
	Reads:        []string{dyBlockSize, dyCtxLen},
	Normalize:    normalizeDynamo,
}

const (
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

// dyGenerate keeps the handler series of the inference endpoint (and
// series without an endpoint label), not clear_kv_blocks, list_loras and
// the other admin endpoints a worker serves.
func dyGenerate(s expo.Sample) bool {
	e := s.Labels.Get("dynamo_endpoint")
	return e == "" || e == "generate"
}

// normalizeDynamo is dynamoSpec's Normalize.
func normalizeDynamo(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "dynamo", Generation: "current"}
	srv.Model = firstLabel(p, "model", dyModelBlocks, dyBlockSize, dyQueued, dyInflight, dyRequests, dyWorkerInflight)
	block := single(p, dyBlockSize, nil, kv.Of)
	r := newRanks()
	r.read(p, dyUsage, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.UsageRatio }, kv.Of)
	r.read(p, dyTotal, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.Capacity }, kv.Of)
	r.read(p, dyActive, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.Used }, kv.Of)
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
	for _, rk := range r.list() { // a worker left with nothing known is no rank
		if rk.Signals != (kv.Signals{}) {
			srv.Ranks = append(srv.Ranks, rk)
		}
	}
	srv.Rollup()

	// Frontend: the model card's capacity, running out of inflight.
	if !srv.Capacity.OK() {
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
	srv.Queued.Waiting = queued.Or(srv.Queued.Waiting)
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
