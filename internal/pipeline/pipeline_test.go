package pipeline

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/config"
)

func writeFile(t *testing.T, dir, name, s string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every problem of the config and its file_sd files at once, each with its
// file and line.
func TestLoadProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sd.yml", "- targets: ['h:1', 'x/y']\n  labels: {role: chef}\n- targets: ['h:2']\n  lables: {}\n")
	cfg := writeFile(t, dir, "kvwatch.yml", `targets:
  - url: http://h:1
    engine: nope
file_sd_configs:
  - files: [sd.yml, missing.json]
`)
	_, err := Load(config.Sources{File: cfg}, nil)
	if err == nil {
		t.Fatal("Load accepted a bad setup")
	}
	for _, want := range []string{
		`line 3: targets[0].engine: unknown engine "nope"`,
		`sd.yml: line 2: unknown role "chef"`,
		`sd.yml: line 4: unknown key "lables"`,
		`missing.json does not exist`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Load error lacks %q:\n%v", want, err)
		}
	}
}

// The parts every face builds from a pipeline carry the config's values:
// the scraper its body limit, the tracker its headroom sizes and planning
// threshold.
func TestPartsCarryTheConfig(t *testing.T) {
	page, err := os.ReadFile("../serve/testdata/sglang-dp2.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(page) }))
	defer srv.Close()
	dir := t.TempDir()
	for _, c := range []struct {
		name, yml string
		up        bool
		sizes     []int
		threshold float64
	}{
		{"defaults", "", true, []int{8192}, 0.90},
		{"config", "global: {body_size_limit: 100MiB, headroom_tokens: [1024, 2048]}\nalerts: {kv_usage_warning: 0.77}\n", true, []int{1024, 2048}, 0.77},
		{"small body limit", "global: {body_size_limit: 200B}\n", false, []int{8192}, 0.90},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, dir, c.name+".yml", c.yml+"targets: [{url: '"+srv.URL+"'}]\n")
			p, err := Load(config.Sources{File: f}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res := p.Scraper().Scrape(t.Context(), p.Targets[0])
			if res.OK() != c.up {
				t.Fatalf("scrape of a %d-byte page: ok = %v (%v), want %v", len(page), res.OK(), res.Err, c.up)
			}
			if got := p.PlanOptions().Threshold(); got != c.threshold {
				t.Errorf("planning threshold = %g, want %g", got, c.threshold)
			}
			row := p.NewTracker().Row(&res)
			if !c.up {
				return
			}
			var sizes []int
			for _, h := range row.Headroom {
				if !h.Context {
					sizes = append(sizes, h.Tokens)
				}
			}
			if !slices.Equal(sizes, c.sizes) {
				t.Errorf("headroom sizes = %v, want %v", sizes, c.sizes)
			}
		})
	}
}

// WithDiscovered puts the discovered targets after the config's and
// file_sd's, leaves out a name already taken, replaces the discovered
// targets it had, and shares the scraper; a file_sd refresh drops them
// (the daemon adds them again).
func TestWithDiscovered(t *testing.T) {
	dir := t.TempDir()
	sd := writeFile(t, dir, "sd.yml", "- targets: ['127.0.0.1:20']\n")
	f := writeFile(t, dir, "kvwatch.yml", "targets: [{name: a, url: 'http://127.0.0.1:10'}]\nfile_sd_configs: [{files: ['"+sd+"']}]\n")
	p, err := Load(config.Sources{File: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(p *Pipeline) []string {
		var out []string
		for _, t := range p.Targets {
			out = append(out, t.Name)
		}
		return out
	}
	disc := func(names ...string) []config.Target {
		var out []config.Target
		for i, n := range names {
			out = append(out, config.Target{Name: n, URL: "http://127.0.0.2:" + string(rune('1'+i)), Role: "decode"})
		}
		return out
	}
	for _, c := range []struct {
		name       string
		discovered []config.Target
		want       []string
		taken      []string
	}{
		{"none", nil, []string{"a", "127.0.0.1:20"}, nil},
		{"two", disc("p0", "p1"), []string{"a", "127.0.0.1:20", "p0", "p1"}, nil},
		{"names taken by the config, file_sd and an earlier one", disc("a", "127.0.0.1:20", "p0", "p0"), []string{"a", "127.0.0.1:20", "p0"}, []string{"a", "127.0.0.1:20", "p0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			np, taken, err := p.WithDiscovered(c.discovered)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(np); !slices.Equal(got, c.want) {
				t.Errorf("targets = %v, want %v", got, c.want)
			}
			if !slices.Equal(taken, c.taken) {
				t.Errorf("taken = %v, want %v", taken, c.taken)
			}
			if np.Scraper() != p.Scraper() || np.FileSDTargets != 1 || np.DiscoveredTargets != len(c.want)-2 {
				t.Errorf("scraper shared %v, file_sd targets %d, discovered %d", np.Scraper() == p.Scraper(), np.FileSDTargets, np.DiscoveredTargets)
			}
			// Again on the result: the discovered targets are replaced, not added.
			again, _, err := np.WithDiscovered(disc("q0"))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := names(again), []string{"a", "127.0.0.1:20", "q0"}; !slices.Equal(got, want) {
				t.Errorf("targets after a second discovery = %v, want %v", got, want)
			}
			r, err := np.RefreshFileSD()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := names(r), []string{"a", "127.0.0.1:20"}; !slices.Equal(got, want) || r.DiscoveredTargets != 0 {
				t.Errorf("targets after a file_sd refresh = %v, want %v", got, want)
			}
		})
	}
}
