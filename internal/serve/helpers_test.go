package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

// page returns the bytes of a testdata file.
func page(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes s to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, s string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// testLogger logs to the test's output at debug level.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// running is a daemon running in the background of a test.
type running struct {
	*Daemon
	base string
	// stop ends Run and waits for it; the test's cleanup calls it too.
	stop func()
}

// start runs a daemon with opts on a free loopback port until the test
// ends; setup runs between New and Run (to add routes, shorten timeouts).
func start(t *testing.T, opts Options, setup ...func(*Daemon)) *running {
	t.Helper()
	if opts.ListenAddresses == nil {
		opts.ListenAddresses = []string{"127.0.0.1:0"}
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, f := range setup {
		f(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	r := &running{Daemon: d, base: "http://" + d.Addrs()[0].String(), stop: stop}
	waitFor(t, "the daemon to be running", func() bool { return d.running.Load() })
	return r
}

// waitFor polls cond until it holds; it fails the test after a generous
// limit (a hang, not a speed assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get fetches base+path and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// series returns the value of every series of family name in g whose labels
// include want, keyed by their full label set.
func series(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			var key []string
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			out[strings.Join(key, ",")] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// one returns the single series of name matching want, failing otherwise.
func one(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	s := series(t, g, name, want)
	if len(s) != 1 {
		t.Fatalf("%s%v: got %d series %v, want 1", name, want, len(s), s)
	}
	for _, v := range s {
		return v
	}
	return 0
}

// engineServerFunc serves h on loopback until the test ends.
func engineServerFunc(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// emptyConfig is a valid config without targets.
func emptyConfig() *config.Config { return config.Default() }

// configWith returns a config scraping urls every second, named t0, t1, ...
func configWith(t testing.TB, urls ...string) *config.Config {
	t.Helper()
	c := config.Default()
	c.Global.ScrapeInterval = model.Duration(time.Second)
	c.Global.ScrapeTimeout = model.Duration(time.Second)
	for i, u := range urls {
		c.Targets = append(c.Targets, config.Target{Name: fmt.Sprintf("t%d", i), URL: u})
	}
	return c
}

// pipe builds the pipeline of src, as package app does for serve.
func pipe(t testing.TB, src config.Sources) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.Load(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
