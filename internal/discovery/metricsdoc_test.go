package discovery

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// TestMetricsDoc: docs/metrics.md's "Service discovery" table has a row
// for every discovery family of package signal, with its type, unit,
// labels and help text, and the families follow Prometheus' naming.
func TestMetricsDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Service discovery\n")
	if i < 0 {
		t.Fatal("docs/metrics.md has no \"## Service discovery\" section")
	}
	sec := doc[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	for _, m := range signal.Discovery() {
		row := fmt.Sprintf("| `%s` | %s | – | `%s` | %s |", m.Name, m.Type, strings.Join(m.Labels, "`, `"), m.Help)
		if !strings.Contains(sec, row) {
			t.Errorf("docs/metrics.md's Service discovery section lacks the row\n%s", row)
		}
		if !strings.HasPrefix(m.Name, "kvwatch_discovery_") || (m.Type == signal.Counter) != strings.HasSuffix(m.Name, "_total") || !m.Self {
			t.Errorf("%s: want kvwatch_discovery_*, _total exactly on counters, no identity labels", m.Name)
		}
	}
}
