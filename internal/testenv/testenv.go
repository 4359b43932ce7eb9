// Package testenv is what kvwatch's tests share about their environment:
// finding the real tools they run (Prometheus, promtool, Alertmanager,
// Chromium, tmux, the VictoriaMetrics binaries), loopback addresses, fake
// engines serving a /metrics page, simulated clusters, a real Kubernetes
// API server (etcd and kube-apiserver), subprocesses with their logs, a
// gathered series' value (Value) and the docs/metrics.md rows of the
// families a package documents by hand (MetricsDocRows).
// Only tests import it.
package testenv

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireToolsEnv, set to 1 (as CI does), makes a missing tool fail the
// test instead of skipping it.
const RequireToolsEnv = "KVWATCH_REQUIRE_TOOLS"

// Tool returns the path of the first of names found on PATH. When none is,
// the test is skipped, or fails when KVWATCH_REQUIRE_TOOLS=1; the message
// names pkg, the Debian package(s) to install.
func Tool(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := strings.Join(names, " or ") + " not on PATH; install the Debian package " + pkg
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatal(msg + " (" + RequireToolsEnv + "=1)")
	}
	t.Skip(msg + " to run this test")
	return ""
}

// FreeAddr returns a loopback address (127.0.0.1:port) with a port nothing
// listens on right now: for a server the test starts, or as a target that
// refuses connections.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// EngineServer serves body as a Prometheus text page on loopback until the
// test ends: on path only, 404 elsewhere, or on every path when path is "".
func EngineServer(t testing.TB, path string, body []byte) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path != "" && r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

// EngineFileServer is EngineServer for the contents of file.
func EngineFileServer(t testing.TB, path, file string) *httptest.Server {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return EngineServer(t, path, b)
}
