package testenv

import (
	"context"
	"testing"

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
