package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// engines accepts the names "vllm" and "sglang", as a registry would.
func engines(name string) error {
	if name == "vllm" || name == "sglang" {
		return nil
	}
	return fmt.Errorf("unknown engine %q; want one of sglang, vllm", name)
}

// Every problem of the file, its engine names and its file_sd files comes
// in one pass (before, engine and file_sd problems showed only once the
// rest was fixed, and the unknown key stopped everything).
func TestLoadTargetsEveryProblemAtOnce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "sd.yml", "- targets: ['h:1', 'x/y']\n  labels: {role: chef}\n- targets: ['h:2']\n  lables: {}\n- targets: ['h:3']\n  labels: {engine: tgi}\n")
	cfg := writeFile(t, dir, "kvwatch.yml", `global:
  scrape_intervl: 5s
targets:
  - url: http://h:1
    engine: nope
  - url: http://h:9
    role: wizard
file_sd_configs:
  - files: [sd.yml, missing.json]
`)
	_, err := LoadTargets(Sources{File: cfg, Engines: engines})
	sd := filepath.Join(dir, "sd.yml")
	want := cfg + ": 7 problems:\n" +
		`  line 2: global.scrape_intervl: unknown key "scrape_intervl"; did you mean "scrape_interval"?` + "\n" +
		`  line 5: targets[0].engine: unknown engine "nope"; want one of sglang, vllm` + "\n" +
		`  line 7: targets[1].role: unknown role "wizard"; want one of prefill, decode, unified, router, cache` + "\n" +
		"  " + sd + `: line 2: unknown role "chef"; want one of prefill, decode, unified, router, cache` + "\n" +
		"  " + sd + `: line 4: unknown key "lables"; a group has targets and labels` + "\n" +
		"  " + sd + `: line 6: unknown engine "tgi"; want one of sglang, vllm` + "\n" +
		"  line 9: file_sd_configs[0].files[1]: " + filepath.Join(dir, "missing.json") + " does not exist; create it or use a glob pattern that may match nothing yet"
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 7 {
		t.Errorf("error is not a *config.Error with 7 problems: %#v", err)
	}
}

// A file with only file_sd_configs lists the file_sd targets, for every
// face (before, status and top said "no targets" for it).
func TestLoadTargetsFileSDOnly(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", `[{"targets": ["10.0.0.1:30000"], "labels": {"role": "decode", "pool": "p1", "__metrics_path__": "/m"}}]`)
	cfg := writeFile(t, dir, "kvwatch.yml", "global:\n  labels: {cluster: c1}\n  scrape_interval: 2s\nfile_sd_configs:\n  - files: ['*.json']\n")
	s, err := LoadTargets(Sources{File: cfg, Engines: engines,
		Extra: []Target{{URL: "http://127.0.0.1:1", Role: "prefill"}}, ScrapeTimeout: time.Second, Engine: "vllm"})
	if err != nil {
		t.Fatal(err)
	}
	two, one := modelSeconds(2), modelSeconds(1)
	want := []Target{
		{Name: "127.0.0.1:1", URL: "http://127.0.0.1:1", Role: "prefill", Engine: "vllm",
			Labels: map[string]string{"cluster": "c1"}, ScrapeInterval: two, ScrapeTimeout: one},
		{Name: "10.0.0.1:30000", URL: "http://10.0.0.1:30000/m", Role: "decode", Engine: "vllm",
			Labels: map[string]string{"cluster": "c1", "pool": "p1"}, ScrapeInterval: two, ScrapeTimeout: one},
	}
	if diff := cmp.Diff(want, s.Targets, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "HTTPClientConfig" }, cmp.Ignore())); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if s.FileSDTargets != 1 || len(s.Config.Targets) != 1 {
		t.Errorf("FileSDTargets = %d, config targets = %d; want 1 and 1", s.FileSDTargets, len(s.Config.Targets))
	}
	if s.FileSDChanged() {
		t.Error("FileSDChanged right after loading")
	}
	writeFile(t, dir, "b.json", `[{"targets": ["10.0.0.2:30000"]}]`)
	if !s.FileSDChanged() {
		t.Error("a new file_sd file is not a change")
	}
	n, err := s.Refresh()
	if err != nil || len(n.Targets) != 3 || n.FileSDTargets != 2 {
		t.Fatalf("Refresh = %+v, %v; want 3 targets, 2 from file_sd", n, err)
	}
}

// A config built in code takes the defaults for its zero fields, and is
// not modified.
func TestLoadTargetsFromCode(t *testing.T) {
	c := Default()
	c.Targets = []Target{{URL: "http://127.0.0.1:1"}}
	s, err := LoadTargets(Sources{Config: c, Extra: []Target{{URL: "http://127.0.0.1:2", Role: "nope"}}})
	want := `config: targets[1].role: unknown role "nope"; want one of prefill, decode, unified, router, cache`
	if err == nil || err.Error() != want {
		t.Errorf("LoadTargets = %v, %v; want %s", s, err, want)
	}
	s, err = LoadTargets(Sources{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Targets[0]; got.ScrapeInterval != modelSeconds(5) || got.ScrapeTimeout != modelSeconds(4) || got.Name != "127.0.0.1:1" {
		t.Errorf("target = %+v", got)
	}
	if c.Targets[0].Name != "" || c.Targets[0].ScrapeInterval != 0 {
		t.Errorf("LoadTargets modified its Config: %+v", c.Targets[0])
	}
}

// A file_sd group's kv_unified label sets its targets' kv_unified; a value
// other than true or false is a problem of the file, on its line.
func TestFileSDKVUnified(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "llama.yml", "- targets: ['10.0.0.1:8080']\n  labels: {kv_unified: 'true'}\n- targets: ['10.0.0.2:8080']\n- targets: ['10.0.0.3:8080']\n  labels:\n    kv_unified: '1'\n")
	cfg := writeFile(t, dir, "kvwatch.yml", "file_sd_configs:\n  - files: [llama.yml]\n")
	_, err := LoadTargets(Sources{File: cfg})
	want := filepath.Join(dir, "llama.yml") + `: line 6: kv_unified "1": want true or false (whether a llama.cpp server's slots share one KV cache)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to say %q", err, want)
	}
	writeFile(t, dir, "llama.yml", "- targets: ['10.0.0.1:8080']\n  labels: {kv_unified: 'true'}\n- targets: ['10.0.0.2:8080']\n")
	s, err := LoadTargets(Sources{File: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Targets) != 2 || s.Targets[0].KVUnified == nil || !*s.Targets[0].KVUnified || s.Targets[1].KVUnified != nil {
		t.Errorf("targets %+v, want the first kv_unified true and the second not said", s.Targets)
	}
}
