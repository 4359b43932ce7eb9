package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A missing or too old prerequisite stops make with one line of its own
// saying how to get it (make then adds its usual "*** [target] Error 1").
func TestMakeSaysHowToGetMissingTools(t *testing.T) {
	mk := tool(t, "make", "make")
	oldGo := filepath.Join(t.TempDir(), "go")
	// A Go too old for go.mod, as `go env GOVERSION` would report it.
	if err := os.WriteFile(oldGo, []byte("#!/bin/sh\necho go1.21.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		// -W: as if web/package.json changed, so the npm rule runs, with
		// a PATH where npm is not.
		{"npm", []string{"-W", "web/package.json", "assets", "PATH=" + t.TempDir()},
			"make: npm not found: install Node.js with npm (Debian/Ubuntu: apt-get install npm); it fetches the web UI's uPlot"},
		{"no go", []string{"check-go", "GO=go-not-installed"},
			"make: go-not-installed not found: install Go 1.26.8 or newer (https://go.dev/dl/) and put it on PATH"},
		{"old go", []string{"check-go", "GO=" + oldGo},
			"make: Go 1.21.0 is too old: install Go 1.26.8 or newer (https://go.dev/dl/)"},
	} {
		cmd := exec.Command(mk, append([]string{"-s"}, c.args...)...)
		cmd.Dir = ".."
		// A make started from make test's own make (as in CI) would say
		// "make[1]:": run it as a top-level make.
		for _, e := range os.Environ() {
			if k, _, _ := strings.Cut(e, "="); k != "MAKELEVEL" && k != "MAKEFLAGS" && k != "MFLAGS" {
				cmd.Env = append(cmd.Env, e)
			}
		}
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err == nil || len(lines) != 2 || lines[0] != c.want || !strings.HasPrefix(lines[1], "make: *** [") {
			t.Errorf("%s: make %q: %v\n%s\nwant the line %q, then make's error line", c.name, c.args, err, out, c.want)
		}
	}
	// The go.mod's version is the one make checks for.
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\ngo 1.26.8\n") {
		t.Errorf("go.mod no longer says go 1.26.8: update GO_MIN in the Makefile and the README's prerequisites")
	}
}
