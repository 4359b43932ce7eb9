package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// startVM runs a single-node victoria-metrics on addr with its data in dir;
// fresh data is visible to queries at once (no latency offset, no cache).
func startVM(t *testing.T, addr, dir string) *testenv.Proc {
	t.Helper()
	bin := testenv.VictoriaMetrics(t, "victoria-metrics")
	p := testenv.Start(t, filepath.Join(dir, "victoria-metrics.log"), bin,
		"-storageDataPath="+filepath.Join(dir, "data"), "-httpListenAddr="+addr,
		"-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN",
		"-inmemoryDataFlushInterval=1s", "-retentionPeriod=1d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitOK(ctx, t, "http://"+addr+"/health")
	return p
}

// vmTimestamps returns the sample timestamps (ms) of the single series
// matching sel in victoria-metrics at addr, from its raw export API.
func vmTimestamps(t *testing.T, addr, sel string) []int64 {
	t.Helper()
	return vmExport(t, addr, sel, true)
}

// vmTimestampsAll returns the timestamps of every series matching sel.
func vmTimestampsAll(t *testing.T, addr, sel string) []int64 {
	t.Helper()
	return vmExport(t, addr, sel, false)
}

func vmExport(t *testing.T, addr, sel string, single bool) []int64 {
	t.Helper()
	// Make what was ingested searchable now (it otherwise waits in memory
	// for up to a few seconds).
	if resp, err := http.Get("http://" + addr + "/internal/force_flush"); err == nil {
		resp.Body.Close()
	}
	u := "http://" + addr + "/api/v1/export?match[]=" + url.QueryEscape(sel)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	var out []int64
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var line struct {
			Timestamps []int64 `json:"timestamps"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("export line: %v", err)
		}
		out = append(out, line.Timestamps...)
		n++
	}
	if single && n > 1 {
		t.Fatalf("%s matches %d series in the store, want 1", sel, n)
	}
	slices.Sort(out)
	return out
}

// outage is how long the store is down in TestRemoteWriteOutage: 10 s by
// default to keep the suite short; KVWATCH_RW_OUTAGE=60s runs the full
// minute of docs/stack.md with the same mechanism.
func outage(t *testing.T) time.Duration {
	if s := os.Getenv("KVWATCH_RW_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("KVWATCH_RW_OUTAGE=%q: %v", s, err)
		}
		return d
	}
	return 10 * time.Second
}

// TestRemoteWriteOutage pushes to a real victoria-metrics, stops it (as a
// store restart or a network cut does), starts it again on the same data,
// and checks that the store then holds every sample: no gap between two
// consecutive samples wider than a few send intervals, across the outage.
func TestRemoteWriteOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("the outage test takes a while; skipped with -short")
	}
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	vm := startVM(t, addr, dir)

	eng := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, eng.URL)})})
	waitFor(t, "the first scrape", d.Ready)
	const every = 250 * time.Millisecond
	rw := config.DefaultRemoteWrite()
	rw.URL, rw.Name, rw.SendInterval = "http://"+addr+"/api/v1/write", "vm", model.Duration(every)
	rw.QueueConfig.MaxBackoff = model.Duration(time.Second)
	_, stopRW := startRW(t, d, RemoteWriteOptions{Remotes: []config.RemoteWrite{rw}, Job: "kvwatch", Instance: "test:1"})

	sel := fmt.Sprintf(`%s{server="t0",job="kvwatch"}`, signal.KVCapacityTokens.Name)
	waitFor(t, "the first samples in victoria-metrics", func() bool { return len(vmTimestamps(t, addr, sel)) >= 4 })

	down := outage(t)
	vm.Stop()
	stopped := time.Now()
	time.Sleep(down)
	if q := rwMetric(t, d, signal.RemoteWriteQueueSamples, "vm"); q == 0 {
		t.Error("nothing queued while the store was down")
	}
	if r := rwMetric(t, d, signal.RemoteWriteSamplesRetried, "vm"); r == 0 {
		t.Error("no retries counted while the store was down")
	}
	vm.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitOK(ctx, t, "http://"+addr+"/health")
	waitFor(t, "the queue to drain into the restarted store", func() bool {
		return rwMetric(t, d, signal.RemoteWriteQueueSamples, "vm") == 0 &&
			rwMetric(t, d, signal.RemoteWriteHighestSent, "vm") > float64(time.Now().Add(-2*every).Unix())
	})
	highest := int64(rwMetric(t, d, signal.RemoteWriteHighestSent, "vm") * 1000)
	var ts []int64
	waitFor(t, "the newest sample sent to be searchable", func() bool {
		ts = vmTimestamps(t, addr, sel)
		return ts[len(ts)-1] >= highest
	})
	first, last := time.UnixMilli(ts[0]), time.UnixMilli(ts[len(ts)-1])
	if !first.Before(stopped) || !last.After(stopped.Add(down)) {
		t.Fatalf("samples from %s to %s do not span the outage %s to %s", first, last, stopped, stopped.Add(down))
	}
	maxGap, gapAt := time.Duration(0), time.Time{}
	for i := 1; i < len(ts); i++ {
		if g := time.Duration(ts[i]-ts[i-1]) * time.Millisecond; g > maxGap {
			maxGap, gapAt = g, time.UnixMilli(ts[i-1])
		}
	}
	// The sampler ticks every 250ms and a tick's series fit in one request:
	// a lost request leaves a hole of at least 500ms, a slow tick on a
	// loaded machine a little over 250ms. 1s allows for load.
	if maxGap > 4*every {
		t.Errorf("widest gap between samples is %s (send interval %s): samples were lost across the %s outage", maxGap, every, down)
	}
	want := int(last.Sub(first)/every) + 1
	if len(ts) < want*9/10 {
		t.Errorf("%d samples from %s to %s, want about %d (one every %s)", len(ts), first.Format(time.TimeOnly), last.Format(time.TimeOnly), want, every)
	}
	// The exact count: stop the writer (it flushes), and the store holds
	// every sample the writer had accepted, of every series it pushed.
	stopRW()
	var stored int
	waitFor(t, "the store to hold every sample sent", func() bool {
		stored = len(vmTimestampsAll(t, addr, `{instance="test:1"}`))
		return float64(stored) >= rwMetric(t, d, signal.RemoteWriteSamplesSent, "vm")
	})
	if sent := rwMetric(t, d, signal.RemoteWriteSamplesSent, "vm"); float64(stored) != sent {
		t.Errorf("the store holds %d samples, the writer counts %g accepted", stored, sent)
	}
	for _, m := range []signal.Metric{signal.RemoteWriteSamplesDropped, signal.RemoteWriteSamplesFailed} {
		if v := rwMetric(t, d, m, "vm"); v != 0 {
			t.Errorf("%s = %g, want 0", m.Name, v)
		}
	}
	t.Logf("outage %s from %s: %d samples of one series from %s to %s, widest gap %s after %s; %d samples of all series stored, as many as accepted; %g samples retried",
		down, stopped.Format("15:04:05.000"), len(ts), first.Format(time.TimeOnly), last.Format(time.TimeOnly), maxGap, gapAt.Format("15:04:05.000"), stored,
		rwMetric(t, d, signal.RemoteWriteSamplesRetried, "vm"))
}
