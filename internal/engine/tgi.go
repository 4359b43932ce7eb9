package engine

import (
	"github.com/kvwatch/kvwatch/internal/kv"
)

// tgiSpec reads HuggingFace text-generation-inference. TGI's block allocator
// reserves input + max_new_tokens at admission, so its only "used" gauge,
// tgi_batch_current_max_tokens (the tokens the running batch will grow to),
// is a reservation: Used carries kv.Reserved provenance and so does the
// usage ratio derived from it; ReservedRatio is the same reservation over
// capacity. TGI exports no prefix-cache, evictable or preemption metric (it
// does not preempt). Its Rust exporter writes counters without "_total".
var tgiSpec = Spec{
	Name:         "tgi",
	DisabledHint: "TGI serves /metrics on its API port (default 3000) and on --prometheus-port (default 9000); check the port",
	Detect:       []string{tgiCapacity, tgiReserved, tgiRunning, tgiQueue, tgiRequests},
	Reads:        []string{tgiGenerated, tgiInput},
	Normalize:    normalizeTGI,
}

const (
	tgiCapacity  = "tgi_batch_max_total_tokens"
	tgiReserved  = "tgi_batch_current_max_tokens"
	tgiRunning   = "tgi_batch_current_size"
	tgiQueue     = "tgi_queue_size"
	tgiGenerated = "tgi_request_generated_tokens_sum"
	tgiInput     = "tgi_request_input_length_sum"
	tgiRequests  = "tgi_request_count"
)

// normalizeTGI is tgiSpec's Normalize.
func normalizeTGI(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "tgi", Generation: "current", Role: kv.RoleUnified}
	s := &srv.Signals
	s.Capacity = single(p, tgiCapacity, nil, kv.Of)
	s.Used = single(p, tgiReserved, nil, kv.ReservedOf)
	s.ReservedRatio = s.Used.Div(s.Capacity)
	s.Running = single(p, tgiRunning, nil, kv.Of)
	s.Queued.Waiting = single(p, tgiQueue, nil, kv.Of)
	s.Counters.GenerationTokens = summed(p, tgiGenerated, nil, kv.Of)
	s.Counters.PromptTokens = summed(p, tgiInput, nil, kv.Of)
	srv.Rollup()
	return srv, nil
}
