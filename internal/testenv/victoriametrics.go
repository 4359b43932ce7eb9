// The VictoriaMetrics binaries built by tools/victoriametrics/build.sh,
// found like every other tool (see Tool).

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// VictoriaMetricsVersion is the version tools/victoriametrics/go.mod pins.
const VictoriaMetricsVersion = "v1.151.0"

// VictoriaMetricsDir is where tools/victoriametrics/build.sh puts the
// binaries: $KVWATCH_TOOLS_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kvwatch/tools)
// /victoriametrics-VERSION.
func VictoriaMetricsDir() string {
	root := os.Getenv("KVWATCH_TOOLS_CACHE")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "kvwatch", "tools")
	}
	return filepath.Join(root, "victoriametrics-"+VictoriaMetricsVersion)
}

// VictoriaMetrics returns the path of a VictoriaMetrics program
// (victoria-metrics, vmagent, vmalert, vmalert-tool): from $KVWATCH_VM_BIN
// (a directory), the build cache, or PATH.
func VictoriaMetrics(t testing.TB, name string) string {
	t.Helper()
	p, dirs := lookVictoriaMetrics(name)
	if p == "" {
		missing(t, name+" not found in "+strings.Join(dirs, ", ")+" or on PATH; build it with tools/victoriametrics/build.sh")
	}
	return p
}

// lookVictoriaMetrics returns the path of name ("" if not found) and the
// directories looked in before PATH.
func lookVictoriaMetrics(name string) (string, []string) {
	var dirs []string
	if d := os.Getenv("KVWATCH_VM_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, VictoriaMetricsDir())
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, dirs
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, dirs
	}
	return "", dirs
}

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatal(msg + " (" + RequireToolsEnv + "=1)")
	}
	t.Skip(msg)
}
