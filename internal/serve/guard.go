package serve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// guard stands in front of every route and of exporter-toolkit's
// authentication (docs/configuration.md, "Hostile clients"). It refuses,
// before anything costly runs:
//   - a Host header that is none of serve's names (DNS rebinding: a page
//     whose host name the attacker points at 127.0.0.1 would otherwise read
//     serve as its own origin), 403;
//   - a request a web page of another origin made the browser send, after
//     the Fetch Metadata resource isolation policy (Sec-Fetch-Site, else
//     Origin), 403; top-level navigations stay allowed, so a link to the
//     UI works;
//   - on a spare connection (connLimiter), anything but the health checks,
//     503;
//   - credentials from a source that failed too many logins, 429, before
//     the toolkit spends bcrypt on them (loginGuard).
//
// Clients that are not browsers (curl, Prometheus, Grafana's server-side
// data source) send neither Sec-Fetch-* nor Origin and pass. The guard also
// bounds each write of a response (WriteStallTimeout).
type guard struct {
	timeouts *httpTimeouts // the daemon's
	hosts    hostPolicy
	logins   *loginGuard
	refused  *prometheus.CounterVec // by signal.Refused*
}

func newGuard(timeouts *httpTimeouts, hosts hostPolicy, log *slog.Logger) *guard {
	g := &guard{timeouts: timeouts, hosts: hosts, logins: newLoginGuard(log),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: signal.WebRequestsRefused.Name, Help: signal.WebRequestsRefused.Help}, signal.WebRequestsRefused.Labels)}
	for _, r := range []string{signal.RefusedHost, signal.RefusedCrossOrigin, signal.RefusedLoginThrottled, signal.RefusedBusy} {
		g.refused.WithLabelValues(r)
	}
	return g
}

// collectors are the guard's metrics.
func (g *guard) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.refused, g.logins.failed}
}

// wrap puts the guard in front of next.
func (g *guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, next) })
}

func (g *guard) serve(rw http.ResponseWriter, r *http.Request, next http.Handler) {
	w := &guardWriter{ResponseWriter: rw, rc: http.NewResponseController(rw), stall: g.timeouts.writeStall}
	w.renew(true) // a deadline left by the connection's last request has passed
	// The server writes what the route left buffered after it returns.
	defer w.renew(true)

	if !g.hosts.allows(r.Host) {
		h := canonicalHost(hostOnly(r.Host))
		g.refuse(w, signal.RefusedHost, http.StatusForbidden, fmt.Sprintf("kvwatch serve does not answer to the host name %q: a web page could use such a name to reach serve (DNS rebinding). "+
			"Use serve's IP address or localhost, or start serve with --web.allowed-hosts=%s if it is one of serve's names.", h, h))
		return
	}
	if why := crossOrigin(r); why != "" {
		g.refuse(w, signal.RefusedCrossOrigin, http.StatusForbidden, "kvwatch serve refuses requests that a web page of another origin makes the browser send ("+why+"). "+
			"Open serve's own web UI at its address, or ask from a program (curl, Prometheus, Grafana's data source).")
		return
	}
	if spareConn(r) {
		w.Header().Set("Connection", "close")
		if r.URL.Path != signal.PathHealthy && r.URL.Path != signal.PathReady {
			g.refuse(w, signal.RefusedBusy, http.StatusServiceUnavailable, "kvwatch serve has every connection busy (--web.max-connections); this spare one answers only "+
				signal.PathHealthy+" and "+signal.PathReady+". Retry later, or raise --web.max-connections.")
			return
		}
	}
	if _, _, ok := r.BasicAuth(); ok {
		src := sourceOf(r.RemoteAddr)
		b, retry := g.logins.take(src)
		if b == nil {
			secs := int((retry + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			g.refuse(w, signal.RefusedLoginThrottled, http.StatusTooManyRequests, fmt.Sprintf("too many failed logins from %s: kvwatch serve checks no credentials from it for %ds "+
				"(it allows %d failed logins at once, then one every %s).", src, secs, LoginFailureBurst, LoginFailureRefill))
			g.logins.note(src, true)
			return
		}
		defer func() { g.logins.done(b, src, w.status == http.StatusUnauthorized) }()
	}
	next.ServeHTTP(w, r)
}

// refuse answers code with msg and counts the refusal.
func (g *guard) refuse(w http.ResponseWriter, reason string, code int, msg string) {
	g.refused.WithLabelValues(reason).Inc()
	http.Error(w, msg, code)
}

// guardWriter records a response's status and renews the write deadline
// as the response goes out.
type guardWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController // of the ResponseWriter
	stall   time.Duration            // WriteStallTimeout
	status  int
	renewed time.Time
}

func (w *guardWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *guardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.renew(false)
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered (http.Flusher).
func (w *guardWriter) Flush() {
	w.renew(false)
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *guardWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// renew sets the write deadline w.stall from now; unless force, only
// once a sixteenth of it has passed (a write then has at least 15/16 of
// it).
func (w *guardWriter) renew(force bool) {
	now := time.Now()
	if !force && now.Sub(w.renewed) < w.stall/16 {
		return
	}
	w.renewed = now
	_ = w.rc.SetWriteDeadline(now.Add(w.stall))
}

// crossOrigin says why r is a request that a web page of another origin
// made the browser send; "" when it is not. Sec-Fetch-Site decides when
// the browser sends it: same-origin and none (the user typed the address,
// or a bookmark) pass, same-site and cross-site are refused (another port
// of the same host is the same site: any local web app), except a
// top-level navigation (a link to the UI, e.g. from an alert). Without it
// (an older browser, or not a browser), an Origin header that is not the
// request's own host is refused.
func crossOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "same-origin", "none":
		return ""
	case "":
		o := r.Header.Get("Origin")
		if o == "" || sameOrigin(o, r.Host) {
			return ""
		}
		return fmt.Sprintf("Origin: %q", o)
	default:
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" {
			return ""
		}
		return fmt.Sprintf("Sec-Fetch-Site: %q", site)
	}
}

// sameOrigin reports whether the Origin header origin names host (a Host
// header), default ports aside.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // "null" among others
	}
	return strings.EqualFold(withoutDefaultPort(u.Host), withoutDefaultPort(host))
}

func withoutDefaultPort(hostport string) string {
	if h, p, err := net.SplitHostPort(hostport); err == nil && (p == "80" || p == "443") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}

// hostPolicy says which Host headers serve answers: IP addresses,
// localhost and its subdomains, the host names of the listen addresses and
// of this machine, and the names of --web.allowed-hosts ("*": any). An
// attacker's name, pointed at serve's address by DNS rebinding, is none of
// them.
type hostPolicy struct {
	any   bool
	names map[string]bool // canonicalHost form
}

// newHostPolicy builds the policy of the listen addresses and the allowed
// names; it refuses an allowed name that is not a host name.
func newHostPolicy(listen, allowed []string) (hostPolicy, error) {
	p := hostPolicy{names: map[string]bool{}}
	for _, a := range listen {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" && net.ParseIP(h) == nil {
			p.names[canonicalHost(h)] = true
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		p.names[canonicalHost(h)] = true
	}
	var bad []string
	for _, a := range allowed {
		switch {
		case a == "*":
			p.any = true
		case validHostName(a):
			p.names[canonicalHost(a)] = true
		default:
			bad = append(bad, fmt.Sprintf("%q", a))
		}
	}
	if len(bad) > 0 {
		return p, fmt.Errorf("--web.allowed-hosts %s: not a host name; give names without scheme or port, e.g. kvwatch.example.com (IP addresses and localhost need none), or * for any", strings.Join(bad, ", "))
	}
	return p, nil
}

// allows reports whether serve answers a request with this Host header.
func (p hostPolicy) allows(hostHeader string) bool {
	h := canonicalHost(hostOnly(hostHeader))
	switch {
	case h == "": // HTTP/1.0 without Host: not a browser
		return true
	case net.ParseIP(h) != nil:
		return true
	case h == "localhost" || strings.HasSuffix(h, ".localhost"): // browsers resolve these to loopback themselves
		return true
	}
	return p.any || p.names[h]
}

// hostOnly strips the port (and an IPv6 address's brackets) from a Host
// header.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

func canonicalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// validHostName reports whether s is a DNS host name (letters, digits,
// hyphens and underscores, in dot-separated labels of 1 to 63).
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
