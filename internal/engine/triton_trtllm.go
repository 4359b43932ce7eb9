package engine

import (
	"sort"
	"strings"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// tritonSpec reads Triton Inference Server with the TensorRT-LLM backend: the
// backend's nv_trt_llm_* gauges (one category label each, plus "model" and
// "version") and, on pages that have no nv_trt_llm_* family, Triton core's
// nv_inference_* metrics.
//
// KV comes in blocks: capacity = max × tokens_per and used = used ×
// tokens_per (derived); the usage ratio is used / max (derived), and the
// exported "fraction" only when a block count is missing, since the
// backend's README sample shows fraction 0.4875 next to used 1 of max 6239.
// Each (model, version) is a separate TensorRT-LLM instance with its own KV
// pool and scheduler: when a page has several, each is a rank (DP =
// "model/version") and the server sums them; a request of one model cannot
// use another's KV. "paused_requests" is a gauge of requests paused now, not
// a count of preemptions: preemptions stay unavailable. The role is left
// to the caller: TensorRT-LLM can serve disaggregated and the page does not
// say which side a server is.
var tritonSpec = Spec{
	Name:         "triton",
	DisabledHint: "Triton serves metrics on its metrics port, --metrics-port (default 8002, /metrics), not on its HTTP port; start tritonserver without --allow-metrics=false",
	Answer:       emptyAnswer(400),
	MetricsPort:  8002,
	Detect:       []string{trBlocks, trRequest, trIFB, trV1, trGeneral, trSuccess, trPending},
	Reads:        []string{trOutputSum, trInputSum},
	Normalize:    normalizeTriton,
}

const (
	trRequest   = "nv_trt_llm_request_metrics"
	trBlocks    = "nv_trt_llm_kv_cache_block_metrics"
	trIFB       = "nv_trt_llm_inflight_batcher_metrics"
	trV1        = "nv_trt_llm_v1_metrics"
	trGeneral   = "nv_trt_llm_general_metrics"
	trOutputSum = "nv_llm_output_token_len_sum"
	trInputSum  = "nv_llm_input_token_len_sum"
	trPending   = "nv_inference_pending_request_count"
	trSuccess   = "nv_inference_request_success"
)

// trInstance names one TensorRT-LLM model instance.
type trInstance struct{ model, version string }

func trOf(s expo.Sample) trInstance {
	return trInstance{s.Labels.Get("model"), s.Labels.Get("version")}
}

// normalizeTriton is tritonSpec's Normalize.
func normalizeTriton(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "triton"}
	switch {
	case p.Has(trIFB):
		srv.Generation = "inflight_batcher"
	case p.Has(trV1):
		srv.Generation = "v1"
	case p.Has(trBlocks) || p.Has(trRequest) || p.Has(trGeneral):
		srv.Generation = "trtllm"
	default:
		srv.Generation = "core"
	}

	// The instances are those with any TensorRT-LLM family; a core-only
	// page has none and is read as one server.
	seen := map[trInstance]bool{}
	var insts []trInstance
	for _, n := range []string{trBlocks, trRequest, trIFB, trV1, trGeneral} {
		for _, s := range p.Samples(n) {
			if i := trOf(s); !seen[i] {
				seen[i] = true
				insts = append(insts, i)
			}
		}
	}
	sort.Slice(insts, func(a, b int) bool {
		if insts[a].model != insts[b].model {
			return insts[a].model < insts[b].model
		}
		return insts[a].version < insts[b].version
	})
	var models []string
	for _, i := range insts {
		models = append(models, i.model)
	}
	if len(insts) == 0 {
		for _, s := range p.Samples(trPending) {
			models = append(models, s.Labels.Get("model"))
		}
		srv.Queued.Waiting = summed(p, trPending, nil, kv.Of)
	}
	srv.Model = strings.Join(sortedUnique(models), ",")

	for _, inst := range insts {
		of := func(s expo.Sample) bool { return trOf(s) == inst }
		cat := func(name, label, value string) kv.Value {
			return single(p, name, func(s expo.Sample) bool { return of(s) && s.Labels.Get(label) == value }, kv.Of)
		}
		blocks := func(t string) kv.Value { return cat(trBlocks, "kv_cache_block_type", t) }
		var r kv.Rank
		if len(insts) > 1 {
			r.DP = inst.model + "/" + inst.version
		}
		maxB, usedB, per := blocks("max"), blocks("used"), blocks("tokens_per")
		if per.OK() && per.V > 0 {
			r.Capacity = maxB.Mul(per)
			r.Used = usedB.Mul(per)
		}
		r.UsageRatio = usedB.Div(maxB).Or(blocks("fraction"))
		r.Running = cat(trRequest, "request_type", "scheduled").Or(cat(trRequest, "request_type", "active"))
		r.Queued.Waiting = cat(trRequest, "request_type", "waiting")
		r.Counters.GenerationTokens = summed(p, trOutputSum, of, kv.Of)
		r.Counters.PromptTokens = summed(p, trInputSum, of, kv.Of)
		srv.Ranks = append(srv.Ranks, r)
	}
	srv.Rollup()
	return srv, nil
}
