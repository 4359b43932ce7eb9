package serve

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// DefaultMaxConnections is --web.max-connections' default, Prometheus'
// own: with a soft limit of 1,024 file descriptors it leaves room for the
// scrapes' connections.
const DefaultMaxConnections = 512

// SpareConnections are connections serve accepts beyond MaxConnections
// when every other one is busy with a request: they only answer the health
// checks (signal.PathHealthy, signal.PathReady) and close after one
// request, so that a probe gets its answer while clients hold every slot.
const SpareConnections = 8

// The timeouts of serve's HTTP server. None bounds how long a route may
// compute: a query runs as long as --query.timeout lets it and
// /debug/pprof/profile as long as its seconds; they bound how long a
// client may take to send, to read, or to say nothing.
const (
	// ReadHeaderTimeout bounds the reading of a request's header (and a
	// TLS handshake).
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds the reading of a whole request, header and body.
	// net/http lifts it once the body is read, so it does not cancel a
	// long route.
	ReadTimeout = 30 * time.Second
	// WriteStallTimeout bounds each write of a response: a client that
	// takes nothing for this long loses the connection. It is a stall
	// timeout, renewed at every write, not one for the whole response,
	// which would cut long queries and profiles.
	WriteStallTimeout = 30 * time.Second
	// IdleTimeout closes a kept-alive connection that sends no request for
	// this long (more than the usual 1m scrape interval, so Prometheus
	// keeps its connection).
	IdleTimeout = 2 * time.Minute
)

// httpTimeouts are the timeouts a daemon's servers use: the constants
// above (tests shorten them).
type httpTimeouts struct {
	readHeader, read, writeStall, idle time.Duration
}

var defaultTimeouts = httpTimeouts{readHeader: ReadHeaderTimeout, read: ReadTimeout, writeStall: WriteStallTimeout, idle: IdleTimeout}

// connLimiter keeps the connections of all of serve's listeners within
// max. At the cap a new connection makes room by closing the one idle
// longest (a kept-alive connection between requests, or one that has sent
// nothing yet); when every connection is busy with a request it gets one
// of the spare slots, which only answer the health checks; beyond them it
// is closed at once. Closing rather than waiting in Accept, as Prometheus'
// netutil.LimitListener does, keeps the accept queue moving, so a probe
// behind thousands of idle connections still gets in.
type connLimiter struct {
	max, spare int

	mu    sync.Mutex
	conns map[*limitedConn]struct{} // the open ones

	closed *prometheus.CounterVec // by signal.Closed*
}

func newConnLimiter(max int) *connLimiter {
	l := &connLimiter{max: max, spare: SpareConnections, conns: map[*limitedConn]struct{}{},
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: signal.WebConnectionsClosed.Name, Help: signal.WebConnectionsClosed.Help}, signal.WebConnectionsClosed.Labels)}
	for _, r := range []string{signal.ClosedIdle, signal.ClosedOverLimit} {
		l.closed.WithLabelValues(r)
	}
	return l
}

// collectors are the limiter's metrics.
func (l *connLimiter) collectors() []prometheus.Collector {
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: signal.WebConnections.Name, Help: signal.WebConnections.Help}, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(len(l.conns))
	})
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: signal.WebMaxConnections.Name, Help: signal.WebMaxConnections.Help}, func() float64 { return float64(l.max) })
	return []prometheus.Collector{open, limit, l.closed}
}

// limitedConn is a connection counted by a connLimiter.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// spare: accepted beyond max; it answers the health checks only.
	spare bool
	// idle and since are guarded by l.mu: whether the connection waits
	// for a request (http.StateNew or StateIdle), and since when.
	idle  bool
	since time.Time
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// listener wraps a listener of the server.
func (l *connLimiter) listener(in net.Listener) net.Listener { return limitListener{in, l} }

type limitListener struct {
	net.Listener
	l *connLimiter
}

// Accept returns the next connection within the limit, closing those over
// it.
func (ll limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit counts c in, closing the connection idle longest when at the cap;
// nil when c was closed instead.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	now := time.Now()
	lc := &limitedConn{Conn: c, l: l, idle: true, since: now}
	l.mu.Lock()
	var victim *limitedConn
	if len(l.conns) >= l.max {
		for o := range l.conns {
			if o.idle && (victim == nil || o.since.Before(victim.since)) {
				victim = o
			}
		}
		switch {
		case victim != nil:
			delete(l.conns, victim)
		case len(l.conns) < l.max+l.spare:
			lc.spare = true
		default:
			lc = nil
		}
	}
	if lc != nil {
		l.conns[lc] = struct{}{}
	}
	l.mu.Unlock()
	switch {
	case victim != nil:
		victim.Conn.Close() // the server's own Close of it then finds it gone
		l.closed.WithLabelValues(signal.ClosedIdle).Inc()
	case lc == nil:
		c.Close()
		l.closed.WithLabelValues(signal.ClosedOverLimit).Inc()
	}
	return lc
}

// connState is the servers' ConnState hook: it tells the limiter which
// connections wait for a request.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc := unwrapConn(c)
	if lc == nil {
		return
	}
	l.mu.Lock()
	lc.idle = s == http.StateNew || s == http.StateIdle
	lc.since = time.Now()
	l.mu.Unlock()
}

// unwrapConn finds the limitedConn under a connection the server hands to
// its hooks (a *tls.Conn with TLS); nil when there is none.
func unwrapConn(c net.Conn) *limitedConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, _ := c.(*limitedConn)
	return lc
}

type connKey struct{}

// connContext is the servers' ConnContext hook: a request's context holds
// its connection, so the guard knows a spare one.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc := unwrapConn(c); lc != nil {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// spareConn reports whether r came on a spare connection.
func spareConn(r *http.Request) bool {
	lc, _ := r.Context().Value(connKey{}).(*limitedConn)
	return lc != nil && lc.spare
}
