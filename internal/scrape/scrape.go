// Package scrape fetches engines' /metrics pages and turns each into a
// normalized kv.Server through the engine adapters. Every scrape is bounded
// by its timeout and a decompressed body limit; a failure is a Result with a
// reason and a message that says how to fix it, never a panic or a hang.
// Scrape is synchronous; ScrapeAll runs many targets at once with bounded
// concurrency. It keeps no history and computes no rates.
package scrape

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/alecthomas/units"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/version"
	"github.com/prometheus/prometheus/model/labels"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/freelist"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/signal"
)

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
	// Role overrides the role the engine reports; "" keeps it. A page of
	// cache tiers only (the engine reports kv.RoleCache) stays cache.
	Role kv.Role
	// Engine forces an adapter; "" detects.
	Engine string
	// Labels are cluster, pool and model from the config.
	Labels map[string]string
	// Timeout bounds one scrape. A config.Target without a scrape_timeout
	// (one built in code) gets config.DefaultScrapeTimeout.
	Timeout time.Duration
	// Interval is how often serve scrapes it.
	Interval time.Duration
	// Limits bound what the target's page may hold (config sample_limit,
	// label_limit, ...); a page over one fails with reason "limit".
	Limits config.TargetLimits
	// SecretParams are query parameters redacted in every output besides
	// those named like secrets (config global.secret_query_params).
	SecretParams []string
	// MaxRunning is the configured running-request limit (0: the engine's).
	MaxRunning int
	// KVUnified is the config's kv_unified (llama.cpp; nil: not said).
	KVUnified *bool
	// Compression asks the target for a gzip body (config
	// enable_compression); a gzip body is read either way.
	Compression bool
	client      *http.Client
	// direct: the target is read by the Scraper's direct client
	// (direct.go), not client.
	direct bool
	// layout is the structure of the target's last page, which makes
	// reading the next one cheaper (expo.Layout). A scrape takes it for
	// its parse and puts it back: one that finds none (another scrape of
	// the target, by /probe or status, holds it) reads with a new one.
	layout atomic.Pointer[expo.Layout]
	// engine is the engine of the target's last page read (srv.Engine),
	// to notice a change.
	engine atomic.Pointer[string]
	// dialect is the dialect of the target's last page and its last
	// change (the drift sentinel, dialect.go).
	dialect atomic.Pointer[dialectState]
	// version is what the scraper knows of the engine's version
	// (version.go); failed is true when the target's last scrape failed.
	version atomic.Pointer[versionState]
	failed  atomic.Bool
	// auth names what sends the target's credentials ("basic_auth", ...),
	// "" when nothing does: for the advice on a 401 or 403.
	auth string
	// proxied: the target is reached through a proxy (a direct TLS
	// handshake with its host says nothing of the URL then).
	proxied bool
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
	// PrevEngine is the engine of the target's last page when this page
	// was read as another one, "" otherwise: the server then carries a
	// kv.WarnTwoEngines warning saying so.
	PrevEngine string
	// Dialect is how the page was written (engine, metric-name
	// fingerprint, format, escaping); Changed names what of it changed
	// since the target's last page (signal.Change*), nil when nothing did.
	Dialect Dialect
	Changed []string
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
	// what it keeps). Buffers larger than maxPooledBody are dropped, and
	// at most bodiesBudget bytes of them are kept.
	bodies freelist.List[*bytes.Buffer]
	// parser shares label sets between the pages this scraper reads.
	parser *expo.Parser
	// direct keeps the connections of the targets read without net/http's
	// client (direct.go).
	direct *directPool
}

// maxPooledBody is the largest body buffer kept for reuse, in bytes; the
// pages kvwatch reads are 10–200 KB, and an odd huge page should not stay
// resident in the pool.
const maxPooledBody = 4 << 20

// bodiesBudget bounds the body buffers kept for reuse, in bytes: 16 MiB
// hold about 170 buffers of 96 KB pages, more than the scrapes that are in
// flight at once in a fleet of 10,000 targets.
const bodiesBudget = 16 << 20

func (s *Scraper) getBuffer() *bytes.Buffer {
	if b, ok := s.bodies.Get(); ok {
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

// New returns a scraper; bodyLimit bounds each decompressed body in bytes
// (0: config.DefaultBodySizeLimit, global.body_size_limit's default).
func New(reg *engine.Registry, bodyLimit int64) *Scraper {
	if bodyLimit <= 0 {
		bodyLimit = config.DefaultBodySizeLimit
	}
	return &Scraper{reg: reg, bodyLimit: bodyLimit, parser: expo.NewParser(reg.ColonPrefixes()...), direct: newDirectPool(),
		bodies: freelist.List[*bytes.Buffer]{Budget: bodiesBudget, Size: (*bytes.Buffer).Cap}}
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
		t.Limits = cfg.TargetLimits(i)
		t.SecretParams = cfg.Global.SecretQueryParams
		if cfg.Targets[i].EnableCompression == nil {
			t.Compression = cfg.Global.EnableCompression
		}
		out = append(out, t)
	}
	return out, nil
}

// NewTarget builds one target (used by /probe and the status command line),
// with its own limits over the defaults.
func NewTarget(ct *config.Target) (*Target, error) {
	return newTarget(ct, map[string]*http.Client{})
}

// NewTargetWithClient builds one target that uses c, ignoring the
// target's HTTP client settings (for /probe, whose targets share one
// bounded pool).
func NewTargetWithClient(ct *config.Target, c *http.Client) (*Target, error) {
	key, err := yaml.Marshal(ct.HTTPClientConfig)
	if err != nil {
		return nil, err
	}
	t, err := newTarget(ct, map[string]*http.Client{string(key): c})
	if t != nil {
		t.direct = false // c's pool, as the caller asks
	}
	return t, err
}

// NewPooledClient returns an HTTP client whose connections are pooled for
// every target that uses it, with at most maxIdle idle connections (2 per
// host) closed after 30s idle. It follows no redirect and uses no proxy
// from the environment.
func NewPooledClient(maxIdle int) *http.Client {
	tr := &http.Transport{
		DialContext:           headDialer(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}),
		MaxIdleConns:          maxIdle,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0,
		DisableCompression:    true, // Accept-Encoding and gzip are handled by fetch
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func newTarget(ct *config.Target, clients map[string]*http.Client) (*Target, error) {
	u, err := config.ParseTargetURL(ct.URL)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", ct.Name, err)
	}
	t := &Target{Name: ct.Name, URL: u, Role: kv.Role(ct.Role), Engine: ct.Engine, Labels: ct.Labels,
		Timeout: time.Duration(ct.ScrapeTimeout), Interval: time.Duration(ct.ScrapeInterval),
		Limits: ct.Limits.Resolve(config.Limits{}), MaxRunning: ct.MaxRunningRequests, KVUnified: ct.KVUnified}
	if ct.EnableCompression != nil {
		t.Compression = *ct.EnableCompression
	}
	if t.Name == "" {
		t.Name = u.Host
	}
	t.Name = safetext.Terminal(t.Name)
	if t.Timeout <= 0 {
		t.Timeout = config.DefaultScrapeTimeout
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
			promcfg.WithUserAgent("kvwatch/"+version.Version),
			promcfg.WithDialContextFunc(headDialer(&net.Dialer{Timeout: directDialTimeout, KeepAlive: 30 * time.Second})))
		if err != nil {
			return nil, fmt.Errorf("target %s: http client: %w", t.Name, err)
		}
		clients[string(key)] = c
	}
	t.client = c
	t.direct = plainHTTP(&ct.HTTPClientConfig, u)
	t.auth = authOf(&ct.HTTPClientConfig, u)
	t.proxied = ct.HTTPClientConfig.ProxyURL.URL != nil || ct.HTTPClientConfig.ProxyFromEnvironment
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
	failedBefore := t.failed.Load()
	s.scrape(ctx, t, &res, failedBefore)
	t.failed.Store(!res.OK())
	res.Duration = time.Since(res.Time)
	return res
}

// redact returns u as shown in every output: secrets masked (safetext.URL).
func (t *Target) redact(u *url.URL) string { return safetext.URL(u, t.SecretParams...) }

func (s *Scraper) scrape(ctx context.Context, t *Target, res *Result, failedBefore bool) {
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
	res.URL = t.redact(&u)
	buf := s.getBuffer()
	body, ctype, reason, err := s.fetch(ctx, t, &u, forced, buf)
	res.BodyBytes = int64(buf.Len())
	if err != nil {
		s.putBuffer(buf)
		res.fail(s.onPath(ctx, t, &u, forced, reason, err))
		return
	}
	lay := t.layout.Swap(nil)
	if lay == nil {
		lay = new(expo.Layout)
	}
	page, err := s.parser.ParseWith(body, ctype, s.reg.Want, lay)
	if errors.Is(err, expo.ErrJSON) && t.DefaultPath && forced == nil {
		// trtllm-serve answers /metrics with JSON and serves Prometheus
		// metrics at /prometheus/metrics. A page that fails keeps the
		// layout, so this page is the one it describes.
		alt := u
		alt.Path = "/prometheus/metrics"
		buf.Reset()
		if b2, ct2, _, err2 := s.fetch(ctx, t, &alt, forced, buf); err2 == nil {
			if p2, err3 := s.parser.ParseWith(b2, ct2, s.reg.Want, lay); err3 == nil {
				page, err, u, res.BodyBytes, res.URL, ctype = p2, nil, alt, int64(len(b2)), t.redact(&alt), ct2
			}
		}
	}
	t.layout.Store(lay)
	if errors.Is(err, expo.ErrNotMetrics) && !errors.Is(err, expo.ErrJSON) {
		// Not JSON: no second fetch has reused buf, body is this answer.
		err = notMetricsPage(err, body)
	}
	// The page holds copies of what it keeps: the body is no longer used.
	s.putBuffer(buf)
	// Nothing keeps the page once its adapter has read it (kv.Server holds
	// values and strings, no samples): its maps and array go back to the
	// parser for the next page.
	defer func() { s.parser.Release(page) }()
	if err != nil {
		reason := signal.ReasonParse
		if errors.Is(err, expo.ErrNotMetrics) {
			reason = signal.ReasonNotMetrics
		}
		res.fail(s.onPath(ctx, t, &u, forced, reason, fmt.Errorf("read %s: %w", t.redact(&u), err)))
		return
	}
	if err := checkPage(page, t.Limits); err != nil {
		res.fail(signal.ReasonLimit, fmt.Errorf("read %s: %w", t.redact(&u), err))
		return
	}
	a := forced
	if a == nil {
		a, err = s.reg.Detect(page)
		if err != nil {
			err = fmt.Errorf("read %s: %w", t.redact(&u), err)
			if page.Families == 0 {
				// An empty page (a health check's answer) says nothing of
				// an exporter at a path of its own.
				res.fail(s.onPath(ctx, t, &u, forced, signal.ReasonUnknownEngine, err))
				return
			}
			res.fail(signal.ReasonUnknownEngine, err)
			return
		}
	}
	in := engine.Input{Page: page, KVUnified: t.KVUnified}
	if ep, ok := a.(engine.ExtraPaths); ok {
		in.Extra = map[string][]byte{}
		for _, p := range ep.ExtraPaths() {
			x := u
			x.Path = siblingPath(u.Path, p)
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
		res.fail(signal.ReasonParse, fmt.Errorf("read %s as %s: %w", t.redact(&u), a.Name(), err))
		return
	}
	if l := t.Limits.Ranks; l > 0 && len(srv.Ranks) > l {
		res.fail(signal.ReasonLimit, fmt.Errorf("read %s as %s: %d ranks exceed rank_limit %d; nothing of this page is kept (raise rank_limit for this target, or globally, if the server really has that many ranks)", t.redact(&u), a.Name(), len(srv.Ranks), l))
		return
	}
	switch {
	case srv.Role == kv.RoleCache:
		// The page holds cache tiers only (LMCache, KVBM): whatever role
		// the config gives it, it has no KV pool to count in one.
	case t.Role != "":
		srv.Role = t.Role
	case srv.Role == "":
		srv.Role = kv.RoleUnified
	}
	if prev := t.engine.Load(); prev == nil || *prev != srv.Engine {
		e := srv.Engine
		t.engine.Store(&e)
		if prev != nil {
			res.PrevEngine = *prev
			whose := "the page's"
			if t.Role != "" {
				whose = "the configured one"
			}
			srv.Warn(kv.WarnTwoEngines, "the target's engine changed from %s to %s since its last page: two servers behind one address, or a restart with another engine? Its role is %s (%s)",
				*prev, srv.Engine, srv.Role, whose)
		}
	}
	// The hash of the page's names, for the version ask and the sentinel.
	names, _ := fingerprint(page, false)
	s.engineVersion(ctx, t, u, &srv, page, names, res.Time, failedBefore)
	srv.EngineVersion = safetext.Terminal(srv.EngineVersion)
	res.Dialect, res.Changed = t.sentinel(page, names, ctype, &srv, res.Time)
	if m := t.Labels[config.TargetLabelModel]; m != "" && srv.Model == "" {
		srv.Model = m
	}
	// Text from the target reaches terminals: no control characters.
	srv.Model = safetext.Terminal(srv.Model)
	for i := range srv.Ranks {
		id := &srv.Ranks[i].RankID
		id.DP, id.TP, id.PP = safetext.Terminal(id.DP), safetext.Terminal(id.TP), safetext.Terminal(id.PP)
	}
	srv.Check()
	for i := range srv.Warnings {
		srv.Warnings[i].Detail = safetext.Terminal(srv.Warnings[i].Detail)
	}
	res.Server = &srv
}

// checkPage returns an error naming the first limit the page exceeds.
func checkPage(p *expo.Page, l config.TargetLimits) error {
	const tail = "; nothing of this page is kept (raise %s for this target, or globally, if the page is really like this)"
	if l.Samples > 0 && p.Len() > l.Samples {
		return fmt.Errorf("the page holds more than sample_limit %d samples of the families kvwatch reads"+tail, l.Samples, "sample_limit")
	}
	// The page's shape bounds every label set: only a page over a limit
	// is looked at label by label, to say which series and label it is.
	sh := p.Shape()
	if (l.Labels <= 0 || sh.Labels <= l.Labels) && (l.LabelNameLength <= 0 || sh.MaxName <= l.LabelNameLength) &&
		(l.LabelValueLength <= 0 || sh.MaxValue <= l.LabelValueLength) {
		return nil
	}
	for _, name := range p.Names() {
		for _, smp := range p.Samples(name) {
			labelsN := 0
			var bad error
			smp.Labels.Range(func(lb labels.Label) {
				if bad != nil || lb.Name == model.MetricNameLabel {
					return
				}
				labelsN++
				switch {
				case l.LabelNameLength > 0 && len(lb.Name) > l.LabelNameLength:
					bad = fmt.Errorf("%s has a label name of %d bytes, over label_name_length_limit %d"+tail, name, len(lb.Name), l.LabelNameLength, "label_name_length_limit")
				case l.LabelValueLength > 0 && len(lb.Value) > l.LabelValueLength:
					bad = fmt.Errorf("%s has a %s label value of %d bytes, over label_value_length_limit %d"+tail, name, safetext.Terminal(safetext.Clip(lb.Name, 64)), len(lb.Value), l.LabelValueLength, "label_value_length_limit")
				}
			})
			if bad != nil {
				return bad
			}
			if l.Labels > 0 && labelsN > l.Labels {
				return fmt.Errorf("%s has %d labels, over label_limit %d"+tail, name, labelsN, l.Labels, "label_limit")
			}
		}
	}
	return nil
}

// safeError is an error whose text is made safe for any output: control
// characters escaped, URL secrets masked. The cause stays reachable for
// errors.Is and errors.As.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

func (r *Result) fail(reason string, err error) {
	var extra []string
	if r.Target != nil {
		extra = r.Target.SecretParams
	}
	r.Reason, r.Err = reason, &safeError{msg: safetext.Line(err.Error(), extra...), err: err}
}

// fetch GETs u and reads the decompressed body, bounded by the limit, into
// buf (empty), returning buf's bytes: they are valid until buf is reused.
// On an error buf holds what was read (for the body size).
func (s *Scraper) fetch(ctx context.Context, t *Target, u *url.URL, hint engine.Adapter, buf *bytes.Buffer) (body []byte, contentType, reason string, err error) {
	return s.fetchUpTo(ctx, t, u, hint, buf, s.bodyLimit)
}

// fetchUpTo is fetch with a body limit of its own (limit bytes after
// decompression; the too_large error names body_size_limit, the limit of
// every page).
func (s *Scraper) fetchUpTo(ctx context.Context, t *Target, u *url.URL, hint engine.Adapter, buf *bytes.Buffer, limit int64) (body []byte, contentType, reason string, err error) {
	where := t.redact(u)
	// Compression moves CPU into the engine, which compresses every page
	// (see config enable_compression); identity is the cheaper default on
	// loopback and a LAN.
	h := requestHeaders[0]
	if t.Compression {
		h = requestHeaders[1]
	}
	var resp *http.Response
	if t.direct {
		resp, err = s.direct.get(ctx, u, h)
	} else {
		var req *http.Request
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, "", signal.ReasonOther, fmt.Errorf("scrape %s: %w", where, err)
		}
		req.Header = h.Clone() // the client's round trippers may set more
		var heads headGuard
		resp, err = t.client.Do(req.WithContext(heads.trace(ctx)))
		err = heads.done(err)
	}
	if err != nil {
		reason, err := classify(ctx, err, t, u)
		if reason == signal.ReasonClosed && u.Scheme == "http" && !t.proxied && speaksTLS(ctx, hostPort(u)) {
			reason, err = signal.ReasonTLS, fmt.Errorf("the server closed the connection without an answer, and the port speaks TLS: the URL says http; use %s%s", t.redact(withScheme(u, "https")), tlsConfigNote)
		}
		return nil, "", reason, fmt.Errorf("scrape %s: %w", where, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, answerHead))
		reason, err := s.answerError(t, u, hint, resp, head)
		return nil, "", reason, fmt.Errorf("scrape %s: %w", where, err)
	}
	var r io.Reader = resp.Body
	gzipped := strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip")
	if gzipped {
		gz, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, "", signal.ReasonParse, fmt.Errorf("scrape %s: bad gzip body: %w; the server's compression is broken (or a proxy mangles it)", where, err)
		}
		defer gz.Close()
		r = gz
	}
	if n := resp.ContentLength; r == resp.Body && n > 0 && n <= limit {
		// Room for the whole body plus the final read that sees EOF.
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(r, limit+1))
	body = buf.Bytes()
	if err != nil {
		if gzipped && isGzipError(err) {
			return nil, "", signal.ReasonParse, fmt.Errorf("scrape %s: bad gzip body after %d bytes: %w; the server's compression is broken (or a proxy mangles it)", where, len(body), err)
		}
		reason, cerr := classify(ctx, err, t, u)
		if reason == signal.ReasonOther || reason == signal.ReasonClosed {
			reason = signal.ReasonTruncated
			cerr = fmt.Errorf("the body was cut short after %d bytes (%w); the server closed the connection mid-body", len(body), err)
		}
		return nil, "", reason, fmt.Errorf("scrape %s: %w", where, cerr)
	}
	if int64(len(body)) > limit {
		return nil, "", signal.ReasonTooLarge, fmt.Errorf("scrape %s: body is over the %s limit (after decompression); raise global.body_size_limit if the page is really this big", where, units.Base2Bytes(limit))
	}
	return body, resp.Header.Get("Content-Type"), "", nil
}

// requestHeaders are the headers of a scrape without compression ([0])
// and with it ([1]). They are shared: never modified.
var requestHeaders = [2]http.Header{
	{"Accept": {acceptHeader}, "Accept-Encoding": {"identity"}, "User-Agent": {"kvwatch/" + version.Version}},
	{"Accept": {acceptHeader}, "Accept-Encoding": {"gzip"}, "User-Agent": {"kvwatch/" + version.Version}},
}

// isGzipError reports a corrupt gzip stream (not a cut connection).
func isGzipError(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &ce)
}

// classify maps a transport error of a request for u to a reason and a
// message that says what to do.
func classify(ctx context.Context, err error, t *Target, u *url.URL) (string, error) {
	switch {
	case errors.Is(err, errHeadersTooLarge):
		return signal.ReasonTooLarge, fmt.Errorf("the target sent more than %s of response headers (status line and headers); kvwatch stops reading there: is it a metrics endpoint, or does a proxy in front of it send these headers?", units.Base2Bytes(maxHeaderBytes))
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
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
	switch {
	case u.Scheme == "https" && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return signal.ReasonTLS, fmt.Errorf("the port speaks plain HTTP and the URL says https: use %s", t.redact(withScheme(u, "http")))
	case u.Scheme == "http" && tlsAlert(err):
		return signal.ReasonTLS, fmt.Errorf("the server answers with a TLS alert: the port speaks TLS and the URL says http; use %s%s", t.redact(withScheme(u, "https")), tlsConfigNote)
	case tlsProblem(err):
		return signal.ReasonTLS, fmt.Errorf("TLS failed: %w; check the target's tls_config (ca_file, server_name, cert_file) or the URL's scheme", err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) {
		return signal.ReasonClosed, fmt.Errorf("the server closed the connection without an answer (%w); is it an HTTP server, and is it restarting or overloaded?", err)
	}
	return signal.ReasonOther, err
}

// tlsProblem reports a TLS handshake or certificate failure, or plain HTTP
// answered to an https URL.
func tlsProblem(err error) bool {
	var (
		certInvalid   x509.CertificateInvalidError
		unknownAuth   x509.UnknownAuthorityError
		hostname      x509.HostnameError
		recordHeader  tls.RecordHeaderError
		alert         tls.AlertError
		verify        *tls.CertificateVerificationError
		echRejected   *tls.ECHRejectionError
		systemRootErr x509.SystemRootsError
	)
	if errors.As(err, &certInvalid) || errors.As(err, &unknownAuth) || errors.As(err, &hostname) ||
		errors.As(err, &recordHeader) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &echRejected) || errors.As(err, &systemRootErr) {
		return true
	}
	// net/http turns the tls.RecordHeaderError of plain HTTP answering an
	// https URL into an error of no type: its text is all there is.
	return strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// DefaultConcurrency is how many scrapes ScrapeAll runs at once when not
// told (the status command's).
const DefaultConcurrency = 64

// ScrapeAll scrapes every target with at most concurrency at once (0:
// DefaultConcurrency) and returns the results in the targets' order.
func (s *Scraper) ScrapeAll(ctx context.Context, targets []*Target, concurrency int) []Result {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
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
