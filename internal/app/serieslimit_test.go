package app

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// A target that renames its 10 DP ranks at every scrape stays under
// history.max_series_per_target through serve, the config key reaching
// the history: its stale series are dropped (counted), a warning names
// it, and a healthy target beside it keeps every series and sample.
func TestServeHistoryLimitsLabelChurn(t *testing.T) {
	testenv.StateDir(t)
	var scrapes atomic.Int64
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := scrapes.Add(1)
		var b strings.Builder
		for _, fam := range []struct {
			name string
			v    int
		}{{"sglang:max_total_num_tokens", 1000}, {"sglang:kv_used_tokens", 250}} {
			fmt.Fprintf(&b, "# TYPE %s gauge\n", fam.name)
			for i := range 10 {
				fmt.Fprintf(&b, "%s{dp_rank=\"s%d-r%d\",tp_rank=\"0\"} %d\n", fam.name, n, i, fam.v)
			}
		}
		w.Write([]byte(b.String()))
	}))
	t.Cleanup(hostile.Close)
	healthy := testenv.EngineServer(t, "", page(t))
	// Above the healthy target's series (72 with the binding pool, the
	// drift sentinel's info and the projection's), below what the hostile
	// target's churn adds in four scrapes.
	const limit = 100
	yml := fmt.Sprintf("global: {scrape_interval: 1s, scrape_timeout: 1s}\nhistory: {max_series_per_target: %d}\n"+
		"targets:\n  - {name: healthy, url: %q}\n  - {name: hostile, url: %q}\n", limit, healthy.URL, hostile.URL)
	var logs bytes.Buffer
	s, err := newServe(t, yml, &logs, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := s.o.Registry
	evicted := func() float64 {
		return counter(t, reg, signal.HistorySeriesEvicted.Name, signal.LabelLimit, signal.LimitMaxSeriesPerTarget)
	}
	var firstHealthy int
	err = runFor(t, s, "the hostile target's stale series to be dropped", func() bool {
		if firstHealthy == 0 {
			firstHealthy = len(seriesOf(t, s, "healthy"))
		}
		return evicted() >= 30 && scrapes.Load() >= 8
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Each scrape brings 30 rank series (3 families × 10 ranks) and a few
	// of the server: without the limit the history would hold 30 more per
	// gather.
	if n := len(seriesOf(t, s, "hostile")); n > limit || n < 30 {
		t.Errorf("hostile target: %d series in the history, want at most %d (and its latest scrape's 30 rank series)", n, limit)
	}
	healthySeries := seriesOf(t, s, "healthy")
	if firstHealthy == 0 || len(healthySeries) < firstHealthy {
		t.Errorf("healthy target: %d series at the end, %d at the first gather; want all kept", len(healthySeries), firstHealthy)
	}
	if got := counter(t, reg, signal.HistorySeriesEvicted.Name, signal.LabelLimit, signal.LimitMaxSeries); got != 0 {
		t.Errorf("evicted under max_series: %g, want 0", got)
	}
	if n := strings.Count(logs.String(), "a target reached a series limit"); n != 1 || !strings.Contains(logs.String(), "target=hostile") {
		t.Errorf("logs:\n%s\nwant one series-limit warning, for target=hostile", logs.String())
	}
}

// seriesOf returns the labels of the history's series of server.
func seriesOf(t *testing.T, s *Serve, server string) []labels.Labels {
	t.Helper()
	q, err := s.History().Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, signal.LabelServer, server))
	var out []labels.Labels
	for set.Next() {
		out = append(out, set.At().Labels())
	}
	return out
}

// counter returns the counter name{label=value} of g, 0 when absent.
func counter(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	v, _ := testenv.Value(t, g, name, map[string]string{label: value})
	return v
}
