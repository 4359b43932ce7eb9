package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	promvalue "github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// RemoteWriteOptions configure a RemoteWriter.
type RemoteWriteOptions struct {
	// Remotes are the stores to push to, each complete (a config's
	// entries, or config.DefaultRemoteWrite with its URL set): an unset
	// send_interval takes the config's global.scrape_interval and an empty
	// name the URL's host and path (config.CheckRemoteWrites); every other
	// field is used as it is, 0 included.
	Remotes []config.RemoteWrite
	// Dir resolves relative file names in the remotes' auth and TLS
	// settings (the config file's directory); "" leaves them as they are.
	Dir string
	// Job and Instance are the job and instance labels of every series
	// pushed, as Prometheus would set them when scraping this serve; an
	// external label of the same name wins. Empty: not set.
	Job, Instance string
	// Logger receives structured logs; nil: the daemon's.
	Logger *slog.Logger
}

// RemoteWriter pushes what serve exports (the kvwatch_* families of
// Gatherer, and serve's own kvwatch_* families) to remote-write stores:
// every send_interval it samples the latest values at one timestamp into a
// bounded queue per store, and one sender per store sends the queue in
// order, retrying with backoff while the store is down. Series that
// disappear get a staleness marker, as Prometheus sends. The queue holds
// requests compressed; when full, the oldest are dropped and counted.
type RemoteWriter struct {
	d   *Daemon
	log *slog.Logger
	m   rwMetrics
	o   RemoteWriteOptions

	mu         sync.Mutex
	qs         []*rwQueue // the queues wanted; Run starts and stops queues to match
	registered bool       // m is registered with the daemon's own registry
	changed    chan struct{}
}

// rwMetrics are the remote writes' own metrics (package signal names them).
type rwMetrics struct {
	sent, failed, retried, dropped, bytes *prometheus.CounterVec
	queued, capacity, queueBytes, highest *prometheus.GaugeVec
}

func (m rwMetrics) collectors() multiCollector {
	return multiCollector{m.sent, m.failed, m.retried, m.dropped, m.bytes, m.queued, m.capacity, m.queueBytes, m.highest}
}

// rwBatch is one encoded request: a prompb.WriteRequest, snappy-compressed.
type rwBatch struct {
	data    []byte
	samples int
	maxTS   int64 // newest sample, ms
}

// rwQueue is one store's queue, sampler state and sender.
type rwQueue struct {
	w    *RemoteWriter
	cfg  config.RemoteWrite
	api  *remote.API
	name string
	// extra are the labels added to series lacking them (job, instance,
	// external labels), sorted by name.
	extra []labels.Label

	mu      sync.Mutex
	batches []*rwBatch // waiting, oldest first
	// queued and queuedBytes count the waiting batches and the one in
	// flight.
	queued, queuedBytes int
	wake                chan struct{}

	// Sampler state, used by the sampling goroutine only.
	prev, cur map[uint64]labels.Labels
	req       prompb.WriteRequest
	lblArena  []prompb.Label
	smpArena  []prompb.Sample
	builder   labels.ScratchBuilder

	failing bool // sender only: the last attempt failed (for logs)
}

// NewRemoteWriter checks the remotes and registers their metrics with the
// daemon's own registry. Call Run to start pushing.
func NewRemoteWriter(d *Daemon, o RemoteWriteOptions) (*RemoteWriter, error) {
	w := &RemoteWriter{d: d, log: o.Logger, o: o, changed: make(chan struct{}, 1)}
	if w.log == nil {
		w.log = d.log
	}
	l := []string{signal.LabelRemote}
	counter := func(m signal.Metric) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, l)
	}
	gauge := func(m signal.Metric) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, l)
	}
	w.m = rwMetrics{sent: counter(signal.RemoteWriteSamplesSent), failed: counter(signal.RemoteWriteSamplesFailed),
		retried: counter(signal.RemoteWriteSamplesRetried), dropped: counter(signal.RemoteWriteSamplesDropped),
		bytes: counter(signal.RemoteWriteSentBytes), queued: gauge(signal.RemoteWriteQueueSamples),
		capacity: gauge(signal.RemoteWriteQueueCapacity), queueBytes: gauge(signal.RemoteWriteQueueBytes),
		highest: gauge(signal.RemoteWriteHighestSent)}
	apply, err := w.Prepare(o.Remotes, d.Setup().Config.Global.ScrapeInterval)
	if err != nil {
		return nil, err
	}
	if err := apply(); err != nil {
		return nil, err
	}
	return w, nil
}

// Prepare checks remotes (built from config.DefaultRemoteWrite; an unset
// send_interval takes the scrape interval iv) and returns what makes them the
// writer's: a remote whose settings did not change keeps its queue; Run
// stops the queues of the others (sending what they hold for at most their
// flush_deadline) and starts the new ones. Nothing changes until apply.
func (w *RemoteWriter) Prepare(remotes []config.RemoteWrite, iv model.Duration) (apply func() error, err error) {
	rws := slices.Clone(remotes)
	for i := range rws {
		if w.o.Dir != "" {
			rws[i].HTTPClientConfig.SetDirectory(w.o.Dir)
		}
	}
	if err := config.CheckRemoteWrites(rws, iv, "remote write"); err != nil {
		return nil, err
	}
	w.mu.Lock()
	old := w.qs
	w.mu.Unlock()
	qs := make([]*rwQueue, 0, len(rws))
	for _, rw := range rws {
		i := slices.IndexFunc(old, func(q *rwQueue) bool { return reflect.DeepEqual(q.cfg, rw) })
		if i >= 0 {
			qs = append(qs, old[i])
			continue
		}
		q, err := newRWQueue(w, rw, w.o.Job, w.o.Instance)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(qs) > 0 && !w.registered {
			if err := w.d.RegisterOwn(w.m.collectors()); err != nil {
				return fmt.Errorf("register the remote-write metrics: %w", err)
			}
			w.registered = true
		}
		for _, q := range qs {
			if slices.Contains(old, q) {
				continue
			}
			// Every series exists from the start (0, not absent).
			for _, v := range []*prometheus.CounterVec{w.m.sent, w.m.failed, w.m.retried, w.m.dropped, w.m.bytes} {
				v.WithLabelValues(q.name)
			}
			w.m.queued.WithLabelValues(q.name).Set(0)
			w.m.queueBytes.WithLabelValues(q.name).Set(0)
			w.m.capacity.WithLabelValues(q.name).Set(float64(q.cfg.QueueConfig.Capacity))
		}
		w.qs = qs
		select {
		case w.changed <- struct{}{}:
		default: // Run has a change to pick up already
		}
		return nil
	}, nil
}

// Remotes returns the remotes the writer pushes to, with defaults applied.
func (w *RemoteWriter) Remotes() []config.RemoteWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]config.RemoteWrite, len(w.qs))
	for i, q := range w.qs {
		out[i] = q.cfg
	}
	return out
}

func newRWQueue(w *RemoteWriter, rw config.RemoteWrite, job, instance string) (*rwQueue, error) {
	client, err := promcfg.NewClientFromConfig(rw.HTTPClientConfig, "kvwatch_remote_write")
	if err != nil {
		return nil, fmt.Errorf("remote write %s: %w", rw.Name, err)
	}
	client.Timeout = time.Duration(rw.RemoteTimeout)
	if len(rw.Headers) > 0 {
		client.Transport = headerRoundTripper{headers: rw.Headers, next: client.Transport}
	}
	opts := []remote.APIOption{
		remote.WithAPIHTTPClient(client),
		remote.WithAPIPath(""), // the URL is the whole write endpoint
		// MaxRetries 0: retry until it works or serve stops; the bounded
		// queue, not a retry count, limits what waits.
		remote.WithAPIBackoff(remote.BackoffConfig{Min: time.Duration(rw.QueueConfig.MinBackoff),
			Max: time.Duration(rw.QueueConfig.MaxBackoff)}),
	}
	if !rw.QueueConfig.RetryOnRateLimit {
		opts = append(opts, remote.WithAPINoRetryOnRateLimit())
	}
	api, err := remote.NewAPI(rw.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("remote write %s: %w", rw.Name, err)
	}
	extra := map[string]string{}
	if job != "" {
		extra["job"] = job
	}
	if instance != "" {
		extra["instance"] = instance
	}
	for k, v := range rw.ExternalLabels {
		extra[k] = v
	}
	q := &rwQueue{w: w, cfg: rw, api: api, name: rw.Name, wake: make(chan struct{}, 1),
		prev: map[uint64]labels.Labels{}, cur: map[uint64]labels.Labels{}}
	for k, v := range extra {
		q.extra = append(q.extra, labels.Label{Name: k, Value: v})
	}
	slices.SortFunc(q.extra, func(a, b labels.Label) int { return strings.Compare(a.Name, b.Name) })
	return q, nil
}

// headerRoundTripper adds fixed headers to every request.
type headerRoundTripper struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// Run samples and sends until ctx ends, then sends what is queued for at
// most each remote's flush_deadline and drops (and counts) the rest. After
// a Prepare's apply it stops the queues no longer wanted (the same way) and
// starts the new ones.
func (w *RemoteWriter) Run(ctx context.Context) error {
	running := map[*rwQueue]func(){}
	stop := func(q *rwQueue) {
		running[q]()
		delete(running, q)
	}
	defer func() {
		var wg sync.WaitGroup
		for q, s := range running {
			wg.Add(1)
			go func() { defer wg.Done(); s() }()
			delete(running, q)
		}
		wg.Wait()
	}()
	for {
		w.mu.Lock()
		want := slices.Clone(w.qs)
		w.mu.Unlock()
		for q := range running {
			if !slices.Contains(want, q) {
				stop(q)
				w.forget(q)
			}
		}
		for _, q := range want {
			if running[q] == nil {
				running[q] = q.start(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
		}
	}
}

// forget drops the metric series of a queue that went, unless a wanted
// queue has its name.
func (w *RemoteWriter) forget(q *rwQueue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.ContainsFunc(w.qs, func(o *rwQueue) bool { return o.name == q.name }) {
		return
	}
	for _, c := range w.m.collectors() {
		if v, ok := c.(interface{ DeleteLabelValues(...string) bool }); ok {
			v.DeleteLabelValues(q.name)
		}
	}
}

// start runs q's sampler and sender until ctx ends or the returned stop is
// called; stop returns once q has sent what it holds (for at most its
// flush_deadline).
func (q *rwQueue) start(ctx context.Context) (stop func()) {
	sampleCtx, cancelSample := context.WithCancel(ctx)
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	stopping := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		q.send(sendCtx, stopping)
	}()
	go func() {
		defer wg.Done()
		q.sampleLoop(sampleCtx)
		close(stopping)
		t := time.AfterFunc(time.Duration(q.cfg.QueueConfig.FlushDeadline), cancelSend)
		<-q.drained(sendCtx)
		t.Stop()
		cancelSend()
	}()
	return func() {
		cancelSample()
		wg.Wait()
	}
}

// drained returns a channel closed when the queue is empty or ctx ends.
func (q *rwQueue) drained(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			q.mu.Lock()
			n := q.queued
			q.mu.Unlock()
			if n == 0 || ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return ch
}

// sampleLoop queues one sample of every series each send_interval.
func (q *rwQueue) sampleLoop(ctx context.Context) {
	iv := time.Duration(q.cfg.SendInterval)
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			q.sample(now)
		}
	}
}

// sample encodes the latest value of every exported series at now into
// requests of at most max_samples_per_send samples and queues them; series
// sampled last time but not now get a staleness marker.
func (q *rwQueue) sample(now time.Time) {
	ts := now.UnixMilli()
	q.req.Timeseries = q.req.Timeseries[:0]
	q.lblArena, q.smpArena = q.lblArena[:0], q.smpArena[:0]
	var maxTS int64
	add := func(lset labels.Labels, v float64) {
		start := len(q.lblArena)
		lset.Range(func(l labels.Label) {
			q.lblArena = append(q.lblArena, prompb.Label{Name: l.Name, Value: l.Value})
		})
		q.smpArena = append(q.smpArena, prompb.Sample{Value: v, Timestamp: ts})
		n := len(q.smpArena)
		q.req.Timeseries = append(q.req.Timeseries, prompb.TimeSeries{
			Labels:  q.lblArena[start:len(q.lblArena):len(q.lblArena)],
			Samples: q.smpArena[n-1 : n : n]})
		maxTS = ts
		if len(q.req.Timeseries) >= q.cfg.QueueConfig.MaxSamplesPerSend {
			q.flush(maxTS)
		}
	}
	series := func(name string, v float64, pairs ...string) {
		b := &q.builder
		b.Reset()
		b.Add(model.MetricNameLabel, name)
		for i := 0; i+1 < len(pairs); i += 2 {
			if pairs[i+1] != "" {
				b.Add(pairs[i], pairs[i+1])
			}
		}
	extra:
		for _, e := range q.extra {
			for i := 0; i+1 < len(pairs); i += 2 {
				if pairs[i] == e.Name && pairs[i+1] != "" {
					continue extra // the series' own label wins
				}
			}
			b.Add(e.Name, e.Value)
		}
		b.Sort()
		lset := b.Labels()
		h := lset.Hash()
		if old, ok := q.prev[h]; ok && labels.Equal(old, lset) {
			lset = old // keep one copy of a series' labels
		}
		q.cur[h] = lset
		add(lset, v)
	}
	q.w.d.Walk(func(name string, _ bool, v float64, pairs ...string) { series(name, v, pairs...) })
	q.w.ownFamilies(func(name string, v float64, pairs ...string) { series(name, v, pairs...) })
	stale := math.Float64frombits(promvalue.StaleNaN)
	for h, lset := range q.prev {
		if _, ok := q.cur[h]; !ok {
			add(lset, stale)
		}
	}
	q.flush(maxTS)
	clear(q.prev)
	q.prev, q.cur = q.cur, q.prev
}

// ownFamilies passes serve's own kvwatch_* samples (targets, reloads,
// remote writes, history size...) to fn; process and Go metrics stay home.
func (w *RemoteWriter) ownFamilies(fn func(name string, v float64, pairs ...string)) {
	mfs, err := w.d.own.Gather()
	if err != nil {
		w.log.Warn("remote write: gather serve's own metrics", "err", err)
	}
	own := mfs[:0]
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kvwatch_") {
			own = append(own, mf)
		}
	}
	expo.Gathered(own, func(name string, _ bool, v float64, pairs []string) { fn(name, v, pairs...) })
}

// flush encodes the pending series as one request and queues it.
func (q *rwQueue) flush(maxTS int64) {
	n := len(q.req.Timeseries)
	if n == 0 {
		return
	}
	raw, err := q.req.Marshal()
	q.req.Timeseries = q.req.Timeseries[:0]
	if err != nil { // only on a bug: the request is built here
		q.w.log.Error("remote write: encode request", "remote", q.name, "err", err)
		q.w.m.dropped.WithLabelValues(q.name).Add(float64(n))
		return
	}
	q.enqueue(&rwBatch{data: snappy.Encode(nil, raw), samples: n, maxTS: maxTS})
}

// enqueue adds b, dropping the oldest waiting batches while the queue is
// over capacity.
func (q *rwQueue) enqueue(b *rwBatch) {
	q.mu.Lock()
	q.batches = append(q.batches, b)
	q.queued += b.samples
	q.queuedBytes += len(b.data)
	dropped := 0
	for q.queued > q.cfg.QueueConfig.Capacity && len(q.batches) > 0 {
		old := q.batches[0]
		q.batches[0] = nil
		q.batches = q.batches[1:]
		q.queued -= old.samples
		q.queuedBytes -= len(old.data)
		dropped += old.samples
	}
	queued, qb := q.queued, q.queuedBytes
	q.mu.Unlock()
	q.w.m.queued.WithLabelValues(q.name).Set(float64(queued))
	q.w.m.queueBytes.WithLabelValues(q.name).Set(float64(qb))
	if dropped > 0 {
		q.w.m.dropped.WithLabelValues(q.name).Add(float64(dropped))
		q.w.log.Warn("remote write queue full: dropped the oldest samples", "remote", q.name,
			"dropped", dropped, "capacity", q.cfg.QueueConfig.Capacity)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest batch off the queue (it stays counted until done);
// nil once stopping is closed and the queue is empty, or ctx ended.
func (q *rwQueue) next(ctx context.Context, stopping <-chan struct{}) *rwBatch {
	for {
		q.mu.Lock()
		if len(q.batches) > 0 {
			b := q.batches[0]
			q.batches[0] = nil
			q.batches = q.batches[1:]
			q.mu.Unlock()
			return b
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-stopping:
			q.mu.Lock()
			empty := len(q.batches) == 0
			q.mu.Unlock()
			if empty {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// done uncounts a batch that left the queue (sent, failed or dropped).
func (q *rwQueue) done(b *rwBatch) {
	q.mu.Lock()
	q.queued -= b.samples
	q.queuedBytes -= len(b.data)
	queued, qb := q.queued, q.queuedBytes
	q.mu.Unlock()
	q.w.m.queued.WithLabelValues(q.name).Set(float64(queued))
	q.w.m.queueBytes.WithLabelValues(q.name).Set(float64(qb))
}

// send sends batches in order until the queue is drained after stopping,
// or ctx ends (then what is left is dropped and counted).
func (q *rwQueue) send(ctx context.Context, stopping <-chan struct{}) {
	m := q.w.m
	for {
		b := q.next(ctx, stopping)
		if b == nil {
			break
		}
		_, err := q.api.Write(ctx, remote.WriteV1MessageType, encodedRequest(b.data),
			remote.WithWriteRetryCallback(func(err error) {
				m.retried.WithLabelValues(q.name).Add(float64(b.samples))
				if !q.failing {
					q.failing = true
					q.w.log.Warn("remote write failing; retrying with backoff, samples wait in the queue",
						"remote", q.name, "err", shorten(err))
				}
			}))
		switch {
		case err == nil:
			m.sent.WithLabelValues(q.name).Add(float64(b.samples))
			m.bytes.WithLabelValues(q.name).Add(float64(len(b.data)))
			m.highest.WithLabelValues(q.name).Set(float64(b.maxTS) / 1000)
			if q.failing {
				q.failing = false
				q.w.log.Info("remote write recovered", "remote", q.name)
			}
		case ctx.Err() != nil:
			m.dropped.WithLabelValues(q.name).Add(float64(b.samples))
		default:
			m.failed.WithLabelValues(q.name).Add(float64(b.samples))
			q.w.log.Error("remote write rejected a request; its samples are dropped", "remote", q.name,
				"samples", b.samples, "err", shorten(err))
		}
		q.done(b)
	}
	// Past the flush deadline: count what could not be sent.
	q.mu.Lock()
	left := q.batches
	q.batches = nil
	q.mu.Unlock()
	n := 0
	for _, b := range left {
		n += b.samples
		q.done(b)
	}
	if n > 0 {
		m.dropped.WithLabelValues(q.name).Add(float64(n))
		q.w.log.Warn("remote write stopped with samples unsent", "remote", q.name, "dropped", n)
	}
}

// shorten bounds an error's text (a store's answer is quoted in it) for logs.
func shorten(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// encodedRequest is a prompb.WriteRequest already encoded and compressed
// with snappy: the queue keeps requests that way (a few bytes a sample).
// It satisfies the size-and-marshal interface remote.API.Write encodes
// gogo-protobuf messages with, by decompressing into the buffer.
type encodedRequest []byte

// Size is the encoded (uncompressed) size.
func (r encodedRequest) Size() int {
	n, err := snappy.DecodedLen(r)
	if err != nil {
		return 0
	}
	return n
}

// MarshalToSizedBuffer writes the encoded request into b (len(b) == Size()).
func (r encodedRequest) MarshalToSizedBuffer(b []byte) (int, error) {
	out, err := snappy.Decode(b, r)
	if err != nil {
		return 0, fmt.Errorf("queued remote-write request: %w", err)
	}
	if len(out) != len(b) || (len(out) > 0 && &out[0] != &b[0]) {
		return 0, errors.New("queued remote-write request: size changed")
	}
	return len(out), nil
}
