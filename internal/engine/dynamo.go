package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// dynamoSpec reads NVIDIA Dynamo: the workers' dynamo_component_kvstats_*
// gauges and the HTTP frontend's dynamo_frontend_* gauges. Dynamo also
// passes the engine's own metrics through (sglang:*, vllm:*); those have
// the exact semantics, so Dynamo comes after the engines in detection
// order and is only chosen for pages without them.
//
// Used and capacity are active and total blocks (direct counts in blocks),
// in tokens when dynamo_frontend_model_kv_cache_block_size is on the page
// (derived); for SGLang workers Dynamo's "blocks" already are tokens, which
// the page does not say, so without a block size the values are not
// converted and capacity and used stay unavailable, the ratio
// (gpu_cache_usage_percent, 0–1, direct) still shown. Each worker series
// (dp_rank label, else worker_id) is a rank. The frontend's queued requests
// wait in its HTTP queue; its inflight requests are counted as running.
var dynamoSpec = Spec{
	Name:         "dynamo",
	DisabledHint: "Dynamo workers serve /metrics on DYN_SYSTEM_PORT (set DYN_SYSTEM_ENABLED=true); the frontend on its HTTP port",
	Detect:       []string{dyActive, dyTotal, dyUsage, dyQueued, dyInflight, dyRequests},
	Reads:        []string{dyBlockSize, dyCtxLen},
	Normalize:    normalizeDynamo,
}

const (
	dyActive    = "dynamo_component_kvstats_active_blocks"
	dyTotal     = "dynamo_component_kvstats_total_blocks"
	dyUsage     = "dynamo_component_kvstats_gpu_cache_usage_percent"
	dyBlockSize = "dynamo_frontend_model_kv_cache_block_size"
	dyQueued    = "dynamo_frontend_queued_requests"
	dyInflight  = "dynamo_frontend_inflight_requests"
	dyRequests  = "dynamo_frontend_requests_total"
	dyCtxLen    = "dynamo_frontend_model_context_length"
)

func dyRank(s expo.Sample) kv.RankID {
	if dp := s.Labels.Get("dp_rank"); dp != "" {
		return kv.RankID{DP: dp}
	}
	return kv.RankID{DP: s.Labels.Get("worker_id")}
}

// normalizeDynamo is dynamoSpec's Normalize.
func normalizeDynamo(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "dynamo", Generation: "current"}
	srv.Model = firstLabel(p, "model", dyQueued, dyInflight, dyRequests, dyBlockSize)
	block := single(p, dyBlockSize, nil, kv.Of)
	r := newRanks()
	r.read(p, dyUsage, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.UsageRatio }, kv.Of)
	r.read(p, dyTotal, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.Capacity }, kv.Of)
	r.read(p, dyActive, dyRank, nil, maxf, func(s *kv.Signals) *kv.Value { return &s.Used }, kv.Of)
	for _, id := range r.order { // blocks to tokens, or unknown
		s := r.get(id)
		if block.OK() && block.V > 0 {
			s.Capacity, s.Used = s.Capacity.Mul(block), s.Used.Mul(block)
		} else {
			s.Capacity, s.Used = kv.Value{}, kv.Value{}
		}
	}
	srv.Ranks = r.list()
	srv.Rollup()
	srv.Running = summed(p, dyInflight, nil, kv.Of).Or(srv.Running)
	srv.Queued.Waiting = summed(p, dyQueued, nil, kv.Of).Or(srv.Queued.Waiting)
	srv.ContextLength = single(p, dyCtxLen, nil, kv.Of)
	return srv, nil
}
