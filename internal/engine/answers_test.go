package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecognize: each engine's answer on a metrics path, as its server
// source writes it, names that engine and what it means; answers no
// engine gives name none.
func TestRecognize(t *testing.T) {
	off := func(name, hint string) Recognized {
		return Recognized{Engine: name, Kind: AnswerMetricsOff, Hint: hint}
	}
	sglang := off("sglang", "start SGLang with --enable-metrics")
	lmdeploy := off("lmdeploy", "start lmdeploy serve api_server without --disable-metrics (on by default since v0.11.0; older releases need --enable-metrics)")
	llamacpp := off("llamacpp", "start llama-server with --metrics")
	router := Recognized{Engine: "sgl-router", Kind: AnswerAPIPort, MetricsPort: 29000,
		Hint: "the SGLang router serves metrics on a listener of their own, --prometheus-port (default 29000), not on its API port; sgl-router before the model gateway binds it to 127.0.0.1 unless started with --prometheus-host 0.0.0.0"}
	triton := Recognized{Engine: "triton", Kind: AnswerAPIPort, MetricsPort: 8002,
		Hint: "Triton serves metrics on its metrics port, --metrics-port (default 8002, /metrics), not on its HTTP port; start tritonserver without --allow-metrics=false"}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []Recognized
	}{
		{"fastapi 404", 404, `{"detail":"Not Found"}`, []Recognized{sglang, lmdeploy}},
		{"llama-server 501", 501, "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}", []Recognized{llamacpp}},
		{"llama-server 501, older message", 501, `{"error":{"code":501,"message":"This server does not support metrics endpoint.","type":"not_supported_error"}}`, []Recognized{llamacpp}},
		{"llama-server 501 as text", 501, "This server does not support metrics endpoint. Start it with `--metrics`\n", []Recognized{llamacpp}},
		{"router fallback", 404, "", []Recognized{router}},
		{"triton http port", 400, "", []Recognized{triton}},
		{"go 404", 404, "404 page not found\n", nil},
		{"llama-server 404", 404, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, nil},
		{"fastapi 404 body with another status", 500, `{"detail":"Not Found"}`, nil},
		{"other 501", 501, "Not Implemented", nil},
		{"empty 200", 200, "", nil},
		{"go tls port to plain http", 400, "Client sent an HTTP request to an HTTPS server.\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewRegistry().Recognize(tc.status, []byte(tc.body))); diff != "" {
				t.Errorf("Recognize(%d, %q) (-want +got):\n%s", tc.status, tc.body, diff)
			}
		})
	}
}
