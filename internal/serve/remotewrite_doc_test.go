package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// TestRemoteWriteMetricsDoc: docs/metrics.md's "Remote write" table has a
// row for every remote-write family of package signal, with its type, unit
// and help text.
func TestRemoteWriteMetricsDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Remote write\n")
	if i < 0 {
		t.Fatal("docs/metrics.md has no \"## Remote write\" section")
	}
	sec := doc[i:]
	if j := strings.Index(sec[1:], "\n## "); j >= 0 {
		sec = sec[:j+1]
	}
	for _, m := range signal.RemoteWrite() {
		unit := m.Unit
		if unit == "" {
			unit = "–"
		}
		row := fmt.Sprintf("| `%s` | %s | %s | `%s` | %s |", m.Name, m.Type, unit, signal.LabelRemote, m.Help)
		if !strings.Contains(sec, row) {
			t.Errorf("docs/metrics.md's Remote write section lacks the row\n%s", row)
		}
	}
}
