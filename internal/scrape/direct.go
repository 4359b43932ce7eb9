package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"

	promcfg "github.com/prometheus/common/config"

	"github.com/kvwatch/kvwatch/internal/freelist"
)

// The direct client: one GET over HTTP/1.1 on a kept-alive connection, in
// the scraping goroutine.
//
// net/http's Transport serves each connection with two goroutines of its
// own (a read loop and a write loop) and hands every request and response
// between them and the caller over channels: three goroutine switches and
// a cloned request per scrape, about a fifth of serve's CPU per scrape at
// 2,000 endpoints (docs/benchmarks.md, "Third pass"). A scrape needs none of
// what that machinery is for (no request body, no pipelining, no HTTP/2, no
// proxy), so a target without auth, TLS, proxy, redirects or extra headers
// (the default, and what a fleet on loopback or a LAN uses) is read by the
// direct client instead: it writes the request on the connection itself and
// reads the response with net/http's own parser (http.ReadResponse: status
// line, headers, Content-Length and chunked bodies), with the scrape's
// deadline on the connection. Any other target keeps net/http's client.
//
// The head of an answer (status line and headers) is bounded by
// maxHeaderBytes (headers.go), and the scrape's deadline bounds it as it
// bounds the body.
//
// A connection is kept for the next scrape only when the response said
// nothing against it and its body was read to the end; one that idled past
// directIdleTimeout is closed, not reused. A request on a kept connection
// that the server had closed meanwhile (its keep-alive timeout raced the
// scrape: uvicorn's is 5 s) fails before any byte of an answer; it is sent
// once more on a new connection, as net/http does (never on another kept
// one, which idled as long). So is one answered 408 Request Timeout: a
// server may say that on an idle connection as it closes it.

// directIdleTimeout is how long an idle connection is kept (net/http's
// client in prometheus/common keeps one 5 minutes); a variable for tests.
var directIdleTimeout = 5 * time.Minute

// directMaxIdlePerHost bounds the idle connections kept per host:port (a
// target is scraped by one scrape at a time; probes of one host may
// overlap).
const directMaxIdlePerHost = 2

// directDialTimeout bounds a dial besides the scrape's own deadline.
const directDialTimeout = 10 * time.Second

// plainHTTP reports whether a target can be read by the direct client: an
// http URL without user info, and an HTTP client config that asks for
// nothing beyond a GET (no auth, proxy, redirects or extra headers; TLS
// settings do not apply to http).
func plainHTTP(c *promcfg.HTTPClientConfig, u *url.URL) bool {
	return u.Scheme == "http" && u.User == nil &&
		c.BasicAuth == nil && c.Authorization == nil && c.OAuth2 == nil && c.BearerToken == "" && c.BearerTokenFile == "" &&
		c.ProxyURL.URL == nil && !c.ProxyFromEnvironment && len(c.ProxyConnectHeader) == 0 &&
		!c.FollowRedirects && c.HTTPHeaders == nil
}

// directConn is a kept connection.
type directConn struct {
	net.Conn
	// br reads the connection (through Read) during a request (from
	// readers, given back when the body is closed: an idle connection
	// holds no buffer).
	br *bufio.Reader
	// headLeft is how many more bytes the head of the answer may take;
	// negative once the head has been read (fetch bounds the body).
	headLeft int64
	// cut is the read error that ended the head, when the bound or the
	// deadline did: a head cut there can end in a partial line, which
	// http.ReadResponse reports as malformed (bufio.Reader.ReadLine drops
	// the error of a partial line), and the deadline can pass before the
	// context says so.
	cut  error
	idle time.Time // when it was put back
	// timer closes it once it has idled directIdleTimeout in the pool (a
	// target removed by a reload is never scraped again); set by put.
	timer *time.Timer
}

// directPool keeps idle connections per host:port.
type directPool struct {
	mu   sync.Mutex
	idle map[string][]*directConn
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newDirectPool() *directPool {
	d := &net.Dialer{Timeout: directDialTimeout, KeepAlive: 30 * time.Second}
	return &directPool{idle: map[string][]*directConn{}, dial: d.DialContext}
}

// take returns an idle connection to addr, or nil; connections idle too
// long are closed on the way.
func (p *directPool) take(addr string, now time.Time) *directConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.idle[addr]
	for len(cs) > 0 {
		c := cs[len(cs)-1]
		cs = cs[:len(cs)-1]
		c.timer.Stop()
		if now.Sub(c.idle) < directIdleTimeout {
			p.setIdle(addr, cs)
			return c
		}
		c.Close()
	}
	p.setIdle(addr, cs)
	return nil
}

func (p *directPool) setIdle(addr string, cs []*directConn) {
	if len(cs) == 0 {
		delete(p.idle, addr)
		return
	}
	p.idle[addr] = cs
}

// put keeps c for the next request to addr, or closes it when the host has
// enough idle connections.
func (p *directPool) put(addr string, c *directConn, now time.Time) {
	c.idle = now
	p.mu.Lock()
	defer p.mu.Unlock()
	if cs := p.idle[addr]; len(cs) < directMaxIdlePerHost {
		p.idle[addr] = append(cs, c)
		if c.timer == nil {
			c.timer = time.AfterFunc(directIdleTimeout, func() { p.expire(addr, c) })
		} else {
			c.timer.Reset(directIdleTimeout)
		}
		return
	}
	c.Close()
}

// expire closes c if it is still idle in the pool, and has idled long
// enough (a timer that fired while c was taken, used and put back is
// stale).
func (p *directPool) expire(addr string, c *directConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(c.idle) < directIdleTimeout {
		return
	}
	cs := p.idle[addr]
	for i, x := range cs {
		if x == c {
			p.setIdle(addr, append(cs[:i:i], cs[i+1:]...))
			c.Close()
			return
		}
	}
}

// directBody is a response body on a direct connection: when it has been
// read to its end and the response allows it, Close returns the connection
// to the pool; otherwise Close closes the connection.
type directBody struct {
	io.ReadCloser // the body http.ReadResponse made
	pool          *directPool
	addr          string
	conn          *directConn
	keep          bool // the response allows the connection to be reused
	eof           bool
	stop          func() bool // ends the context's watch over the connection
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *directBody) Close() error {
	if b.conn == nil {
		return nil
	}
	c := b.conn
	b.conn = nil
	// A body not read to its end is not drained (http.ReadResponse's
	// body would read a huge or endless one until the deadline): its
	// connection is closed.
	if b.eof {
		b.ReadCloser.Close()
	}
	// A connection whose context fired may have its deadline in the past
	// already: it is not kept. Nor is one with bytes after the body.
	keep := b.stop() && b.keep && b.eof && c.br.Buffered() == 0
	c.releaseReader()
	if keep {
		c.SetDeadline(time.Time{})
		b.pool.put(b.addr, c, time.Now())
		return nil
	}
	return c.Close()
}

// readers are the connections' read buffers, 32 KiB each (a chunked page
// arrives in chunks of about 4 KiB, each a read of its own below that),
// shared by the requests in flight instead of held by every idle
// connection (10,000 targets would keep 320 MiB).
//
// They are kept in a free list (up to 4 MiB, 128 buffers), not a
// sync.Pool the garbage collector empties.
var readers = freelist.List[*bufio.Reader]{Budget: 4 << 20, Size: (*bufio.Reader).Size}

// readBufferSize is the size of each read buffer.
const readBufferSize = 32 << 10

// takeReader gives c a read buffer for one request.
func (c *directConn) takeReader() {
	if c.br == nil {
		br, ok := readers.Get()
		if !ok {
			br = bufio.NewReaderSize(nil, readBufferSize)
		}
		c.br = br
		c.br.Reset(c)
	}
}

// Read reads the connection for c's read buffer, at most headLeft bytes
// while the head is read: the buffer asks for more only while the head is
// incomplete, so a head of up to maxHeaderBytes is read whole and a longer
// one fails with errHeadersTooLarge.
func (c *directConn) Read(p []byte) (int, error) {
	n, err := readHead(c.Conn, p, c.headLeft)
	if c.headLeft > 0 {
		c.headLeft -= int64(n)
	}
	if err != nil && (err == errHeadersTooLarge || errors.Is(err, os.ErrDeadlineExceeded)) {
		c.cut = err
	}
	return n, err
}

// releaseReader gives c's read buffer back; what it still buffers is lost
// (a connection with bytes left over is not kept).
func (c *directConn) releaseReader() {
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
}

// get sends GET u with header h and returns the response, its body
// reading from the connection (close it to release the connection).
func (p *directPool) get(ctx context.Context, u *url.URL, h http.Header) (*http.Response, error) {
	addr := hostPort(u)
	req := &http.Request{Method: http.MethodGet, URL: u, Header: h, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	for attempt := 0; ; attempt++ {
		var c *directConn
		if attempt == 0 {
			c = p.take(addr, time.Now())
		}
		reused := c != nil
		if c == nil {
			nc, err := p.dial(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			c = &directConn{Conn: nc}
		}
		c.takeReader()
		resp, stop, err := c.roundTrip(ctx, req)
		if err == nil && reused && attempt == 0 && resp.StatusCode == http.StatusRequestTimeout {
			// A server may say 408 on a kept connection as it closes it
			// for idling (net/http's client ignores that too): it is no
			// answer to this request.
			stop()
			c.releaseReader()
			c.Close()
			continue
		}
		if err == nil {
			resp.Body = &directBody{ReadCloser: resp.Body, pool: p, addr: addr, conn: c, keep: !resp.Close, stop: stop}
			return resp, nil
		}
		c.releaseReader()
		c.Close()
		// A kept connection the server closed while it idled: nothing of
		// an answer came back; try once on a new one (not on another kept
		// one: that one idled as long, and is likely closed too).
		if reused && attempt == 0 && ctx.Err() == nil && closedIdle(err) {
			continue
		}
		return nil, err
	}
}

// closedIdle reports the failure of a request on a connection the server
// had closed: EOF before the status line, a reset or a broken pipe.
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// roundTrip writes req on c and reads the response head, under ctx: its
// deadline is the connection's, and its end (cancelled) interrupts the
// connection. stop ends that watch; it reports false when the context has
// fired meanwhile.
func (c *directConn) roundTrip(ctx context.Context, req *http.Request) (*http.Response, func() bool, error) {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, func() bool, error) {
		stop()
		if c.cut != nil && !errors.Is(err, c.cut) {
			err = fmt.Errorf("%w (%w)", c.cut, err)
		}
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		return nil, nil, err
	}
	if err := writeGet(c.Conn, req); err != nil {
		return fail(err)
	}
	c.headLeft, c.cut = maxHeaderBytes, nil
	resp, err := http.ReadResponse(c.br, req)
	// Informational answers (103 Early Hints) precede the real one, as
	// net/http's client skips them.
	for informational := 0; err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols; informational++ {
		if informational == 8 {
			return fail(fmt.Errorf("more than 8 informational (1xx) answers without a final one"))
		}
		resp, err = http.ReadResponse(c.br, req)
	}
	if err != nil {
		return fail(err)
	}
	c.headLeft = -1
	return resp, stop, nil
}

// writeGet writes the request line and headers of a GET, as net/http
// writes them for a request without a body.
func writeGet(w io.Writer, req *http.Request) error {
	b := make([]byte, 0, 256)
	b = append(b, "GET "...)
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, req.Host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	_, err := w.Write(b)
	return err
}
