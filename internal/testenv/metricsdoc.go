package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// MetricsDocRows checks that the "## section" section of docs/metrics.md
// has a row for each family of ms, written from package signal:
// | `name` | type | unit (– for none) | `label`, `label` | help |
// It is for the sections written by hand beside the generated tables
// (those are internal/serve's TestMetricsDoc).
func MetricsDocRows(t testing.TB, section string, ms []signal.Metric) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## "+section+"\n")
	if i < 0 {
		t.Fatalf("docs/metrics.md has no %q section", "## "+section)
	}
	sec := doc[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	if len(ms) == 0 {
		t.Fatalf("no families to look for in docs/metrics.md's %s section", section)
	}
	for _, m := range ms {
		unit, labels := m.Unit, "–"
		if unit == "" {
			unit = "–"
		}
		if len(m.Labels) > 0 {
			labels = "`" + strings.Join(m.Labels, "`, `") + "`"
		}
		row := fmt.Sprintf("| `%s` | %s | %s | %s | %s |", m.Name, m.Type, unit, labels, m.Help)
		if !strings.Contains(sec, row) {
			t.Errorf("docs/metrics.md's %s section lacks the row\n%s", section, row)
		}
	}
}
