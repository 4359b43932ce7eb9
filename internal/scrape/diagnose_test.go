package scrape

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// reply is one HTTP answer as a server writes it.
type reply struct {
	status int
	ctype  string
	body   string
	header map[string]string
}

func (a reply) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if a.ctype != "" {
		w.Header().Set("Content-Type", a.ctype)
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	fmt.Fprint(w, a.body)
}

// apiServer answers as an engine's API server: routes by path, fallback
// on every other path (the framework's answer to a path without a route).
func apiServer(t *testing.T, routes map[string]reply, fallback reply) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := routes[r.URL.Path]; ok {
			a.ServeHTTP(w, r)
			return
		}
		fallback.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The engines' answers, as their server sources write them.
var (
	// FastAPI's 404 for a path without a route (vLLM, SGLang, LMDeploy).
	fastAPI404 = reply{404, "application/json", `{"detail":"Not Found"}`, nil}
	// axum's 404 for a path without a route, and the SGLang router's
	// fallback (sink_handler): no body.
	axum404 = reply{404, "", "", nil}
	// llama-server's 404 (its error handler) and its /metrics without
	// --metrics.
	llamacpp404 = reply{404, "application/json; charset=utf-8", `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, nil}
	llamacpp501 = reply{501, "application/json; charset=utf-8", "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}", nil}
	// Triton's HTTP port on a path it does not serve (EVHTP_RES_BADREQ).
	triton400 = reply{400, "", "", nil}
	// A health check's empty 200 (vLLM, SGLang, TGI /health).
	empty200 = reply{200, "", "", nil}
)

func models(ownedBy string) reply {
	return reply{200, "application/json", `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1733300000,"owned_by":"` + ownedBy + `","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":32768}]}`, nil}
}

func page(body string) reply {
	return reply{200, "text/plain; version=0.0.4; charset=utf-8", body, nil}
}

const tgiPage = `# TYPE tgi_batch_max_total_tokens gauge
tgi_batch_max_total_tokens 500000
# TYPE tgi_batch_current_max_tokens gauge
tgi_batch_current_max_tokens 1200
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 3
# TYPE tgi_queue_size gauge
tgi_queue_size 0
`

// TestDiagnoseURL: a scrape of a URL that is no metrics URL, of an API
// port whose engine serves metrics elsewhere, or of an engine with metrics
// off says which, with the fix; "metrics are off" only for the engine's
// own answer with metrics off. Each server answers as the engine's source
// does on those paths.
func TestDiagnoseURL(t *testing.T) {
	vllmRoutes := map[string]reply{"/metrics": page(fixture(t, "vllm-v0-aibrix-docs-runtime_rst-passthrough.prom")), "/v1/models": models("vllm"), "/health": empty200}
	vllm := apiServer(t, vllmRoutes, fastAPI404)
	// vLLM with --api-key: its AuthenticationMiddleware guards /v1 only.
	vllmKey := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1") {
			reply{401, "application/json", `{"error":"Unauthorized"}`, nil}.ServeHTTP(w, r)
			return
		}
		vllm.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(vllmKey.Close)
	sglangOff := apiServer(t, map[string]reply{"/health": empty200, "/v1/models": models("sglang")}, fastAPI404)
	tgi := apiServer(t, map[string]reply{"/metrics": page(tgiPage), "/": empty200, "/health": empty200, "/v1/models": models("tgi")}, axum404)
	llamacppOff := apiServer(t, map[string]reply{"/metrics": llamacpp501, "/health": {200, "application/json; charset=utf-8", `{"status":"ok"}`, nil}, "/v1/models": models("llamacpp")}, llamacpp404)
	router := apiServer(t, map[string]reply{"/liveness": {200, "text/plain; charset=utf-8", "OK", nil}, "/health": {200, "text/plain; charset=utf-8", "OK", nil}, "/v1/models": models("sglang")}, axum404)
	triton := apiServer(t, map[string]reply{"/v2/health/ready": empty200}, triton400)
	goNotFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(goNotFound.Close)

	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		path   string
		engine string
		reason string
		want   string // the whole message, the server's host:port as H
	}{
		{"vllm openai base url", vllm, "/v1", "", signal.ReasonWrongPath,
			"http://H/v1 is the OpenAI API base URL, not a metrics URL (it answers 404 Not Found); the metrics are at http://H/metrics (engine vllm): set the target's URL to it"},
		{"vllm models list", vllm, "/v1/models", "", signal.ReasonWrongPath,
			"http://H/v1/models is the OpenAI API's model list, not a metrics URL (it answers a page that is not metrics); the metrics are at http://H/metrics (engine vllm): set the target's URL to it"},
		{"vllm api key on /v1", vllmKey, "/v1/models", "", signal.ReasonWrongPath,
			"http://H/v1/models is the OpenAI API's model list, not a metrics URL (it answers 401 Unauthorized); the metrics are at http://H/metrics (engine vllm): set the target's URL to it"},
		{"vllm typo", vllm, "/metric", "", signal.ReasonWrongPath,
			"http://H/metric is not /metrics (a typo?), not a metrics URL (it answers 404 Not Found); the metrics are at http://H/metrics (engine vllm): set the target's URL to it"},
		{"vllm health", vllm, "/health", "", signal.ReasonWrongPath,
			"http://H/health is a health check, not a metrics URL (it answers a page without an engine's metrics); the metrics are at http://H/metrics (engine vllm): set the target's URL to it"},
		{"sglang metrics off", sglangOff, "/metrics", "", signal.ReasonHTTP404,
			`scrape http://H/metrics: 404 Not Found: metrics are off; start SGLang with --enable-metrics, or start lmdeploy serve api_server without --disable-metrics (on by default since v0.11.0; older releases need --enable-metrics) ({"detail":"Not Found"} is the answer of sglang or lmdeploy without metrics)`},
		{"sglang metrics off, engine given", sglangOff, "", "sglang", signal.ReasonHTTP404,
			`scrape http://H/metrics: 404 Not Found: metrics are off; start SGLang with --enable-metrics ({"detail":"Not Found"} is the answer of sglang without metrics)`},
		{"sglang openai base url, metrics off", sglangOff, "/v1", "", signal.ReasonWrongPath,
			`http://H/v1 is the OpenAI API base URL, not a metrics URL (it answers 404 Not Found); at http://H/metrics, where engines serve them: 404 Not Found: metrics are off; start SGLang with --enable-metrics, or start lmdeploy serve api_server without --disable-metrics (on by default since v0.11.0; older releases need --enable-metrics) ({"detail":"Not Found"} is the answer of sglang or lmdeploy without metrics)`},
		{"tgi openai base url", tgi, "/v1", "", signal.ReasonWrongPath,
			"http://H/v1 is the OpenAI API base URL, not a metrics URL (it answers 404 Not Found); the metrics are at http://H/metrics (engine tgi): set the target's URL to it"},
		{"llamacpp metrics off", llamacppOff, "", "", signal.ReasonHTTP501,
			"scrape http://H/metrics: 501 Not Implemented: metrics are off; start llama-server with --metrics ({\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}} is the answer of llamacpp without metrics)"},
		{"llamacpp health", llamacppOff, "/health", "", signal.ReasonWrongPath,
			"http://H/health is a health check, not a metrics URL (it answers a page that is not metrics); at http://H/metrics, where engines serve them: 501 Not Implemented: metrics are off; start llama-server with --metrics ({\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}} is the answer of llamacpp without metrics)"},
		{"router api port", router, "", "", signal.ReasonWrongPort,
			"scrape http://H/metrics: 404 Not Found: this is the API port of sgl-router, not its metrics listener (an empty body is its answer to a path it does not serve): the SGLang router serves metrics on a listener of their own, --prometheus-port (default 29000), not on its API port; sgl-router before the model gateway binds it to 127.0.0.1 unless started with --prometheus-host 0.0.0.0: try http://127.0.0.1:29000/metrics"},
		{"router openai base url", router, "/v1", "", signal.ReasonWrongPath,
			"http://H/v1 is the OpenAI API base URL, not a metrics URL (it answers 404 Not Found); at http://H/metrics, where engines serve them: 404 Not Found: this is the API port of sgl-router, not its metrics listener (an empty body is its answer to a path it does not serve): the SGLang router serves metrics on a listener of their own, --prometheus-port (default 29000), not on its API port; sgl-router before the model gateway binds it to 127.0.0.1 unless started with --prometheus-host 0.0.0.0: try http://127.0.0.1:29000/metrics"},
		{"router liveness", router, "/liveness", "", signal.ReasonWrongPath,
			"http://H/liveness is a health check, not a metrics URL (it answers a page that is not metrics); at http://H/metrics, where engines serve them: 404 Not Found: this is the API port of sgl-router, not its metrics listener (an empty body is its answer to a path it does not serve): the SGLang router serves metrics on a listener of their own, --prometheus-port (default 29000), not on its API port; sgl-router before the model gateway binds it to 127.0.0.1 unless started with --prometheus-host 0.0.0.0: try http://127.0.0.1:29000/metrics"},
		{"triton http port", triton, "/metrics", "", signal.ReasonWrongPort,
			"scrape http://H/metrics: 400 Bad Request: this is the API port of triton, not its metrics listener (an empty body is its answer to a path it does not serve): Triton serves metrics on its metrics port, --metrics-port (default 8002, /metrics), not on its HTTP port; start tritonserver without --allow-metrics=false: try http://127.0.0.1:8002/metrics"},
		{"404 of no engine", goNotFound, "", "", signal.ReasonHTTP404,
			`scrape http://H/metrics: 404 Not Found: nothing is served at this path (the server answers "404 page not found"): check the URL's path and port; engines serve metrics at /metrics (trtllm-serve: /prometheus/metrics) on their API port, Triton and the SGLang router on a port of their own`},
		{"404 of no engine, engine given", goNotFound, "", "sglang", signal.ReasonHTTP404,
			`scrape http://H/metrics: 404 Not Found: nothing is served at this path (the server answers "404 page not found"): check the URL's path and port; engines serve metrics at /metrics (trtllm-serve: /prometheus/metrics) on their API port, Triton and the SGLang router on a port of their own; sglang: start SGLang with --enable-metrics`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := scrapeOne(t, config.Target{URL: tc.srv.URL + tc.path, Engine: tc.engine})
			if res.OK() {
				t.Fatalf("scrape of %s worked", tc.path)
			}
			got := strings.ReplaceAll(res.Err.Error(), strings.TrimPrefix(tc.srv.URL, "http://"), "H")
			if res.Reason != tc.reason || got != tc.want {
				t.Errorf("reason %s, err:\n%s\nwant reason %s, err:\n%s", res.Reason, got, tc.reason, tc.want)
			}
		})
	}
}

// connServer accepts connections on loopback and hands each, unread, to
// serve; it returns the address.
func connServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDiagnoseAnswer: plain HTTP to a TLS port in each way TLS servers
// answer it, credentials wanted or refused, and a web page instead of
// metrics each say so, with the fix.
func TestDiagnoseAnswer(t *testing.T) {
	goTLS := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(goTLS.Close)
	goTLSAddr := strings.TrimPrefix(goTLS.URL, "https://")
	// rustls and others answer a record that is no TLS with an alert.
	alert := func(desc byte) string {
		return connServer(t, func(c net.Conn) {
			c.Read(make([]byte, 4096))
			c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, desc})
		})
	}
	alertUnexpected, alertProtocol := alert(10), alert(70)
	// OpenSSL (Python's ssl: uvicorn with --ssl-keyfile) closes the
	// connection on a plain HTTP request without a byte; it completes a
	// TLS handshake.
	silentTLS := connServer(t, func(c net.Conn) {
		tc := tls.Server(c, goTLS.TLS)
		if tc.HandshakeContext(context.Background()) == nil {
			tc.Close()
		}
	})
	nginxTLS := apiServer(t, nil, reply{400, "text/html", "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", nil})
	plain := apiServer(t, map[string]reply{"/metrics": page(sglangPage)}, axum404)
	nginxBasic := apiServer(t, nil, reply{401, "text/html", "<html>\r\n<head><title>401 Authorization Required</title></head>\r\n<body>\r\n<center><h1>401 Authorization Required</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", map[string]string{"WWW-Authenticate": `Basic realm="engine metrics"`}})
	llamacppKey := apiServer(t, nil, reply{401, "application/json; charset=utf-8", `{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`, nil})
	rbac := apiServer(t, nil, reply{403, "text/plain; charset=utf-8", "Forbidden (user=system:serviceaccount:monitoring:kvwatch, verb=get, resource=, subresource=)\n", nil})
	grafana := apiServer(t, nil, reply{200, "text/html; charset=UTF-8", "<!DOCTYPE html>\n<html lang=\"en-US\">\n  <head>\n    <meta charset=\"utf-8\" />\n    <title>Grafana</title>\n", nil})
	untitled := apiServer(t, nil, reply{200, "text/html", "<html><body>Login</body></html>", nil})

	dir := t.TempDir()
	passFile := filepath.Join(dir, "pass")
	if err := os.WriteFile(passFile, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		url    string
		yaml   string // more of the target's config
		reason string
		want   string // the whole message, with the URL's host:port as H
	}{
		{"http to go tls", "http://" + goTLSAddr, "", signal.ReasonTLS,
			`scrape http://H/metrics: 400 Bad Request: the port speaks HTTPS and the URL says http (the server answers "Client sent an HTTP request to an HTTPS server."): use https://H/metrics (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)`},
		{"http to tls alert 10", "http://" + alertUnexpected, "", signal.ReasonTLS,
			"scrape http://H/metrics: the server answers with a TLS alert: the port speaks TLS and the URL says http; use https://H/metrics (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)"},
		{"http to tls alert 70", "http://" + alertProtocol, "", signal.ReasonTLS,
			"scrape http://H/metrics: the server answers with a TLS alert: the port speaks TLS and the URL says http; use https://H/metrics (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)"},
		{"http to silent tls", "http://" + silentTLS, "", signal.ReasonTLS,
			"scrape http://H/metrics: the server closed the connection without an answer, and the port speaks TLS: the URL says http; use https://H/metrics (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)"},
		{"http to nginx tls", nginxTLS.URL, "", signal.ReasonTLS,
			`scrape http://H/metrics: 400 Bad Request: the port speaks HTTPS and the URL says http (the server answers an HTML page titled "400 The plain HTTP request was sent to HTTPS port"): use https://H/metrics (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)`},
		{"https to plain", strings.Replace(plain.URL, "http://", "https://", 1), "", signal.ReasonTLS,
			"scrape https://H/metrics: the port speaks plain HTTP and the URL says https: use http://H/metrics"},
		{"basic auth wanted", nginxBasic.URL, "", signal.ReasonAuth,
			`scrape http://H/metrics: 401 Unauthorized: the server wants credentials (WWW-Authenticate: Basic realm="engine metrics") and the target sends none: set the target's basic_auth (username, password_file) in the config file (status and top read it with --config.file)`},
		{"basic auth refused", nginxBasic.URL, "basic_auth: {username: ops, password_file: " + passFile + "}", signal.ReasonAuth,
			`scrape http://H/metrics: 401 Unauthorized: the server refused the credentials of the target's basic_auth (WWW-Authenticate: Basic realm="engine metrics"): check them`},
		{"llamacpp api key", llamacppKey.URL, "", signal.ReasonAuth,
			"scrape http://H/metrics: 401 Unauthorized: the server wants credentials and the target sends none: set the target's authorization (credentials_file: a file holding the token, e.g. the engine's --api-key) or basic_auth (username, password_file) in the config file (status and top read it with --config.file)"},
		{"kube-rbac-proxy without a token", rbac.URL, "", signal.ReasonAuth,
			"scrape http://H/metrics: 403 Forbidden: the server refuses requests without credentials on this path: set the target's authorization (credentials_file: a file holding the token, e.g. the engine's --api-key) or basic_auth (username, password_file) in the config file (status and top read it with --config.file)"},
		{"kube-rbac-proxy, token not allowed", rbac.URL, "authorization: {credentials_file: " + passFile + "}", signal.ReasonAuth,
			"scrape http://H/metrics: 403 Forbidden: the server takes the credentials of the target's authorization but does not let them read /metrics: give that identity access (behind kube-rbac-proxy: get on the non-resource URL /metrics)"},
		{"web ui", grafana.URL, "", signal.ReasonNotMetrics,
			`read http://H/metrics: not a Prometheus metrics page: the body is HTML, titled "Grafana": a web UI, a login page or a proxy answers at this URL, not an engine; point the target at the engine's host and port`},
		{"login page", untitled.URL, "", signal.ReasonNotMetrics,
			"read http://H/metrics: not a Prometheus metrics page: the body is HTML: a web UI, a login page or a proxy answers at this URL, not an engine; point the target at the engine's host and port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(fmt.Sprintf("targets:\n  - url: %s\n    %s\n", tc.url, tc.yaml)), "t.yml")
			if err != nil {
				t.Fatal(err)
			}
			res := scrapeOne(t, c.Targets[0])
			if res.OK() {
				t.Fatal("scrape worked")
			}
			host := tc.url[strings.Index(tc.url, "://")+3:]
			got := strings.ReplaceAll(res.Err.Error(), host, "H")
			if res.Reason != tc.reason || got != tc.want {
				t.Errorf("reason %s, err:\n%s\nwant reason %s, err:\n%s", res.Reason, got, tc.reason, tc.want)
			}
		})
	}
}
