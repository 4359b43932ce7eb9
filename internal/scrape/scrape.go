// Package scrape fetches engines' /metrics pages and turns each into a
// normalized kv.Server through the engine adapters. Every scrape is bounded
// by its timeout and a decompressed body limit; a failure is a Result with a
// reason and a message that says how to fix it, never a panic or a hang.
// Scrape is synchronous; ScrapeAll runs many targets at once with bounded
// concurrency. It keeps no history and computes no rates.
package scrape

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alecthomas/units"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// acceptHeader asks for the Prometheus text format first; OpenMetrics is
// parsed too when a server insists on it.
const acceptHeader = "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"

// Target is one endpoint to scrape, ready to use.
type Target struct {
	// Name identifies the server in every output.
	Name string
	// URL is the metrics URL.
	URL *url.URL
	// DefaultPath is true when the config gave no path and /metrics was
	// assumed (then a JSON /metrics, as trtllm-serve serves, is retried at
	// /prometheus/metrics).
	DefaultPath bool
	// Role overrides the role the engine reports; "" keeps it.
	Role kv.Role
	// Engine forces an adapter; "" detects.
	Engine string
	// Labels are cluster, pool and model from the config.
	Labels map[string]string
	// Timeout bounds one scrape.
	Timeout time.Duration
	// Interval is how often serve scrapes it.
	Interval time.Duration
	client   *http.Client

	// MaxRunning is the configured running-request limit (0: the engine's).
	MaxRunning int
}

// Result is the outcome of one scrape.
type Result struct {
	Target *Target
	// URL is the metrics URL actually read, credentials redacted.
	URL string
	// Time is when the scrape started.
	Time     time.Time
	Duration time.Duration
	// BodyBytes is the decompressed size of the metrics body.
	BodyBytes int64
	// Server is the normalized server; nil when the scrape failed.
	Server *kv.Server
	// Err says what went wrong and how to fix it; nil on success.
	Err error
	// Reason is a short machine-readable failure class (signal.Reason*).
	Reason string
}

// OK reports whether the scrape succeeded.
func (r *Result) OK() bool { return r.Err == nil && r.Server != nil }

// Scraper scrapes targets with the adapters of one registry. It is safe
// for concurrent use.
type Scraper struct {
	reg       *engine.Registry
	bodyLimit int64
	// bodies holds *bytes.Buffer that metrics bodies are read into: a
	// scrape reuses a buffer an earlier one grew to the page's size
	// instead of growing a new slice from 512 bytes every time (io.ReadAll
	// was 45% of the bytes a scrape allocated). A buffer goes back once the
	// body is parsed; nothing keeps a reference into it (expo.Parse copies
	// what it keeps). Buffers larger than maxPooledBody are dropped.
	bodies sync.Pool
}

// maxPooledBody is the largest body buffer kept for reuse, in bytes; the
// pages kvwatch reads are 10–200 KB, and an odd huge page should not stay
// resident in the pool.
const maxPooledBody = 4 << 20

func (s *Scraper) getBuffer() *bytes.Buffer {
	if b, ok := s.bodies.Get().(*bytes.Buffer); ok {
		return b
	}
	return new(bytes.Buffer)
}

func (s *Scraper) putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBody {
		return
	}
	b.Reset()
	s.bodies.Put(b)
}

// New returns a scraper; bodyLimit bounds each decompressed body in bytes.
func New(reg *engine.Registry, bodyLimit int64) *Scraper {
	if bodyLimit <= 0 {
		bodyLimit = 32 << 20
	}
	return &Scraper{reg: reg, bodyLimit: bodyLimit}
}

// Registry returns the scraper's adapters.
func (s *Scraper) Registry() *engine.Registry { return s.reg }

// Targets builds scrape targets from the config's targets. Targets with the
// same HTTP client settings share one client (and its connection pool).
func Targets(cfg *config.Config) ([]*Target, error) {
	clients := map[string]*http.Client{}
	out := make([]*Target, 0, len(cfg.Targets))
	for i := range cfg.Targets {
		t, err := newTarget(&cfg.Targets[i], clients)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// NewTarget builds one target (used by /probe and the status command line).
func NewTarget(ct *config.Target) (*Target, error) {
	return newTarget(ct, map[string]*http.Client{})
}

func newTarget(ct *config.Target, clients map[string]*http.Client) (*Target, error) {
	u, err := config.ParseTargetURL(ct.URL)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", ct.Name, err)
	}
	t := &Target{Name: ct.Name, URL: u, Role: kv.Role(ct.Role), Engine: ct.Engine, Labels: ct.Labels,
		Timeout: time.Duration(ct.ScrapeTimeout), Interval: time.Duration(ct.ScrapeInterval),
		MaxRunning: ct.MaxRunningRequests}
	if t.Name == "" {
		t.Name = u.Host
	}
	if t.Timeout <= 0 {
		t.Timeout = 4 * time.Second
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
		t.DefaultPath = true
	}
	key, err := yaml.Marshal(ct.HTTPClientConfig)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	c, ok := clients[string(key)]
	if !ok {
		c, err = promcfg.NewClientFromConfig(ct.HTTPClientConfig, "kvwatch",
			promcfg.WithUserAgent("kvwatch/"+version.Version))
		if err != nil {
			return nil, fmt.Errorf("target %s: http client: %w", t.Name, err)
		}
		clients[string(key)] = c
	}
	t.client = c
	return t, nil
}

// SetPath sets the metrics path of a target whose config gave none, e.g.
// to an adapter's MetricsPath.
func (t *Target) SetPath(p string) {
	t.URL.Path = p
	t.DefaultPath = false
}

// Scrape fetches and normalizes one target.
func (s *Scraper) Scrape(ctx context.Context, t *Target) Result {
	res := Result{Target: t, Time: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	s.scrape(ctx, t, &res)
	res.Duration = time.Since(res.Time)
	return res
}

func (s *Scraper) scrape(ctx context.Context, t *Target, res *Result) {
	var forced engine.Adapter
	if t.Engine != "" {
		a, err := s.reg.ByName(t.Engine)
		if err != nil {
			res.fail(signal.ReasonOther, fmt.Errorf("target %s: %w", t.Name, err))
			return
		}
		forced = a
	}
	u := *t.URL
	if forced != nil && t.DefaultPath {
		if mp, ok := forced.(engine.MetricsPath); ok {
			u.Path = mp.MetricsPath()
		}
	}
	res.URL = u.Redacted()
	buf := s.getBuffer()
	body, ctype, reason, err := s.fetch(ctx, t, &u, forced, buf)
	res.BodyBytes = int64(len(body))
	if err != nil {
		s.putBuffer(buf)
		res.fail(reason, err)
		return
	}
	page, err := expo.Parse(body, ctype, s.reg.Want)
	if err != nil && errors.Is(err, expo.ErrNotMetrics) && t.DefaultPath && forced == nil && strings.Contains(err.Error(), "JSON") {
		// trtllm-serve answers /metrics with JSON and serves Prometheus
		// metrics at /prometheus/metrics.
		alt := u
		alt.Path = "/prometheus/metrics"
		buf.Reset()
		if b2, ct2, _, err2 := s.fetch(ctx, t, &alt, forced, buf); err2 == nil {
			if p2, err3 := expo.Parse(b2, ct2, s.reg.Want); err3 == nil {
				page, err, u, res.BodyBytes, res.URL = p2, nil, alt, int64(len(b2)), alt.Redacted()
			}
		}
	}
	// The page holds copies of what it keeps: the body is no longer used.
	s.putBuffer(buf)
	if err != nil {
		reason := signal.ReasonParse
		if errors.Is(err, expo.ErrNotMetrics) {
			reason = signal.ReasonNotMetrics
		}
		res.fail(reason, fmt.Errorf("read %s: %w", u.Redacted(), err))
		return
	}
	a := forced
	if a == nil {
		a, err = s.reg.Detect(page)
		if err != nil {
			res.fail(signal.ReasonUnknownEngine, fmt.Errorf("read %s: %w", u.Redacted(), err))
			return
		}
	}
	in := engine.Input{Page: page}
	if ep, ok := a.(engine.ExtraPaths); ok {
		in.Extra = map[string][]byte{}
		for _, p := range ep.ExtraPaths() {
			x := u
			x.Path = strings.TrimSuffix(u.Path, "/metrics")
			if strings.HasSuffix(u.Path, "/prometheus/metrics") {
				x.Path = strings.TrimSuffix(u.Path, "/prometheus/metrics")
			}
			x.Path += p
			x.RawQuery = ""
			// Extra bodies go to the adapter: a buffer of their own each,
			// not pooled.
			if b, _, _, err := s.fetch(ctx, t, &x, a, new(bytes.Buffer)); err == nil {
				in.Extra[p] = b
			}
		}
	}
	srv, err := a.Normalize(in)
	if err != nil {
		res.fail(signal.ReasonParse, fmt.Errorf("read %s as %s: %w", u.Redacted(), a.Name(), err))
		return
	}
	if t.Role != "" {
		srv.Role = t.Role
	} else if srv.Role == "" {
		srv.Role = kv.RoleUnified
	}
	if m := t.Labels["model"]; m != "" && srv.Model == "" {
		srv.Model = m
	}
	srv.Check()
	res.Server = &srv
}

func (r *Result) fail(reason string, err error) {
	r.Reason, r.Err = reason, err
}

// fetch GETs u and reads the decompressed body, bounded by the limit, into
// buf (empty), returning buf's bytes: they are valid until buf is reused.
func (s *Scraper) fetch(ctx context.Context, t *Target, u *url.URL, hint engine.Adapter, buf *bytes.Buffer) (body []byte, contentType, reason string, err error) {
	where := u.Redacted()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", signal.ReasonOther, fmt.Errorf("scrape %s: %w", where, err)
	}
	req.Header.Set("Accept", acceptHeader)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := t.client.Do(req)
	if err != nil {
		reason, err := classify(ctx, err, t)
		return nil, "", reason, fmt.Errorf("scrape %s: %w", where, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusNotImplemented {
		return nil, "", signal.ReasonHTTP404, fmt.Errorf("scrape %s: %s: metrics are off; %s", where, resp.Status, disabledHint(hint))
	}
	if resp.StatusCode/100 != 2 {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		msg := strings.Join(strings.Fields(string(snippet)), " ")
		if msg != "" {
			msg = ": " + msg
		}
		return nil, "", signal.ReasonHTTPError, fmt.Errorf("scrape %s: %s%s", where, resp.Status, msg)
	}
	var r io.Reader = resp.Body
	if strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, "", signal.ReasonParse, fmt.Errorf("scrape %s: bad gzip body: %w", where, err)
		}
		defer gz.Close()
		r = gz
	}
	if n := resp.ContentLength; r == resp.Body && n > 0 && n <= s.bodyLimit {
		// Room for the whole body plus the final read that sees EOF.
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(r, s.bodyLimit+1))
	body = buf.Bytes()
	if err != nil {
		reason, err := classify(ctx, err, t)
		if reason == signal.ReasonOther {
			reason = signal.ReasonTruncated
			err = fmt.Errorf("the body was cut short after %d bytes (%w); the server closed the connection mid-body", len(body), err)
		}
		return nil, "", reason, fmt.Errorf("scrape %s: %w", where, err)
	}
	if int64(len(body)) > s.bodyLimit {
		return nil, "", signal.ReasonTooLarge, fmt.Errorf("scrape %s: body is over the %s limit (after decompression); raise global.body_size_limit if the page is really this big", where, units.Base2Bytes(s.bodyLimit))
	}
	return body, resp.Header.Get("Content-Type"), "", nil
}

// classify maps a transport error to a reason and a message that says what to do.
func classify(ctx context.Context, err error, t *Target) (string, error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return signal.ReasonTimeout, fmt.Errorf("no complete answer within %s; the server is overloaded or hung (llama.cpp blocks /metrics during decoding): raise scrape_timeout or check the server", t.Timeout)
	case errors.Is(err, context.Canceled):
		return signal.ReasonOther, fmt.Errorf("canceled")
	case errors.Is(err, syscall.ECONNREFUSED):
		return signal.ReasonRefused, fmt.Errorf("connection refused: is the server running and listening on %s?", t.URL.Host)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return signal.ReasonRefused, fmt.Errorf("cannot resolve host %q: check the target URL", dnsErr.Name)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) {
		return signal.ReasonOther, err
	}
	return signal.ReasonOther, err
}

// disabledHint says how to turn metrics on: for the known engine, or for all.
func disabledHint(a engine.Adapter) string {
	if a != nil {
		if h, ok := a.(engine.DisabledHint); ok {
			return h.DisabledHint()
		}
	}
	return "turn the engine's metrics on (SGLang and LMDeploy: --enable-metrics; llama.cpp: --metrics; trtllm-serve serves /prometheus/metrics) or fix the path"
}

// ScrapeAll scrapes every target with at most concurrency at once and
// returns the results in the targets' order.
func (s *Scraper) ScrapeAll(ctx context.Context, targets []*Target, concurrency int) []Result {
	if concurrency <= 0 {
		concurrency = 64
	}
	out := make([]Result, len(targets))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = s.Scrape(ctx, t)
		}()
	}
	wg.Wait()
	return out
}
