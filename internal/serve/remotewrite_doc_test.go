package serve

import (
	"slices"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestRemoteWriteMetricsDoc: docs/metrics.md's "Remote write" table has a
// row for every remote-write family of package signal, with its type, unit,
// label (remote) and help text.
func TestRemoteWriteMetricsDoc(t *testing.T) {
	testenv.MetricsDocRows(t, "Remote write", signal.RemoteWrite())
	for _, m := range signal.RemoteWrite() {
		if !slices.Equal(m.Labels, []string{signal.LabelRemote}) {
			t.Errorf("%s has labels %v, want [%s]", m.Name, m.Labels, signal.LabelRemote)
		}
	}
}
