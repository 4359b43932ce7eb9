package stack

import (
	"context"
	"os/exec"
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
	promtool := testenv.Tool(t, "prometheus", "promtool")
	files, dir := generateDir(t, goldenOptions())
	for _, p := range files.Paths() {
		if p == "prometheus.yml" || (strings.HasPrefix(p, "ha/") && strings.HasSuffix(p, ".yml") && strings.Contains(p, "prometheus")) {
			out := run(t, dir, promtool, "check", "config", p)
			if !strings.Contains(out, "SUCCESS") {
				t.Errorf("promtool check config %s: %s", p, out)
			}
		}
	}
}
