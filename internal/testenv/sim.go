package testenv

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/sim"
)

// Cluster starts a simulated cluster of sc with opts; it stops when the
// test ends.
func Cluster(t testing.TB, sc *sim.Scenario, opts sim.Options) *sim.Cluster {
	t.Helper()
	c, err := sim.NewCluster(sc, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c.Close()
	})
	return c
}

// Builtin is Cluster of the built-in scenario called name.
func Builtin(t testing.TB, name string, opts sim.Options) *sim.Cluster {
	t.Helper()
	sc, err := sim.BuiltinScenario(name)
	if err != nil {
		t.Fatal(err)
	}
	return Cluster(t, sc, opts)
}

// Page fetches ep's metrics page and parses it whole (no family filtered
// out), with the colon prefixes of kvwatch's adapters folded.
func Page(t testing.TB, ep sim.Endpoint) *expo.Page {
	t.Helper()
	resp, err := http.Get(ep.URL + ep.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: %v", ep.Name, err)
	}
	page, err := expo.NewParser(engine.NewRegistry().ColonPrefixes()...).Parse(body, resp.Header.Get("Content-Type"), nil)
	if err != nil {
		t.Fatalf("%s: %v", ep.Name, err)
	}
	return page
}
