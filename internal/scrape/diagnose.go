package scrape

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	promcfg "github.com/prometheus/common/config"

	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Diagnosis of a failed scrape from what the target answered: a URL that
// is no metrics URL (an OpenAI base URL, a health check, a typo), the API
// port of an engine whose metrics are on another port, an engine whose
// metrics are off, credentials wanted, plain HTTP to a TLS port and the
// reverse, a web page. "Metrics are off" is said only of an answer that is
// the engine's own answer with its metrics off (engine.Registry.Recognize).

// answerHead is how much of a non-2xx answer's body is read to diagnose it.
const answerHead = 512

// statusError is the failure of an answer whose status is not 2xx: the
// status, then what it means and how to fix it (nil: the status says all
// there is).
type statusError struct {
	status string // "404 Not Found"
	err    error
}

func (e *statusError) Error() string {
	if e.err == nil {
		return e.status
	}
	return e.status + ": " + e.err.Error()
}

func (e *statusError) Unwrap() error { return e.err }

// answerError says what an answer with a status other than 2xx means: its
// reason and an error that says how to fix it. head is the start of its
// body (up to answerHead bytes); hint is the target's forced engine, or nil.
func (s *Scraper) answerError(t *Target, u *url.URL, hint engine.Adapter, resp *http.Response, head []byte) (string, error) {
	code := resp.StatusCode
	fail := func(reason string, format string, args ...any) (string, error) {
		return reason, &statusError{status: resp.Status, err: fmt.Errorf(format, args...)}
	}
	switch {
	case code/100 == 3:
		to := "no Location header"
		if loc, err := resp.Location(); err == nil {
			to = "to " + safetext.URL(loc, t.SecretParams...)
		}
		return fail(signal.ReasonRedirect, "redirected %s, not followed: kvwatch follows redirects only for targets with follow_redirects: true; point the target at the final URL or set it", to)
	case plainToTLS(code, head):
		return fail(signal.ReasonTLS, "the port speaks HTTPS and the URL says http (the server answers %s): use %s%s", quote(head), t.redact(withScheme(u, "https")), tlsConfigNote)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fail(signal.ReasonAuth, "%s", authAdvice(t, u, code, resp.Header.Get("WWW-Authenticate")))
	}
	rec := recognize(s.reg, hint, code, head)
	if len(rec) > 0 && rec[0].Kind == engine.AnswerMetricsOff {
		rec = slices.DeleteFunc(rec, func(r engine.Recognized) bool { return r.Kind != engine.AnswerMetricsOff })
		reason := signal.ReasonHTTP404
		if code == http.StatusNotImplemented {
			reason = signal.ReasonHTTP501
		}
		hints := make([]string, len(rec))
		for i, r := range rec {
			hints[i] = r.Hint
		}
		return fail(reason, "metrics are off; %s (%s is the answer of %s without metrics)", strings.Join(hints, ", or "), quote(head), engineNames(rec))
	}
	if len(rec) > 0 {
		r := rec[0]
		return fail(signal.ReasonWrongPort, "this is the API port of %s, not its metrics listener (%s is its answer to a path it does not serve): %s%s", r.Engine, quote(head), r.Hint, tryPort(t, u, r.MetricsPort))
	}
	if code == http.StatusNotFound {
		msg := fmt.Sprintf("nothing is served at this path (the server answers %s): check the URL's path and port; engines serve metrics at /metrics (trtllm-serve: /prometheus/metrics) on their API port, Triton and the SGLang router on a port of their own", quote(head))
		if h, ok := hint.(engine.DisabledHint); ok {
			msg += "; " + hint.Name() + ": " + h.DisabledHint()
		}
		return fail(signal.ReasonHTTP404, "%s", msg)
	}
	msg := safetext.Clip(strings.Join(strings.Fields(string(head)), " "), 200)
	if msg == "" {
		return signal.ReasonHTTPError, &statusError{status: resp.Status}
	}
	return fail(signal.ReasonHTTPError, "%s", msg)
}

// tlsConfigNote ends the advice to use https.
const tlsConfigNote = " (with the target's tls_config: ca_file, when its certificate is not signed by a CA the system trusts)"

// recognize returns the engines whose answer on a metrics path code and
// head are: of the forced engine only, when there is one.
func recognize(reg *engine.Registry, hint engine.Adapter, code int, head []byte) []engine.Recognized {
	rec := reg.Recognize(code, head)
	if hint == nil {
		return rec
	}
	for _, r := range rec {
		if r.Engine == hint.Name() {
			return []engine.Recognized{r}
		}
	}
	return nil
}

// engineNames lists the engines of rec: "a", "a or b", "a, b or c".
func engineNames(rec []engine.Recognized) string {
	names := make([]string, len(rec))
	for i, r := range rec {
		names[i] = r.Engine
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// tryPort suggests the engine's metrics listener at u's host.
func tryPort(t *Target, u *url.URL, port int) string {
	if port == 0 {
		return ""
	}
	c := *u
	c.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(port))
	c.Path, c.RawPath, c.RawQuery = "/metrics", "", ""
	return ": try " + t.redact(&c)
}

// quote shows the start of an answer's body in a message: its HTML title,
// or its text with white space collapsed and cut at 160 bytes, JSON as it
// is and other text quoted.
func quote(head []byte) string {
	if isHTML(head) {
		if title := htmlTitle(head); title != "" {
			return fmt.Sprintf("an HTML page titled %q", title)
		}
		return "an HTML page"
	}
	s := strings.Join(strings.Fields(string(head)), " ")
	if s == "" {
		return "an empty body"
	}
	s = safetext.Clip(s, 160)
	if s[0] == '{' || s[0] == '[' {
		return s
	}
	return strconv.Quote(s)
}

// isHTML reports whether a body starts as an HTML page.
func isHTML(b []byte) bool {
	b = bytes.ToLower(bytes.TrimSpace(b[:min(len(b), 64)]))
	return bytes.HasPrefix(b, []byte("<!doctype html")) || bytes.HasPrefix(b, []byte("<html")) || bytes.HasPrefix(b, []byte("<head"))
}

// htmlTitle returns the page's <title>, unescaped and cut at 60 bytes, or
// "".
func htmlTitle(b []byte) string {
	lower := bytes.ToLower(b)
	i := bytes.Index(lower, []byte("<title"))
	if i < 0 {
		return ""
	}
	j := bytes.IndexByte(lower[i:], '>')
	if j < 0 {
		return ""
	}
	start := i + j + 1
	end := bytes.Index(lower[start:], []byte("</title"))
	if end < 0 {
		return ""
	}
	title := strings.Join(strings.Fields(html.UnescapeString(string(b[start:start+end]))), " ")
	return safetext.Clip(title, 60)
}

// plainToTLS reports the answer of a TLS port to a plain HTTP request:
// Go's servers, nginx and Apache answer 400 with these words.
func plainToTLS(code int, head []byte) bool {
	if code != http.StatusBadRequest {
		return false
	}
	for _, s := range []string{"Client sent an HTTP request to an HTTPS server", "The plain HTTP request was sent to HTTPS port", "speaking plain HTTP to an SSL-enabled server port"} {
		if bytes.Contains(head, []byte(s)) {
			return true
		}
	}
	return false
}

// withScheme returns u with another scheme.
func withScheme(u *url.URL, scheme string) *url.URL {
	c := *u
	c.Scheme = scheme
	return &c
}

// authAdvice says what a 401 or 403 means for the target and which config
// keys send credentials.
func authAdvice(t *Target, u *url.URL, code int, challenge string) string {
	keys := "authorization (credentials_file: a file holding the token, e.g. the engine's --api-key) or basic_auth (username, password_file)"
	if strings.HasPrefix(strings.ToLower(challenge), "basic") {
		keys = "basic_auth (username, password_file)"
	}
	asked := ""
	if challenge != "" {
		asked = fmt.Sprintf(" (WWW-Authenticate: %s)", safetext.Clip(strings.Join(strings.Fields(challenge), " "), 80))
	}
	where := " in the config file (status and top read it with --config.file)"
	switch {
	case code == http.StatusUnauthorized && t.auth == "":
		return "the server wants credentials" + asked + " and the target sends none: set the target's " + keys + where
	case code == http.StatusUnauthorized:
		return "the server refused the credentials of the target's " + t.auth + asked + ": check them"
	case t.auth == "":
		return "the server refuses requests without credentials on this path: set the target's " + keys + where
	}
	return "the server takes the credentials of the target's " + t.auth + " but does not let them read " + u.EscapedPath() + ": give that identity access (behind kube-rbac-proxy: get on the non-resource URL " + u.EscapedPath() + ")"
}

// authOf names what sends the target's credentials, "" when nothing
// does.
func authOf(c *promcfg.HTTPClientConfig, u *url.URL) string {
	switch {
	case u.User != nil:
		return "URL (user:password@)"
	case c.BasicAuth != nil:
		return "basic_auth"
	case c.Authorization != nil:
		return "authorization"
	case c.BearerToken != "" || c.BearerTokenFile != "":
		return "bearer_token_file"
	case c.OAuth2 != nil:
		return "oauth2"
	}
	return ""
}

// Paths that are no metrics URL, and what they are.

// metricsPathName reports whether p is a path engines serve metrics at:
// its last segment is "metrics" (/metrics, /prometheus/metrics, a proxy's
// /engine-a/metrics).
func metricsPathName(p string) bool {
	return path.Base(strings.TrimSuffix(p, "/")) == "metrics"
}

// notMetricsPath says what a path that is not a metrics path is, and the
// path where the metrics would be (metricsPath: the engine's, "/metrics"
// unless it says otherwise), keeping any prefix a proxy adds.
func notMetricsPath(p, metricsPath string) (what, candidate string) {
	clean := path.Clean("/" + strings.TrimPrefix(p, "/"))
	segs := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	last := strings.ToLower(segs[len(segs)-1])
	for i, s := range segs {
		prefix := "/" + strings.Join(segs[:i], "/")
		prefix = strings.TrimSuffix(prefix, "/")
		switch strings.ToLower(s) {
		case "v1":
			switch {
			case i == len(segs)-1:
				return "the OpenAI API base URL", prefix + metricsPath
			case strings.EqualFold(segs[i+1], "models"):
				return "the OpenAI API's model list", prefix + metricsPath
			}
			return "an OpenAI API endpoint", prefix + metricsPath
		case "health", "healthz", "health_generate", "ready", "readiness", "live", "liveness", "ping", "livez", "readyz":
			return "a health check", prefix + metricsPath
		case "docs", "openapi.json", "redoc", "api-doc":
			return "the API documentation", prefix + metricsPath
		}
	}
	if typoOfMetrics(last) {
		return "not /metrics (a typo?)", strings.TrimSuffix(path.Dir(clean), "/") + "/metrics"
	}
	if clean == "/" {
		return "the server's root", metricsPath
	}
	return "not a path engines serve metrics at", metricsPath
}

// typoOfMetrics reports a path segment that is "metrics" mistyped: cut
// short ("metric", "metr"), run on ("metrics.txt") or with its letters
// swapped ("metrcis").
func typoOfMetrics(seg string) bool {
	if seg == "metrics" {
		return false
	}
	if strings.HasPrefix(seg, "metric") || (len(seg) >= 4 && strings.HasPrefix("metrics", seg)) {
		return true
	}
	a, b := []byte(seg), []byte("metrics")
	slices.Sort(a)
	slices.Sort(b)
	return bytes.Equal(a, b)
}

// wrongPathReasons are the failures that a URL which is no metrics URL
// explains: what the server answered there is not a metrics page.
var wrongPathReasons = map[string]bool{
	signal.ReasonHTTP404: true, signal.ReasonHTTP501: true, signal.ReasonHTTPError: true, signal.ReasonAuth: true,
	signal.ReasonRedirect: true, signal.ReasonWrongPort: true, signal.ReasonNotMetrics: true, signal.ReasonUnknownEngine: true,
}

// onPath turns a failure at a URL whose path is no metrics path into
// reason wrong_path: it says what the path is and reads the URL where the
// metrics would be once, to say that they are there (of which engine) or
// why not. A failure at a metrics path is returned as it is.
func (s *Scraper) onPath(ctx context.Context, t *Target, u *url.URL, forced engine.Adapter, reason string, err error) (string, error) {
	if metricsPathName(u.Path) || !wrongPathReasons[reason] {
		return reason, err
	}
	mp := "/metrics"
	if forced != nil {
		if p, ok := forced.(engine.MetricsPath); ok {
			mp = p.MetricsPath()
		}
	}
	what, candidate := notMetricsPath(u.Path, mp)
	answered := "a page that is not metrics"
	var se *statusError
	switch {
	case errors.As(err, &se):
		answered = se.status
	case reason == signal.ReasonUnknownEngine:
		answered = "a page without an engine's metrics"
	}
	c := *u
	c.Path, c.RawPath, c.RawQuery = candidate, "", ""
	there := t.redact(&c)
	msg := fmt.Sprintf("%s is %s, not a metrics URL (it answers %s); ", t.redact(u), what, answered)
	name, why := s.probe(ctx, t, &c, forced)
	if why == nil {
		msg += fmt.Sprintf("the metrics are at %s (engine %s): set the target's URL to it", there, name)
	} else {
		msg += fmt.Sprintf("at %s, where engines serve them: %v", there, why)
	}
	return signal.ReasonWrongPath, errors.New(msg)
}

// probe reads u once as a scrape would, for the diagnosis of another
// URL's failure: the engine of the page there, or why it fails (without
// the URL, which the caller names).
func (s *Scraper) probe(ctx context.Context, t *Target, u *url.URL, forced engine.Adapter) (string, error) {
	buf := s.getBuffer()
	defer s.putBuffer(buf)
	body, ctype, _, err := s.fetch(ctx, t, u, forced, buf)
	if err != nil {
		return "", unwrapOnce(err)
	}
	page, err := s.parser.ParseWith(body, ctype, s.reg.Want, new(expo.Layout))
	if err != nil {
		return "", err
	}
	defer s.parser.Release(page)
	if forced != nil {
		return forced.Name(), nil
	}
	a, err := s.reg.Detect(page)
	if err != nil {
		return "", err
	}
	return a.Name(), nil
}

// unwrapOnce drops the "scrape URL: " of a fetch error.
func unwrapOnce(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

// notMetricsPage says more of a page that is not metrics (expo.ErrNotMetrics)
// when it is an HTML page: its title, and that a web page answers here.
func notMetricsPage(err error, body []byte) error {
	if !isHTML(body) {
		return err
	}
	titled := ""
	if title := htmlTitle(body); title != "" {
		titled = fmt.Sprintf(", titled %q", title)
	}
	return fmt.Errorf("%w: the body is HTML%s: a web UI, a login page or a proxy answers at this URL, not an engine; point the target at the engine's host and port", expo.ErrNotMetrics, titled)
}

// speaksTLS reports whether the server at addr answers a TLS handshake:
// whether an http URL that the server closed without an answer is a TLS
// port (OpenSSL's servers, e.g. uvicorn with --ssl-keyfile, close the
// connection on a plain HTTP request without a byte).
func speaksTLS(ctx context.Context, addr string) bool {
	// A TLS server answers a ClientHello at once; one that does not
	// within tlsProbeTimeout is taken for no TLS server.
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	host, _, _ := net.SplitHostPort(addr)
	// Only whether the server speaks TLS is asked: its certificate is not
	// checked, and nothing is sent over the connection.
	err = tls.Client(c, &tls.Config{ServerName: host, InsecureSkipVerify: true}).HandshakeContext(ctx) //nolint:gosec // no data is sent
	var alert tls.AlertError
	return err == nil || errors.As(err, &alert)
}

// hostPort is u's host with its port (80 for http when none is given).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// tlsProbeTimeout bounds speaksTLS.
const tlsProbeTimeout = 2 * time.Second

// tlsAlert reports an answer that is a TLS alert record (content type
// 0x15, version 3.x): what many TLS servers answer to plain HTTP, which
// http.ReadResponse reports as a malformed status line.
func tlsAlert(err error) bool {
	return strings.Contains(err.Error(), `malformed HTTP response "\x15\x03`)
}
