package serve

import (
	"context"
	"encoding/pem"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promvalue "github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// received is what a remote-write receiver got: every sample by series.
type received struct {
	mu      sync.Mutex
	reqs    int
	samples map[string][]prompb.Sample // key: sorted name=value pairs
	labels  map[string]map[string]string
	headers http.Header
	user    string
	pass    string
}

func seriesKey(ls []prompb.Label) string {
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, l.Name+"="+l.Value)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// find returns the samples of the series with name and the given labels.
func (r *received) find(name string, want map[string]string) (map[string]string, []prompb.Sample, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ls map[string]string
	var ss []prompb.Sample
	n := 0
series:
	for k, l := range r.labels {
		if l["__name__"] != name {
			continue
		}
		for a, b := range want {
			if l[a] != b {
				continue series
			}
		}
		n++
		ls, ss = l, append([]prompb.Sample(nil), r.samples[k]...)
	}
	return ls, ss, n
}

// receiver decodes remote-write 1.0 requests with Prometheus' prompb and
// answers status() (200 by default).
func receiver(t *testing.T, status func() int) (*received, http.HandlerFunc) {
	r := &received{samples: map[string][]prompb.Sample{}, labels: map[string]map[string]string{}}
	return r, func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if s := status(); s != http.StatusOK {
			http.Error(w, "refused by the test", s)
			return
		}
		raw, err := snappy.Decode(nil, body)
		if err != nil {
			t.Errorf("request body is not snappy: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var wr prompb.WriteRequest
		if err := wr.Unmarshal(raw); err != nil {
			t.Errorf("request is not a prompb.WriteRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reqs++
		r.headers = req.Header.Clone()
		r.user, r.pass, _ = req.BasicAuth()
		for _, ts := range wr.Timeseries {
			for i := 1; i < len(ts.Labels); i++ {
				if ts.Labels[i-1].Name >= ts.Labels[i].Name {
					t.Errorf("labels not sorted: %v", ts.Labels)
				}
			}
			k := seriesKey(ts.Labels)
			if r.labels[k] == nil {
				m := map[string]string{}
				for _, l := range ts.Labels {
					m[l.Name] = l.Value
				}
				r.labels[k] = m
			}
			r.samples[k] = append(r.samples[k], ts.Samples...)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// startRW runs a remote writer for d until the test ends, or until stop
// (which waits for the writer's flush) is called.
func startRW(t *testing.T, d *running, o RemoteWriteOptions) (w *RemoteWriter, stop func()) {
	t.Helper()
	w, err := NewRemoteWriter(d.Daemon, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return w, stop
}

func rwMetric(t *testing.T, d *running, m signal.Metric, remote string) float64 {
	t.Helper()
	return one(t, d.own, m.Name, map[string]string{signal.LabelRemote: remote})
}

func tlsCAFile(t *testing.T, s *httptest.Server) string {
	t.Helper()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return writeFile(t, t.TempDir(), "ca.pem", string(pemBytes))
}

// TestRemoteWriteRequests checks what a store receives over TLS with basic
// auth: the values of testdata/sglang-dp2.prom (worked out by hand: 2 DP
// ranks of 1,000 tokens, 250 and 500 used), job, instance and external
// labels (a series' own label wins), and a staleness marker once the
// engine is gone.
func TestRemoteWriteRequests(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	got, h := receiver(t, func() int { return http.StatusOK })
	store := httptest.NewTLSServer(h)
	t.Cleanup(store.Close)
	ca := tlsCAFile(t, store)
	pw := writeFile(t, t.TempDir(), "pw", "s3cret\n")

	cfg := configWith(t, eng.URL)
	cfg.Targets[0].Labels = map[string]string{"cluster": "c1"}
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg})})
	waitFor(t, "the first scrape", d.Ready)

	rw := config.DefaultRemoteWrite()
	rw.URL, rw.Name, rw.SendInterval = store.URL+"/api/v1/write", "central", model.Duration(200*time.Millisecond)
	rw.Headers = map[string]string{"X-Scope-OrgID": "team-a"}
	rw.ExternalLabels = map[string]string{"region": "eu", "cluster": "from-external"}
	rw.HTTPClientConfig.BasicAuth = &promcfg.BasicAuth{Username: "kv", PasswordFile: pw}
	rw.HTTPClientConfig.TLSConfig.CAFile = ca
	startRW(t, d, RemoteWriteOptions{Remotes: []config.RemoteWrite{rw}, Job: "kvwatch", Instance: "box-1:9477"})

	want := map[string]string{"server": "t0"}
	waitFor(t, "kvwatch_kv_capacity_tokens at the store", func() bool {
		_, ss, _ := got.find(signal.KVCapacityTokens.Name, want)
		return len(ss) >= 2
	})
	ls, ss, n := got.find(signal.KVCapacityTokens.Name, want)
	if n != 1 {
		t.Fatalf("%d series of kvwatch_kv_capacity_tokens{server=t0}, want 1", n)
	}
	// The target's cluster label is exported as kv_cluster: an external
	// cluster label (the Kubernetes cluster) passes through beside it.
	for k, v := range map[string]string{"job": "kvwatch", "instance": "box-1:9477", "region": "eu", "kv_cluster": "c1",
		"cluster": "from-external", "role": "unified"} {
		if ls[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, ls[k], v, ls)
		}
	}
	if ss[0].Value != 2000 {
		t.Errorf("capacity = %g, want 2000", ss[0].Value)
	}
	if ss[1].Timestamp <= ss[0].Timestamp {
		t.Errorf("timestamps %d then %d: want increasing", ss[0].Timestamp, ss[1].Timestamp)
	}
	if _, us, _ := got.find(signal.KVUsedTokens.Name, want); len(us) == 0 || us[0].Value != 750 {
		t.Errorf("used samples %v, want 750", us)
	}
	// serve's own kvwatch_* families travel too; process metrics do not.
	if _, ts, _ := got.find(signal.Targets.Name, nil); len(ts) == 0 || ts[0].Value != 1 {
		t.Errorf("kvwatch_targets samples %v, want 1", ts)
	}
	if _, _, n := got.find("go_goroutines", nil); n != 0 {
		t.Error("go_goroutines was pushed; only kvwatch_* families should be")
	}
	got.mu.Lock()
	hdr, user, pass := got.headers, got.user, got.pass
	got.mu.Unlock()
	if user != "kv" || pass != "s3cret" {
		t.Errorf("basic auth %q/%q, want kv/s3cret", user, pass)
	}
	for k, v := range map[string]string{"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
		"X-Prometheus-Remote-Write-Version": "0.1.0", "X-Scope-Orgid": "team-a"} {
		if hdr.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, hdr.Get(k), v)
		}
	}

	// The engine goes away: its KV series end with a staleness marker.
	eng.Close()
	waitFor(t, "a staleness marker for the capacity series", func() bool {
		_, ss, _ := got.find(signal.KVCapacityTokens.Name, want)
		return len(ss) > 0 && promvalue.IsStaleNaN(ss[len(ss)-1].Value)
	})
	_, ss, _ = got.find(signal.KVCapacityTokens.Name, want)
	stale := 0
	for _, s := range ss {
		if math.IsNaN(s.Value) {
			stale++
		}
	}
	if stale != 1 {
		t.Errorf("%d staleness markers, want exactly 1 (a series is marked once)", stale)
	}
	if v := rwMetric(t, d, signal.RemoteWriteSamplesFailed, "central"); v != 0 {
		t.Errorf("failed = %g, want 0", v)
	}
}

// TestRemoteWriteQueueBounds: while the store answers 503 the queue fills
// to its capacity, the oldest samples are dropped and counted, and the
// rest are sent once the store is back; a 400 drops a request as failed.
func TestRemoteWriteQueueBounds(t *testing.T) {
	eng := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	var status atomic.Int64
	status.Store(http.StatusServiceUnavailable)
	got, h := receiver(t, func() int { return int(status.Load()) })
	store := engineServerFunc(t, h)
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, eng.URL)})})
	waitFor(t, "the first scrape", d.Ready)
	const capacity = 200
	rw := config.DefaultRemoteWrite()
	rw.URL, rw.Name, rw.SendInterval = store.URL, "s", model.Duration(100*time.Millisecond)
	q := &rw.QueueConfig
	q.Capacity, q.MaxSamplesPerSend = capacity, 20
	q.MinBackoff, q.MaxBackoff = model.Duration(10*time.Millisecond), model.Duration(50*time.Millisecond)
	startRW(t, d, RemoteWriteOptions{Remotes: []config.RemoteWrite{rw}})

	waitFor(t, "dropped samples while the store is down", func() bool {
		return rwMetric(t, d, signal.RemoteWriteSamplesDropped, "s") > 0
	})
	if q := rwMetric(t, d, signal.RemoteWriteQueueSamples, "s"); q > capacity || q <= 0 {
		t.Errorf("queue holds %g samples, want 1 to %d", q, capacity)
	}
	if c := rwMetric(t, d, signal.RemoteWriteQueueCapacity, "s"); c != capacity {
		t.Errorf("capacity gauge %g, want %d", c, capacity)
	}
	if b := rwMetric(t, d, signal.RemoteWriteQueueBytes, "s"); b <= 0 {
		t.Errorf("queue bytes %g, want > 0", b)
	}
	if r := rwMetric(t, d, signal.RemoteWriteSamplesRetried, "s"); r == 0 {
		t.Error("no retries counted while the store answered 503")
	}
	if s := rwMetric(t, d, signal.RemoteWriteSamplesSent, "s"); s != 0 {
		t.Errorf("sent = %g while the store refused everything", s)
	}

	status.Store(http.StatusOK)
	waitFor(t, "samples sent once the store is back", func() bool {
		return rwMetric(t, d, signal.RemoteWriteSamplesSent, "s") > 0
	})
	// Every sample the store took is counted as sent (once the answer is
	// back: a request may be in flight while we look, so compare with the
	// store answering 503 again, nothing in flight being accepted).
	status.Store(http.StatusServiceUnavailable)
	stored := func() float64 {
		got.mu.Lock()
		defer got.mu.Unlock()
		n := 0
		for _, ss := range got.samples {
			n += len(ss)
		}
		return float64(n)
	}
	waitFor(t, "sent to count every stored sample", func() bool {
		return stored() == rwMetric(t, d, signal.RemoteWriteSamplesSent, "s")
	})
	if r := rwMetric(t, d, signal.RemoteWriteSentBytes, "s"); r <= 0 {
		t.Errorf("sent bytes %g, want > 0", r)
	}

	status.Store(http.StatusBadRequest)
	waitFor(t, "failed samples after a 400", func() bool {
		return rwMetric(t, d, signal.RemoteWriteSamplesFailed, "s") > 0
	})
	if f := rwMetric(t, d, signal.RemoteWriteSamplesFailed, "s"); math.Mod(f, 1) != 0 {
		t.Errorf("failed = %g, want whole samples", f)
	}
}

// A remote_write entry's relative password_file is found next to the
// config file (config's tests check the entries themselves).
func TestRemoteWriteConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "pw", "x")
	p := writeFile(t, dir, "kvwatch.yml", "remote_write:\n  - url: http://127.0.0.1:8428/api/v1/write\n    basic_auth: {username: a, password_file: pw}\n")
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg})})
	w, err := NewRemoteWriter(d.Daemon, RemoteWriteOptions{Remotes: cfg.RemoteWrite, Dir: filepath.Dir(p)})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.qs[0].cfg.HTTPClientConfig.BasicAuth.PasswordFile; got != filepath.Join(dir, "pw") {
		t.Errorf("password_file = %q, want %q", got, filepath.Join(dir, "pw"))
	}
}
