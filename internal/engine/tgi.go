package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// TGI reads HuggingFace text-generation-inference. TGI's block allocator
// reserves input + max_new_tokens at admission, so its only "used" gauge,
// tgi_batch_current_max_tokens (the tokens the running batch will grow to),
// is a reservation: Used carries kv.Reserved provenance and so does the
// usage ratio derived from it; ReservedRatio is the same reservation over
// capacity. TGI exports no prefix-cache, evictable or preemption metric (it
// does not preempt). Its Rust exporter writes counters without "_total".
type TGI struct{}

const (
	tgiCapacity  = "tgi_batch_max_total_tokens"
	tgiReserved  = "tgi_batch_current_max_tokens"
	tgiRunning   = "tgi_batch_current_size"
	tgiQueue     = "tgi_queue_size"
	tgiGenerated = "tgi_request_generated_tokens_sum"
	tgiInput     = "tgi_request_input_length_sum"
	tgiRequests  = "tgi_request_count"
)

// Name implements Adapter.
func (TGI) Name() string { return "tgi" }

// DisabledHint implements DisabledHint.
func (TGI) DisabledHint() string {
	return "TGI serves /metrics on its API port (default 3000) and on --prometheus-port (default 9000); check the port"
}

// MetricNames implements Adapter.
func (TGI) MetricNames() []string {
	return []string{tgiCapacity, tgiReserved, tgiRunning, tgiQueue, tgiGenerated, tgiInput, tgiRequests}
}

// Detect implements Adapter.
func (TGI) Detect(p *expo.Page) bool {
	for _, n := range []string{tgiCapacity, tgiReserved, tgiRunning, tgiQueue, tgiRequests} {
		if p.Has(n) {
			return true
		}
	}
	return false
}

// Normalize implements Adapter.
func (TGI) Normalize(in Input) (kv.Server, error) {
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

// single returns the largest finite sample of name that keep accepts (nil:
// all): engines without ranks write one series, and duplicates are
// collapsed, not added.
func single(p *expo.Page, name string, keep func(expo.Sample) bool, mk func(float64) kv.Value) kv.Value {
	var out kv.Value
	for _, s := range p.Samples(name) {
		if (keep != nil && !keep(s)) || !expo.Finite(s.Value) {
			continue
		}
		if !out.OK() || s.Value > out.V {
			out = mk(s.Value)
		}
	}
	return out
}

// summed adds the finite samples of name that keep accepts (nil: all).
func summed(p *expo.Page, name string, keep func(expo.Sample) bool, mk func(float64) kv.Value) kv.Value {
	var total float64
	ok := false
	for _, s := range p.Samples(name) {
		if (keep != nil && !keep(s)) || !expo.Finite(s.Value) {
			continue
		}
		total += s.Value
		ok = true
	}
	if !ok {
		return kv.Value{}
	}
	return mk(total)
}
