package engine

import (
	"bytes"
	"strings"
)

// What an engine answers on a metrics path instead of a page. An engine
// whose metrics are off answers with its web framework's "no such route"
// (or, llama.cpp, a 501 of its own); an engine that serves its metrics on a
// listener of their own answers on its API port with whatever that port
// says of an unknown path. Each engine's answer, read in its server source:
//
//   - SGLang without --enable-metrics, LMDeploy with --disable-metrics:
//     FastAPI's 404 for a path without a route, {"detail":"Not Found"} (SGLang's own HTTPException
//     handler is registered for fastapi.HTTPException, which the router's
//     starlette 404 is not; vLLM and trtllm-serve always mount theirs).
//   - llama.cpp without --metrics: 501 {"error":{"code":501,"message":"This
//     server does not support metrics endpoint. Start it with `--metrics`",
//     "type":"not_supported_error"}} (server.cpp, handle_metrics).
//   - The SGLang router on its API port: 404 with an empty body (server.rs,
//     sink_handler, the fallback of every path it has no route for; its
//     metrics are on --prometheus-port, default 29000).
//   - Triton on its HTTP port (default 8000): 400 with an empty body
//     (http_server.cc, HTTPAPIServer::Handle answers EVHTP_RES_BADREQ to
//     every path it does not serve; its metrics are on --metrics-port,
//     default 8002).
//
// vLLM, TGI and Dynamo's frontend serve /metrics on their API port whatever
// their flags, so no answer of theirs means their metrics are off.

// AnswerKind is what an answer on a metrics path means for an engine.
type AnswerKind int

const (
	// AnswerOther: not an answer the engine gives on its metrics path.
	AnswerOther AnswerKind = iota
	// AnswerMetricsOff: the engine runs with its metrics off.
	AnswerMetricsOff
	// AnswerAPIPort: the URL is the engine's API port; it serves metrics
	// on a listener of its own (its DisabledHint says which).
	AnswerAPIPort
)

// Recognized is an engine whose answer on a metrics path this is.
type Recognized struct {
	// Engine is the engine's name.
	Engine string
	// Kind says what the answer means.
	Kind AnswerKind
	// Hint is the engine's DisabledHint: how to turn its metrics on, or
	// where it serves them.
	Hint string
	// MetricsPort is the default port of the engine's metrics listener
	// (AnswerAPIPort), 0 when it has none of its own.
	MetricsPort int
}

// Recognize returns the engines, in detection order, that answer status
// with body (its start) on their metrics path when their metrics are off or
// the URL is their API port; none when no engine answers so.
func (r *Registry) Recognize(status int, body []byte) []Recognized {
	var out []Recognized
	for _, s := range r.specs {
		if s.Answer == nil {
			continue
		}
		if k := s.Answer(status, body); k != AnswerOther {
			out = append(out, Recognized{Engine: s.Name, Kind: k, Hint: s.DisabledHint, MetricsPort: s.MetricsPort})
		}
	}
	return out
}

// fastAPINotFound is FastAPI's answer to a path without a route: the
// answer of the Python engines whose metrics route is mounted only with
// their metrics on.
func fastAPINotFound(status int, body []byte) AnswerKind {
	if status == 404 && bytes.Equal(bytes.TrimSpace(body), []byte(`{"detail":"Not Found"}`)) {
		return AnswerMetricsOff
	}
	return AnswerOther
}

// llamacppMetricsOff is llama-server's answer on /metrics without --metrics
// (its message lost "Start it with `--metrics`" in older releases; the
// error type is in every release that has one).
func llamacppMetricsOff(status int, body []byte) AnswerKind {
	if status == 501 && (bytes.Contains(body, []byte(`"not_supported_error"`)) ||
		bytes.Contains(body, []byte("does not support metrics endpoint"))) {
		return AnswerMetricsOff
	}
	return AnswerOther
}

// emptyAnswer returns the Answer of an engine whose API port answers an
// unknown path with code and no body.
func emptyAnswer(code int) func(int, []byte) AnswerKind {
	return func(status int, body []byte) AnswerKind {
		if status == code && strings.TrimSpace(string(body)) == "" {
			return AnswerAPIPort
		}
		return AnswerOther
	}
}
