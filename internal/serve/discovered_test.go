package serve

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// The daemon asks Options.Discovered for every pipeline it applies: at
// start, after DiscoveryChanged and after a file_sd refresh, which keeps
// the discovered targets beside the new file_sd ones. A discovered target
// that goes away stops being scraped.
func TestDiscoveredTargets(t *testing.T) {
	a := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	b := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	c := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	dir := t.TempDir()
	writeFile(t, dir, "a.json", fmt.Sprintf(`[{"targets": [%q]}]`, host(a.URL)))
	cfg := writeFile(t, dir, "kvwatch.yml", "file_sd_configs:\n  - files: ['*.json']\n    refresh_interval: 1s\n")
	var mu sync.Mutex
	var found []config.Target // what discovery has found
	discovered := func(p *pipeline.Pipeline) *pipeline.Pipeline {
		mu.Lock()
		defer mu.Unlock()
		np, _, err := p.WithDiscovered(found)
		if err != nil {
			t.Error(err)
			return p
		}
		return np
	}
	set := func(urls ...string) {
		mu.Lock()
		defer mu.Unlock()
		found = nil
		for i, u := range urls {
			found = append(found, config.Target{Name: fmt.Sprintf("pod-%d", i), URL: u, Role: "decode",
				ScrapeInterval: config.Default().Global.ScrapeInterval, ScrapeTimeout: config.Default().Global.ScrapeTimeout})
		}
	}
	set(b.URL)
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg}), Discovered: discovered})
	up := func(server string) bool {
		return len(series(t, d.Gatherer(), signal.TargetUp.Name, map[string]string{"server": server})) == 1
	}
	waitFor(t, "the file_sd target and the discovered one", func() bool { return up(host(a.URL)) && up("pod-0") })

	set(b.URL, c.URL) // a scale-up
	d.DiscoveryChanged()
	waitFor(t, "the new discovered target", func() bool { return up("pod-1") })

	writeFile(t, dir, "c.json", fmt.Sprintf(`[{"targets": [%q]}]`, host(c.URL))) // a file_sd change
	waitFor(t, "the new file_sd target", func() bool { return up(host(c.URL)) })
	if !up("pod-0") || !up("pod-1") {
		t.Errorf("a file_sd refresh dropped the discovered targets")
	}

	set(c.URL) // pod-0 deleted: pod-1's address is now pod-0's
	d.DiscoveryChanged()
	waitFor(t, "pod-1 to go", func() bool { return !up("pod-1") })
	if got := one(t, d.opts.Registry, signal.Targets.Name, nil); got != 3 {
		t.Errorf("%s = %g, want 3 (2 file_sd, 1 discovered)", signal.Targets.Name, got)
	}
}
