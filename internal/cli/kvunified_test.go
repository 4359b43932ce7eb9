package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestStatusKVUnifiedFlag: status reads a simulated llama.cpp server of 4
// slots (each holding its share) at its true capacity with --kv-unified
// false, says needs_config without it, and refuses a value other than
// true or false.
func TestStatusKVUnifiedFlag(t *testing.T) {
	sc, err := sim.GeneratedScenario(1, sim.EngineLlamaCpp, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.Cluster(t, sc, sim.Options{Seed: 5, ManualClock: true})
	c.Advance(30 * time.Second)
	ep := c.Endpoints()[0]
	var capacity float64
	for _, r := range c.Truth(ep.Name).Ranks {
		capacity += float64(r.CapacityTokens)
	}
	url := ep.URL + ep.MetricsPath
	read := func(args ...string) *kv.Server {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"status", "-o", "json"}, args...)...)
		var rep report.Report
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Servers) != 1 || rep.Servers[0].Server == nil {
			t.Fatalf("status %q: exit %d, %s %s", args, code, out, errs)
		}
		return rep.Servers[0].Server
	}
	if s := read("--kv-unified", "false", url); s.Capacity.V != capacity || !s.Capacity.OK() || s.Explained(kv.UnknownConfig) {
		t.Errorf("--kv-unified false: capacity %+v, unavailable %+v; want %v", s.Capacity, s.Unavailable, capacity)
	}
	if s := read(url); s.Capacity.OK() || !s.Explained(kv.UnknownConfig) || !strings.Contains(s.Unavailable[0].Detail, "kvwatch status and top: --kv-unified") {
		t.Errorf("no --kv-unified: capacity %+v, unavailable %+v; want unavailable, needs_config naming the flag", s.Capacity, s.Unavailable)
	}
	code, _, errs := runCLI(t, "status", "--kv-unified", "yes", url)
	if want := `--kv-unified: kv_unified "yes": want true or false`; code != 2 || !strings.Contains(errs, want) {
		t.Errorf("--kv-unified yes: exit %d, %q; want 2 and %q", code, errs, want)
	}
}
