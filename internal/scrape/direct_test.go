package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// countingServer serves h and counts the connections it accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestDirectKeepsConnection: a default target is read by the direct
// client, over one connection for many scrapes, with the headers net/http's
// client sent; a big page (chunked: the handler sets no length) and a small
// one (Content-Length) read alike.
func TestDirectKeepsConnection(t *testing.T) {
	big := sglangPage + strings.Repeat("# filler so that the server sends the page chunked\n", 2000)
	var got atomic.Value
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		if r.URL.Query().Get("small") != "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(sglangPage)))
			io.WriteString(w, sglangPage)
			return
		}
		for i := 0; i < len(big); i += 4096 {
			io.WriteString(w, big[i:min(i+4096, len(big))])
			w.(http.Flusher).Flush()
		}
	}))
	s := New(engine.NewRegistry(), 1<<20)
	for _, u := range []string{srv.URL, srv.URL + "/metrics?small=1"} {
		tg := target(t, config.Target{URL: u})
		if !tg.direct {
			t.Fatalf("%s: a default target is not read by the direct client", u)
		}
		for i := range 20 {
			res := s.Scrape(context.Background(), tg)
			if !res.OK() || res.Server.Capacity.V != 100000 {
				t.Fatalf("%s scrape %d: %v %+v", u, i, res.Err, res.Server)
			}
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("40 scrapes over %d connections, want 1", n)
	}
	h := got.Load().(http.Header)
	for k, want := range map[string]string{"Accept": acceptHeader, "Accept-Encoding": "identity", "User-Agent": requestHeaders[0].Get("User-Agent")} {
		if h.Get(k) != want {
			t.Errorf("header %s = %q, want %q", k, h.Get(k), want)
		}
	}
}

// TestDirectIdleClosedByServer: the server closes every connection after
// its answer without saying so (no Connection: close), as a server whose
// keep-alive timeout ran out between two scrapes does, or with a 408
// Request Timeout on the idle connection. Each next scrape finds the kept
// connection dead and must succeed on a new one.
func TestDirectIdleClosedByServer(t *testing.T) {
	for _, tc := range []struct{ name, atClose string }{
		{"silently", ""},
		{"with a 408", "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var accepted atomic.Int64
			url := rawServer(t, func(c net.Conn, _ <-chan struct{}) {
				accepted.Add(1)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s", len(sglangPage), sglangPage)
				time.Sleep(20 * time.Millisecond) // closed after the answer, as an idle timeout does
				io.WriteString(c, tc.atClose)
			})
			s := New(engine.NewRegistry(), 1<<20)
			tg := target(t, config.Target{URL: url})
			for i := range 5 {
				res := s.Scrape(context.Background(), tg)
				if !res.OK() {
					t.Fatalf("scrape %d after the server closed the kept connection: %s %v", i, res.Reason, res.Err)
				}
				time.Sleep(50 * time.Millisecond) // the server has closed it by now
			}
			if n := accepted.Load(); n < 5 {
				t.Errorf("%d connections for 5 scrapes, each closed by the server; want 5", n)
			}
		})
	}
}

// TestDirectNotReused: a connection is not kept after Connection: close,
// after a body left unread (an error page over 4 KiB), or with bytes after
// the body; the next scrape works on a new connection each time.
func TestDirectNotReused(t *testing.T) {
	var mode atomic.Value
	mode.Store("close")
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load().(string) {
		case "close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, sglangPage)
		case "unread":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.Repeat("x", 64<<10))
		default:
			io.WriteString(w, sglangPage)
		}
	}))
	s := New(engine.NewRegistry(), 1<<20)
	tg := target(t, config.Target{URL: srv.URL})
	steps := []struct {
		mode   string
		ok     bool
		reason string
	}{{"close", true, ""}, {"ok", true, ""}, {"unread", false, signal.ReasonHTTPError}, {"ok", true, ""}, {"ok", true, ""}}
	for i, st := range steps {
		mode.Store(st.mode)
		res := s.Scrape(context.Background(), tg)
		if res.OK() != st.ok || res.Reason != st.reason {
			t.Fatalf("step %d (%s): ok %v reason %q (%v); want ok %v reason %q", i, st.mode, res.OK(), res.Reason, res.Err, st.ok, st.reason)
		}
	}
	// close, then a new one for ok; unread: kept from ok, closed after;
	// a new one for the last two.
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (none reused after close or an unread body)", n)
	}
}

// TestDirectTimeoutAndCancel: a page that stops halfway fails with reason
// timeout at the scrape's deadline; a scrape whose context is cancelled
// ends at once, and neither leaves its connection for the next scrape.
func TestDirectTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fast") != "" {
			io.WriteString(w, sglangPage)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(2*len(sglangPage)))
		io.WriteString(w, sglangPage)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	s := New(engine.NewRegistry(), 1<<20)
	tg := target(t, config.Target{URL: srv.URL + "/metrics", ScrapeTimeout: 300_000_000})
	res := s.Scrape(context.Background(), tg)
	if res.Reason != signal.ReasonTimeout {
		t.Errorf("a page stuck halfway: reason %q (%v), want timeout", res.Reason, res.Err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	tg.Timeout = time.Minute
	res = s.Scrape(ctx, tg)
	if res.OK() || time.Since(start) > 10*time.Second || !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("a cancelled scrape: ok %v after %v (%v)", res.OK(), time.Since(start), res.Err)
	}
	once.Do(func() { close(release) })
	fast := target(t, config.Target{URL: srv.URL + "/metrics?fast=1"})
	if res := s.Scrape(context.Background(), fast); !res.OK() {
		t.Fatalf("a scrape after them: %v", res.Err)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3: neither the timed-out nor the cancelled one kept", n)
	}
}

// TestDirectOnlyForPlainTargets: auth, a proxy, redirects, extra headers,
// user info or https keep net/http's client.
func TestDirectOnlyForPlainTargets(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  string
		cfg  promcfg.HTTPClientConfig
	}{
		{"basic auth", "http://h:1", promcfg.HTTPClientConfig{BasicAuth: &promcfg.BasicAuth{Username: "u"}}},
		{"bearer", "http://h:1", promcfg.HTTPClientConfig{BearerToken: "t"}},
		{"authorization", "http://h:1", promcfg.HTTPClientConfig{Authorization: &promcfg.Authorization{Type: "Bearer", Credentials: "t"}}},
		{"proxy from env", "http://h:1", promcfg.HTTPClientConfig{ProxyConfig: promcfg.ProxyConfig{ProxyFromEnvironment: true}}},
		{"redirects", "http://h:1", promcfg.HTTPClientConfig{FollowRedirects: true}},
		{"headers", "http://h:1", promcfg.HTTPClientConfig{HTTPHeaders: &promcfg.Headers{}}},
		{"user info", "http://u:p@h:1", promcfg.HTTPClientConfig{}},
		{"https", "https://h:1", promcfg.HTTPClientConfig{}},
	} {
		tg, err := NewTarget(&config.Target{URL: tc.url, HTTPClientConfig: tc.cfg})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tg.direct {
			t.Errorf("%s: read by the direct client, want net/http's", tc.name)
		}
	}
}

// TestDirectIdleExpires: a kept connection that is not used again (its
// target left the config) is closed once it has idled directIdleTimeout.
func TestDirectIdleExpires(t *testing.T) {
	old := directIdleTimeout
	directIdleTimeout = 100 * time.Millisecond
	t.Cleanup(func() { directIdleTimeout = old })
	var closed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, sglangPage) }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := New(engine.NewRegistry(), 1<<20)
	if res := s.Scrape(context.Background(), target(t, config.Target{URL: srv.URL})); !res.OK() {
		t.Fatal(res.Err)
	}
	for i := 0; closed.Load() == 0; i++ {
		if i > 200 {
			t.Fatal("the idle connection was not closed 2 s after its idle timeout of 100 ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.direct.mu.Lock()
	n := len(s.direct.idle)
	s.direct.mu.Unlock()
	if n != 0 {
		t.Errorf("%d hosts with idle connections after the timeout, want none", n)
	}
}

// TestDirectSkipsInformational: a 103 Early Hints before the answer is
// skipped, as net/http's client does.
func TestDirectSkipsInformational(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(sglangPage), sglangPage)
		time.Sleep(100 * time.Millisecond)
	}()
	res := New(engine.NewRegistry(), 1<<20).Scrape(context.Background(), target(t, config.Target{URL: "http://" + ln.Addr().String()}))
	if !res.OK() || res.Server.Capacity.V != 100000 {
		t.Fatalf("after a 103: %s %v", res.Reason, res.Err)
	}
}

// TestDirectEndlessBody: a body that never ends is cut at the body limit
// and its connection closed, not drained until the scrape's deadline.
func TestDirectEndlessBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, sglangPage)
		chunk := []byte(strings.Repeat("# filler\n", 1000))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	tg := target(t, config.Target{URL: srv.URL, ScrapeTimeout: model.Duration(30 * time.Second)})
	start := time.Now()
	res := New(engine.NewRegistry(), 1<<20).Scrape(context.Background(), tg)
	if res.Reason != signal.ReasonTooLarge {
		t.Errorf("reason %q (%v), want too_large", res.Reason, res.Err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the scrape took %v of its 30 s: the endless body was drained, not cut", d)
	}
}

// TestDirectRetryOnNewConnection: a server closes each connection after
// its answer without saying so, and two scrapes of targets on it overlap,
// so that two kept connections wait for the next scrape, both closed by
// the server. The scrape that finds the first one dead must retry on a new
// connection, not on the other dead one: no scrape fails.
func TestDirectRetryOnNewConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The server answers once `want` requests are waiting, then closes
	// each connection and says so on closed.
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	waiting, want := 0, 0
	closed := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					c.Close()
					return
				}
				mu.Lock()
				waiting++
				cond.Broadcast()
				for waiting < want {
					cond.Wait()
				}
				mu.Unlock()
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s", len(sglangPage), sglangPage)
				c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	expect := func(n int) {
		mu.Lock()
		waiting, want = 0, n
		mu.Unlock()
	}
	s := New(engine.NewRegistry(), 1<<20)
	base := "http://" + ln.Addr().String()
	a, b := target(t, config.Target{URL: base + "/a"}), target(t, config.Target{URL: base + "/b"})
	for round := range 20 {
		// Two scrapes at once: two connections kept, then closed.
		expect(2)
		for _, res := range s.ScrapeAll(context.Background(), []*Target{a, b}, 2) {
			if !res.OK() {
				t.Fatalf("round %d, two at once: %s %v", round, res.Reason, res.Err)
			}
		}
		<-closed
		<-closed
		// One scrape finds two dead connections.
		expect(1)
		if res := s.Scrape(context.Background(), a); !res.OK() {
			t.Fatalf("round %d, one after two closed connections: %s %v", round, res.Reason, res.Err)
		}
		<-closed
	}
}
