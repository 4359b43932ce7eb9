package scrape

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http/httptrace"
	"sync/atomic"
)

// The head of a target's answer (its status line and headers) is bounded
// by maxHeaderBytes on every client a scrape uses: the direct client
// (direct.go) counts what its read buffer reads while the head is
// incomplete; a net/http client's connections (dialed by headDialer) count
// it from the moment a request has its connection until the client
// returns the answer. A target that sends headers without end fails the
// scrape there, with reason too_large, instead of growing the heap until
// the deadline; the scrape's deadline bounds the head as it bounds the
// body, so slow headers fail with reason timeout.

// maxHeaderBytes bounds the head of a target's answer: its status line and
// headers, those of any informational (1xx) answer before it included.
// Engines send a few hundred bytes. Without it the direct client had no
// bound (one target sending headers without end held serve at over 1
// GiB), and net/http's client allows 10 MiB, allocating 73 MB to read one
// endless header line up to there (TestHostileHeaders before this bound).
// docs/configuration.md, "Limits on what a target sends".
const maxHeaderBytes = 64 << 10

// errHeadersTooLarge is the failure of a target whose head is over
// maxHeaderBytes.
var errHeadersTooLarge = errors.New("response headers over the limit")

// readHead reads conn into p when the head being read may take left more
// bytes (negative: no head is being read, no bound).
func readHead(conn net.Conn, p []byte, left int64) (int, error) {
	if left == 0 {
		return 0, errHeadersTooLarge
	}
	if left > 0 && int64(len(p)) > left {
		p = p[:left]
	}
	return conn.Read(p)
}

// headConn is a connection of a net/http client whose reads are bounded
// while a request awaits the head of its answer (headGuard arms it).
type headConn struct {
	net.Conn
	local *headAddr
	// left is how many more bytes the awaited head may take; negative
	// while no head is awaited. Set by the requesting goroutine, counted
	// down by the client's read loop.
	left atomic.Int64
	// over is set when a read found the awaited head over the bound: net/http
	// may report the partial line it ends with as malformed instead.
	over atomic.Bool
}

func (c *headConn) Read(p []byte) (int, error) {
	n, err := readHead(c.Conn, p, c.left.Load())
	// Counted down whether armed or not: a count below zero (no head
	// awaited, or disarmed meanwhile) stays below zero.
	c.left.Add(-int64(n))
	if err == errHeadersTooLarge {
		c.over.Store(true)
	}
	return n, err
}

// headAddr is a headConn's local address, by which a headGuard finds the
// headConn under whatever net/http's client wraps it in (a tls.Conn;
// the go-conntrack tracker prometheus/common puts around every connection
// it dials): a wrapper passes LocalAddr through.
type headAddr struct {
	net.Addr
	conn *headConn
}

func (c *headConn) LocalAddr() net.Addr { return c.local }

// headDialer dials like d and returns headConns.
func headDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hc := &headConn{Conn: c}
		hc.local = &headAddr{Addr: c.LocalAddr(), conn: hc}
		hc.left.Store(-1)
		return hc, nil
	}
}

// headGuard arms the bound on the connection of each request a net/http
// client sends for one scrape (redirects send several) and disarms it
// when the client has the head. Used by one goroutine: net/http calls
// GotConn on the goroutine that sends the request.
type headGuard struct{ armed *headConn }

// trace returns ctx with the guard's hook on the request's connection.
func (g *headGuard) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: g.gotConn})
}

func (g *headGuard) gotConn(info httptrace.GotConnInfo) {
	g.done(nil) // a redirect's next request: the last head is in
	if tc, ok := info.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		// HTTP/2 streams share the connection: its own bound on a header
		// list applies (enable_http2).
		return
	}
	if a, ok := info.Conn.LocalAddr().(*headAddr); ok {
		a.conn.over.Store(false)
		a.conn.left.Store(maxHeaderBytes)
		g.armed = a.conn
	}
}

// done disarms the bound once the client has returned the head, or failed
// with err; it returns err, with errHeadersTooLarge when that was the
// cause.
func (g *headGuard) done(err error) error {
	hc := g.armed
	if hc == nil {
		return err
	}
	g.armed = nil
	hc.left.Store(-1)
	if err != nil && hc.over.Load() && !errors.Is(err, errHeadersTooLarge) {
		err = fmt.Errorf("%w (%w)", errHeadersTooLarge, err)
	}
	return err
}
