package testenv

import (
	"io"
	"net"
	"net/http"
	"testing"
)

func TestFreeAddrRefusesConnections(t *testing.T) {
	a := FreeAddr(t)
	if host, _, err := net.SplitHostPort(a); err != nil || host != "127.0.0.1" {
		t.Fatalf("FreeAddr = %q, want 127.0.0.1:port", a)
	}
	if c, err := net.Dial("tcp", a); err == nil {
		c.Close()
		t.Errorf("something listens on %s", a)
	}
}

func TestEngineServer(t *testing.T) {
	s := EngineServer(t, "/metrics", []byte("a 1\n"))
	get := func(p string) (int, string) {
		r, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || body != "a 1\n" {
		t.Errorf("/metrics = %d %q, want 200 \"a 1\\n\"", code, body)
	}
	if code, _ := get("/other"); code != 404 {
		t.Errorf("/other = %d, want 404", code)
	}
	any := EngineServer(t, "", []byte("b 2\n"))
	r, err := http.Get(any.URL + "/prometheus/metrics")
	if err != nil || r.StatusCode != 200 {
		t.Errorf("any path: %v, %v; want 200", r, err)
	}
	r.Body.Close()
}

func TestToolFindsOneOfItsNames(t *testing.T) {
	if p := Tool(t, "coreutils", "no-such-tool-kvwatch", "sh"); p == "" {
		t.Error("Tool found no sh")
	}
}
