package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLookVictoriaMetricsOrder(t *testing.T) {
	bin, cache, path := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv("PATH", path)
	t.Setenv("KVWATCH_TOOLS_CACHE", cache)
	t.Setenv("KVWATCH_VM_BIN", bin)
	exe := func(dir string) string {
		p := filepath.Join(dir, "vmalert")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p, dirs := lookVictoriaMetrics("vmalert"); p != "" || len(dirs) != 2 {
		t.Fatalf("found %q in empty dirs %v", p, dirs)
	}
	onPath := exe(path)
	if p, _ := lookVictoriaMetrics("vmalert"); p != onPath {
		t.Errorf("PATH: got %q, want %q", p, onPath)
	}
	cached := exe(filepath.Join(cache, "victoriametrics-"+VictoriaMetricsVersion))
	if p, _ := lookVictoriaMetrics("vmalert"); p != cached {
		t.Errorf("cache before PATH: got %q, want %q", p, cached)
	}
	explicit := exe(bin)
	if p, _ := lookVictoriaMetrics("vmalert"); p != explicit {
		t.Errorf("KVWATCH_VM_BIN first: got %q, want %q", p, explicit)
	}
	// A file without the execute bit is not a tool.
	if err := os.Chmod(explicit, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, _ := lookVictoriaMetrics("vmalert"); p != cached {
		t.Errorf("non-executable in KVWATCH_VM_BIN: got %q, want %q", p, cached)
	}
}

// TestVersionMatchesToolsModule: the version looked for is the one
// tools/victoriametrics/go.mod builds.
func TestVersionMatchesToolsModule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tools", "victoriametrics", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/VictoriaMetrics/VictoriaMetrics " + VictoriaMetricsVersion
	if !strings.Contains(string(b), want) {
		t.Errorf("tools/victoriametrics/go.mod does not require %s", want)
	}
}
