package discovery

import (
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestMetricsDoc: docs/metrics.md's "Service discovery" table has a row
// for every discovery family of package signal, with its type, unit,
// labels and help text, and the families follow Prometheus' naming.
func TestMetricsDoc(t *testing.T) {
	testenv.MetricsDocRows(t, "Service discovery", signal.Discovery())
	for _, m := range signal.Discovery() {
		if !strings.HasPrefix(m.Name, "kvwatch_discovery_") || (m.Type == signal.Counter) != strings.HasSuffix(m.Name, "_total") || !m.Self {
			t.Errorf("%s: want kvwatch_discovery_*, _total exactly on counters, no identity labels", m.Name)
		}
	}
}
