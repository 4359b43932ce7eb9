package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// promInstant runs an instant query and returns the values of its results.
func promInstant(t *testing.T, base, q string) []float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, r.Error)
	}
	var out []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		var v model.SampleValue
		if err := json.Unmarshal([]byte(`"`+str+`"`), &v); err != nil {
			t.Fatalf("value %q: %v", str, err)
		}
		out = append(out, float64(v))
	}
	return out
}

// TestRemoteWritePrometheusReceiver pushes into the real Debian Prometheus
// (--web.enable-remote-write-receiver), which refuses out-of-order
// samples: nothing must fail, the values must be the page's (worked out by
// hand: capacity 2 × 1,000 tokens), and when the engine goes away the
// staleness marker makes the series vanish from instant queries at once
// instead of after Prometheus' 5-minute lookback.
func TestRemoteWritePrometheusReceiver(t *testing.T) {
	bin := testenv.Tool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := writeFile(t, dir, "prometheus.yml", "global: {scrape_interval: 1m}\n")
	testenv.Start(t, filepath.Join(dir, "prometheus.log"), bin, "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr,
		"--web.enable-remote-write-receiver")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prom := "http://" + addr
	testenv.WaitOK(ctx, t, prom+"/-/ready")

	eng := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, eng.URL)})})
	waitFor(t, "the first scrape", d.Ready)
	rw := config.DefaultRemoteWrite()
	rw.URL, rw.Name, rw.SendInterval = prom+"/api/v1/write", "prom", model.Duration(200*time.Millisecond)
	startRW(t, d, RemoteWriteOptions{Remotes: []config.RemoteWrite{rw}, Job: "kvwatch", Instance: "box:9477"})

	q := `kvwatch_kv_capacity_tokens{server="t0",job="kvwatch",instance="box:9477"}`
	waitFor(t, "the capacity series in Prometheus", func() bool { return len(promInstant(t, prom, q)) == 1 })
	if v := promInstant(t, prom, q); v[0] != 2000 {
		t.Errorf("capacity in Prometheus = %g, want 2000", v[0])
	}
	// Several rounds, all accepted in order.
	waitFor(t, "ten rounds sent", func() bool {
		return len(promInstant(t, prom, `count_over_time(`+q+`[1m])`)) == 1 &&
			promInstant(t, prom, `count_over_time(`+q+`[1m])`)[0] >= 10
	})
	eng.Close()
	waitFor(t, "the series to go stale in Prometheus", func() bool { return len(promInstant(t, prom, q)) == 0 })
	for _, m := range []signal.Metric{signal.RemoteWriteSamplesFailed, signal.RemoteWriteSamplesDropped} {
		if v := rwMetric(t, d, m, "prom"); v != 0 {
			t.Errorf("%s = %g, want 0 (Prometheus refused samples?)", m.Name, v)
		}
	}
}
