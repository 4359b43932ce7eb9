package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// generateDir generates the stack for o into a new temporary directory and
// returns the files and the directory.
func generateDir(t *testing.T, o Options) (Files, string) {
	t.Helper()
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	return files, dir
}

// generateTampered generates the stack with o into a temporary directory,
// replaces the first from in its file (a path of the stack) with to, and
// returns the directory and the file's path there; the test fails if the
// file has no from.
func generateTampered(t *testing.T, o Options, file, from, to string) (dir, path string) {
	t.Helper()
	_, dir = generateDir(t, o)
	path = filepath.Join(dir, filepath.FromSlash(file))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), from, to, 1)
	if bad == string(b) {
		t.Fatalf("%s has no %q to tamper with", file, from)
	}
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// run runs a tool in dir and fails the test with its output on error.
func run(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestAlertmanagerConfigAmtool(t *testing.T) {
	amtool := testenv.Tool(t, "prometheus-alertmanager", "amtool")
	for name, o := range map[string]Options{"no receivers": {}, "all receivers": goldenOptions()} {
		t.Run(name, func(t *testing.T) {
			_, dir := generateDir(t, o)
			out := run(t, dir, amtool, "check-config", "alertmanager.yml")
			if !strings.Contains(out, "SUCCESS") {
				t.Errorf("amtool check-config: %s", out)
			}
		})
	}
}

func TestPrometheusConfigPromtool(t *testing.T) {
	versions := promVersions(t)
	files, dir := generateDir(t, goldenOptions())
	for _, v := range versions {
		for _, p := range files.Paths() {
			if p == "prometheus.yml" || (strings.HasPrefix(p, "ha/") && strings.HasSuffix(p, ".yml") && strings.Contains(p, "prometheus")) {
				out := run(t, dir, v.promtool, "check", "config", p)
				if !strings.Contains(out, "SUCCESS") {
					t.Errorf("promtool %s check config %s: %s", v.name, p, out)
				}
			}
		}
	}
}

// promVersion is one Prometheus of the test matrix (docs/stack.md,
// "Version matrix"): Debian's 2.x on PATH, and 3.x built from the Go module
// by tools/prometheus3/build.sh.
type promVersion struct {
	name                 string // "2" or "3", for subtest names
	prometheus, promtool string
}

// prometheus3Dir is where tools/prometheus3/build.sh puts its binaries:
// $KVWATCH_PROMETHEUS3_DIR, or bin/prometheus3 at the repo root.
func prometheus3Dir() string {
	if d := os.Getenv("KVWATCH_PROMETHEUS3_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "bin", "prometheus3")
}

// promVersions returns Debian's Prometheus 2 and the built Prometheus 3.
// A missing one is skipped, or fails the test with KVWATCH_REQUIRE_TOOLS=1.
func promVersions(t *testing.T) []promVersion {
	t.Helper()
	var out []promVersion
	missing := func(msg string) {
		if os.Getenv("KVWATCH_REQUIRE_TOOLS") == "1" {
			t.Fatal(msg)
		}
		t.Log(msg + "; testing without it")
	}
	p2, e1 := exec.LookPath("prometheus")
	t2, e2 := exec.LookPath("promtool")
	if e1 == nil && e2 == nil {
		out = append(out, promVersion{"2", p2, t2})
	} else {
		missing("prometheus or promtool not on PATH; install Debian package prometheus")
	}
	dir, err := filepath.Abs(prometheus3Dir())
	if err != nil {
		t.Fatal(err)
	}
	p3, t3 := filepath.Join(dir, "prometheus"), filepath.Join(dir, "promtool")
	_, e1 = os.Stat(p3)
	_, e2 = os.Stat(t3)
	if e1 == nil && e2 == nil {
		out = append(out, promVersion{"3", p3, t3})
	} else {
		missing("Prometheus 3 not built in " + dir + "; run `make prometheus3` (tools/prometheus3/build.sh)")
	}
	if len(out) == 0 {
		t.Skip("no Prometheus to test with")
	}
	return out
}
