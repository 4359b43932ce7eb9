package stack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestSystemdUnitsVerify runs systemd's own checker over every generated
// unit. The only finding allowed is a binary that is not installed on this
// machine (kvwatch, grafana-server): the units are meant for the target host.
func TestSystemdUnitsVerify(t *testing.T) {
	sa := testenv.Tool(t, "systemd", "systemd-analyze")
	files, err := Generate(goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var units []string
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".service") {
			continue
		}
		p := filepath.Join(dir, filepath.Base(f.Path))
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	if len(units) < 4 {
		t.Fatalf("want at least 4 units (kvwatch, prometheus, alertmanager, grafana), got %d", len(units))
	}
	out, _ := exec.Command(sa, append([]string{"verify"}, units...)...).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || strings.Contains(line, "is not executable: No such file or directory") {
			continue
		}
		t.Errorf("systemd-analyze verify: %s", line)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".service") {
			continue
		}
		for _, want := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "Restart=on-failure"} {
			if !strings.Contains(string(f.Data), want) {
				t.Errorf("%s lacks %s", f.Path, want)
			}
		}
		if !strings.Contains(string(f.Data), "DynamicUser=yes") && !strings.Contains(string(f.Data), "\nUser=") {
			t.Errorf("%s runs as root: set DynamicUser= or User=", f.Path)
		}
	}
}
