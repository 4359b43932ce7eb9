package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestHARemoteWriteLabels (issue 15 item 7) runs a generated HA replica on
// each Prometheus of the matrix, remote-writing to a receiver in the test,
// and checks what a long-term store such as Mimir receives: every series
// carries replica and ha_cluster (Mimir's HA tracker, configured with
// ha_replica_label: replica and ha_cluster_label: ha_cluster); kvwatch's
// own cluster label keeps the series' value; series without it (up) get no
// cluster label from the HA setup.
func TestHARemoteWriteLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus; skipped with -short")
	}
	for _, v := range promVersions(t) {
		t.Run("prometheus"+v.name, func(t *testing.T) { haRemoteWrite(t, v) })
	}
}

func haRemoteWrite(t *testing.T, v promVersion) {
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# TYPE kvwatch_kv_usage_ratio gauge")
		fmt.Fprintln(w, `kvwatch_kv_usage_ratio{kv_cluster="inference-eu",pool="p1",role="decode",server="decode-0"} 0.5`)
	}))
	defer exporter.Close()
	var mu sync.Mutex
	got := map[string]map[string]string{} // metric name -> labels of one series
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, b)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req prompb.WriteRequest
		if err := req.Unmarshal(raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ts := range req.Timeseries {
			l := map[string]string{}
			for _, p := range ts.Labels {
				l[p.Name] = p.Value
			}
			got[l["__name__"]] = l
		}
	}))
	defer receiver.Close()

	prom := testenv.FreeAddr(t)
	o := Options{HA: true, HAClusterName: "kvwatch-eu", RemoteWriteURL: receiver.URL + "/api/v1/push",
		KVWatchAddress: strings.TrimPrefix(exporter.URL, "http://"), PrometheusAddress: prom,
		ScrapeInterval: dur("1s"), EvaluationInterval: dur("1s")}
	_, dir := generateDir(t, o)
	cfg := filepath.Join(dir, "ha", "prometheus-1.yml")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.prometheus, "--config.file="+cfg, "--storage.tsdb.path="+t.TempDir(),
		"--web.listen-address="+prom)
	logf, err := os.Create(filepath.Join(t.TempDir(), "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	eventually(ctx, t, "remote write of kvwatch_kv_usage_ratio and up", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return got["kvwatch_kv_usage_ratio"] != nil && got["up"] != nil, nil
	})
	mu.Lock()
	defer mu.Unlock()
	kv, up := got["kvwatch_kv_usage_ratio"], got["up"]
	for name, l := range map[string]map[string]string{"kvwatch_kv_usage_ratio": kv, "up": up} {
		if l[HAReplicaLabel] != "1" || l[HAClusterLabel] != "kvwatch-eu" {
			t.Errorf("%s remote-written with %v: want %s=1 and %s=kvwatch-eu", name, l, HAReplicaLabel, HAClusterLabel)
		}
	}
	if kv["kv_cluster"] != "inference-eu" {
		t.Errorf("kvwatch_kv_usage_ratio remote-written with kv_cluster %q, want its own inference-eu", kv["kv_cluster"])
	}
	if c, ok := up["cluster"]; ok {
		t.Errorf("up remote-written with cluster=%q: the HA setup must not add a cluster label", c)
	}
}
