package app

import (
	"context"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/forecast"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
	"github.com/kvwatch/kvwatch/internal/web"
)

// TestProjectionFromHistory: a serve whose history holds 8 days of a
// growing decode pool exports the pool's projection on its own /metrics
// and answers it at the projection's path, the pool's dates among them;
// the live target's pool, a few seconds old, is not planned and has no
// series.
func TestProjectionFromHistory(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t)).URL
	f := filepath.Join(t.TempDir(), "kvwatch.yml")
	writeFile(t, f, "targets:\n  - {name: a, url: \""+eng+"\"}\nhistory: {retention: 8d, snapshot_file: \"\"}\n")
	s, url := started(t, f)

	// 8 days of 5-minute samples of two servers of 1Mi tokens whose
	// daily peak is 50 % + 3 % a day, with a daily cycle.
	now := time.Now()
	start := now.Add(-8 * 24 * time.Hour)
	for _, srv := range []string{"x-0", "x-1"} {
		id := []string{signal.LabelServer, srv, signal.LabelRole, "decode", signal.LabelCluster, "synth"}
		used := labels.FromStrings(append([]string{"__name__", signal.KVUsedTokens.Name}, id...)...)
		capacity := labels.FromStrings(append([]string{"__name__", signal.KVCapacityTokens.Name}, id...)...)
		for ts := start; ts.Before(now); ts = ts.Add(5 * time.Minute) {
			d := ts.Sub(start).Hours() / 24
			cycle := 0.8 + 0.2*math.Cos(2*math.Pi*(d-math.Floor(d)))
			s.History().Append(used, ts.UnixMilli(), (1<<20)*(0.5+0.03*d)*cycle)
			s.History().Append(capacity, ts.UnixMilli(), 1<<20)
		}
	}
	s.Projector().Refresh(context.Background())

	var pr forecast.Projection
	getJSON(t, url+strings.TrimPrefix(web.PathProjection, "/"), &pr)
	if !pr.Available || pr.Report == nil {
		t.Fatalf("projection unavailable: %q", pr.Reason)
	}
	states := map[string]forecast.State{}
	for _, p := range pr.Report.Pools {
		states[p.Name] = p.State
	}
	if states["decode{cluster=synth}"] != forecast.Planned {
		t.Errorf("pools %v; want decode{cluster=synth} planned", states)
	}

	resp, err := http.Get(url + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// 90 % of capacity at 50 % + 3 % a day: day 13.3, about 5 days on.
	for _, want := range []string{
		signal.PoolProjectedWarningTimestamp.Name + `{bound="expected",kv_cluster="synth",pool="",role="decode"} `,
		signal.PoolProjectedFullTimestamp.Name + `{bound="expected",kv_cluster="synth",pool="",role="decode"} `,
		signal.PoolProjectedServersToAdd.Name + `{bound="expected",kv_cluster="synth",pool="",role="decode"} `,
		signal.PoolProjectedPeakRatio.Name + `{kv_cluster="synth",pool="",role="decode"} `,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "kvwatch_pool_projected_") && !strings.Contains(line, `kv_cluster="synth"`) {
			t.Errorf("/metrics: %s: the live pool has seconds of history and no trend", strings.TrimSpace(line))
		}
	}
}
