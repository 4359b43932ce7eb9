package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// refusals returns kvwatch_web_requests_refused_total by reason.
func refusals(t *testing.T, d *running) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range []string{signal.RefusedHost, signal.RefusedCrossOrigin, signal.RefusedLoginThrottled, signal.RefusedBusy} {
		out[r] = one(t, d.own, signal.WebRequestsRefused.Name, map[string]string{signal.LabelReason: r})
	}
	return out
}

// TestGuardRefusesOtherOriginsAndNames: a page of another origin made two
// no-cors fetches of serve's API and burned 42.9 CPU-seconds; DNS
// rebinding reaches serve under the attacker's host name. Both are
// refused before a route runs; a program's requests, serve's own pages and
// links to them are not.
func TestGuardRefusesOtherOriginsAndNames(t *testing.T) {
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), AllowedHosts: []string{"kvwatch.internal"}})
	own := d.Addrs()[0].String()
	_, port, _ := net.SplitHostPort(own)
	fetch := func(site, mode, dest string) map[string]string {
		return map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest}
	}
	for _, c := range []struct {
		name, method, path, host string
		header                   map[string]string
		want                     int
		reason                   string // the refusal counted; "" for none
	}{
		{"curl", "GET", PathReport, "", nil, 200, ""},
		{"serve's UI fetching its API", "GET", PathReport, "", fetch("same-origin", "cors", "empty"), 200, ""},
		{"an address typed in", "GET", "/", "", fetch("none", "navigate", "document"), 200, ""},
		{"no-cors fetch from another site", "GET", PathReport, "", fetch("cross-site", "no-cors", "empty"), 403, signal.RefusedCrossOrigin},
		{"fetch from another port of the host", "GET", PathReport, "", fetch("same-site", "cors", "empty"), 403, signal.RefusedCrossOrigin},
		{"image from another site", "GET", PathMetrics, "", fetch("cross-site", "no-cors", "image"), 403, signal.RefusedCrossOrigin},
		{"link from another site", "GET", "/", "", fetch("cross-site", "navigate", "document"), 200, ""},
		{"frame in another site's page", "GET", "/", "", fetch("cross-site", "navigate", "iframe"), 403, signal.RefusedCrossOrigin},
		{"form posted from another site", "POST", PathReload, "", fetch("cross-site", "navigate", "document"), 403, signal.RefusedCrossOrigin},
		{"older browser, another origin", "POST", PathReload, "", map[string]string{"Origin": "http://evil.example"}, 403, signal.RefusedCrossOrigin},
		{"older browser, opaque origin", "GET", PathReport, "", map[string]string{"Origin": "null"}, 403, signal.RefusedCrossOrigin},
		{"older browser, serve's own origin", "POST", PathReload, "", map[string]string{"Origin": "http://" + own}, 501, ""},
		{"DNS rebinding", "GET", PathReport, "evil.example:" + port, fetch("same-origin", "cors", "empty"), 403, signal.RefusedHost},
		{"DNS rebinding, no port", "GET", PathReport, "evil.example", nil, 403, signal.RefusedHost},
		{"localhost", "GET", PathReport, "localhost:" + port, nil, 200, ""},
		{"a name under localhost", "GET", PathReport, "app.localhost:" + port, nil, 200, ""},
		{"an IPv6 literal", "GET", PathReport, "[::1]:" + port, nil, 200, ""},
		{"an allowed name, another case and a final dot", "GET", PathReport, "KVWatch.Internal.:" + port, nil, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := refusals(t, d)
			req, err := http.NewRequest(c.method, d.base+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.host != "" {
				req.Host = c.host
			}
			for k, v := range c.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %s = %d, want %d: %s", c.method, c.path, resp.StatusCode, c.want, body)
			}
			after := refusals(t, d)
			for r, n := range after {
				want := before[r]
				if r == c.reason {
					want++
				}
				if n != want {
					t.Errorf("refusals for %s: %v, want %v", r, n, want)
				}
			}
			if c.reason == signal.RefusedHost && !strings.Contains(string(body), "--web.allowed-hosts=evil.example") {
				t.Errorf("the refusal does not say how to allow the name: %s", body)
			}
		})
	}
}

func TestAllowedHostsMustBeNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		allowed []string
		want    string
	}{
		{"names and any", []string{"kvwatch.example.com", "kvwatch", "monitoring_box.", "*"}, ""},
		{"a URL, a port, an empty name", []string{"http://kvwatch", "kvwatch:9477", ""},
			`--web.allowed-hosts "http://kvwatch", "kvwatch:9477", "": not a host name; give names without scheme or port, e.g. kvwatch.example.com (IP addresses and localhost need none), or * for any`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := New(Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), ListenAddresses: []string{"127.0.0.1:0"}, AllowedHosts: c.allowed})
			if d != nil {
				d.Close()
			}
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("New: %q\nwant %q", got, c.want)
			}
		})
	}
}

// connCounts returns the connections a limiter holds open and how many
// of them are busy with a request.
func connCounts(l *connLimiter) (open, busy int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if !c.idle {
			busy++
		}
	}
	return len(l.conns), busy
}

// dial opens n connections to addr, closed when the test ends.
func dial(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	out := make([]net.Conn, n)
	for i := range out {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		out[i] = c
	}
	return out
}

// closedByServer counts the connections the server has closed: a read
// returns at once, where an open one waits until the deadline.
func closedByServer(conns []net.Conn) int {
	var n atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			var b [1]byte
			if _, err := c.Read(b[:]); err != nil {
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// ask sends a GET of path on a new connection and returns the response
// (with its body read) and whether the server closed the connection.
func ask(t *testing.T, addr, path string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang, not a speed limit
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// TestConnectionCap: 2,000 idle connections kept serve's descriptors
// until it could not accept its probes. 300 connections that say nothing,
// or half a request header, against a cap of 100: serve keeps 100, closing
// the idlest to make room, and still answers its health checks; with every
// slot busy with a request, a spare connection answers the health checks
// only.
func TestConnectionCap(t *testing.T) {
	release := make(chan struct{})
	var slow atomic.Int32
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), MaxConnections: 100}, func(d *Daemon) {
		d.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slow.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
	})
	t.Cleanup(func() { close(release) }) // before the daemon stops
	addr := d.Addrs()[0].String()
	closed := func(reason string) float64 {
		return one(t, d.own, signal.WebConnectionsClosed.Name, map[string]string{signal.LabelReason: reason})
	}

	idle := dial(t, addr, 300)
	for _, c := range idle[150:] {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ", PathMetrics) // closed already, or it fails later
	}
	waitFor(t, "serve to close 200 of 300 idle connections", func() bool { return closedByServer(idle) == 200 })
	if open, _ := connCounts(d.conns); open != 100 {
		t.Errorf("%d connections open, want the cap, 100", open)
	}
	for i, p := range []string{signal.PathHealthy, signal.PathReady} {
		if resp, body := ask(t, addr, p); resp.StatusCode != 200 {
			t.Errorf("GET %s behind 300 idle connections = %d: %s", p, resp.StatusCode, body)
		}
		if i == 0 { // the next one may come before serve has closed this one
			if got := closed(signal.ClosedIdle); got != 201 {
				t.Errorf("%s{reason=idle} = %v, want 201 (200, and one for the health check)", signal.WebConnectionsClosed.Name, got)
			}
		}
	}
	for _, c := range idle {
		c.Close()
	}
	waitFor(t, "serve to see the idle connections go", func() bool { open, _ := connCounts(d.conns); return open == 0 })

	// Every slot busy with a request.
	busy := dial(t, addr, 100)
	for _, c := range busy {
		fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	}
	waitFor(t, "100 requests in flight", func() bool { return slow.Load() == 100 })
	resp, body := ask(t, addr, signal.PathHealthy)
	if resp.StatusCode != 200 || !resp.Close {
		t.Errorf("GET %s with every slot busy = %d (closing: %v), want 200 on a spare connection that closes: %s", signal.PathHealthy, resp.StatusCode, resp.Close, body)
	}
	if resp, body := ask(t, addr, PathMetrics); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "--web.max-connections") {
		t.Errorf("GET %s on a spare connection = %d, want 503 naming --web.max-connections: %s", PathMetrics, resp.StatusCode, body)
	}
	if got := one(t, d.own, signal.WebMaxConnections.Name, nil); got != 100 {
		t.Errorf("%s = %v, want 100", signal.WebMaxConnections.Name, got)
	}
	waitFor(t, "the spare connections to close", func() bool { open, _ := connCounts(d.conns); return open == 100 })
	if got := one(t, d.own, signal.WebConnections.Name, nil); got != 100 {
		t.Errorf("%s = %v, want 100", signal.WebConnections.Name, got)
	}
}

// TestConnLimiterAdmit: at the cap a new connection takes the place of
// the one idle longest; with every one busy it gets a spare slot; past
// those it is closed at once.
func TestConnLimiterAdmit(t *testing.T) {
	l := newConnLimiter(2)
	l.spare = 1
	type conn struct {
		lc   *limitedConn
		peer net.Conn // the client's end
	}
	var conns []conn
	steps := []struct {
		name   string
		states map[int]http.ConnState // set before the new connection comes
		spare  bool                   // the new connection gets a spare slot
		closed []int                  // connections closed by its coming; -1 itself
	}{
		{name: "first"},
		{name: "second, at the cap"},
		{name: "past the cap, both idle: the one idle longest goes", states: map[int]http.ConnState{1: http.StateIdle}, closed: []int{0}},
		{name: "every one busy: a spare slot", states: map[int]http.ConnState{1: http.StateActive, 2: http.StateActive}, spare: true},
		{name: "the spare slot busy too: closed", states: map[int]http.ConnState{3: http.StateActive}, closed: []int{-1}},
		{name: "one idle again: it goes", states: map[int]http.ConnState{2: http.StateIdle}, closed: []int{2}},
	}
	gone := map[int]bool{}
	for i, s := range steps {
		for k, st := range s.states {
			l.connState(conns[k].lc, st)
		}
		server, client := net.Pipe()
		t.Cleanup(func() { server.Close(); client.Close() })
		lc := l.admit(server)
		conns = append(conns, conn{lc, client})
		want := map[int]bool{}
		for _, k := range s.closed {
			if k < 0 {
				k = i
			}
			want[k] = true
		}
		if (lc == nil) != want[i] {
			t.Fatalf("%s: admitted %v", s.name, lc != nil)
		}
		if lc != nil && lc.spare != s.spare {
			t.Errorf("%s: spare %v, want %v", s.name, lc.spare, s.spare)
		}
		for k, c := range conns {
			if gone[k] {
				continue
			}
			// A closed pipe's peer writes fail at once; an open one's wait
			// for a reader, here none, until the deadline.
			c.peer.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			_, err := c.peer.Write([]byte("x"))
			isClosed := err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
			if isClosed != want[k] {
				t.Errorf("%s: connection %d closed %v, want %v (%v)", s.name, k, isClosed, want[k], err)
			}
			gone[k] = isClosed
		}
	}
	open, _ := connCounts(l)
	if open != 3 {
		t.Errorf("%d connections open, want 3 (2 and the spare one)", open)
	}
	for _, c := range []struct {
		reason string
		want   float64
	}{{signal.ClosedIdle, 2}, {signal.ClosedOverLimit, 1}} {
		if got := testutil.ToFloat64(l.closed.WithLabelValues(c.reason)); got != c.want {
			t.Errorf("closed %s = %v, want %v", c.reason, got, c.want)
		}
	}
}

// TestServerTimeouts: no timeout closed an idle connection, a half-sent
// body or a client that reads nothing, each holding a descriptor (and a
// goroutine) for good. Each now ends; a route that runs longer than every
// timeout still completes, as long queries and CPU profiles do.
func TestServerTimeouts(t *testing.T) {
	bodyErr, bigErr := make(chan error, 1), make(chan error, 1)
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()})}, func(d *Daemon) {
		d.timeouts = httpTimeouts{readHeader: 10 * time.Second, read: 200 * time.Millisecond, writeStall: 200 * time.Millisecond, idle: 200 * time.Millisecond}
		d.Handle("POST /body", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			bodyErr <- err
		}))
		d.Handle("GET /big", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range 1024 {
				if _, err := w.Write(chunk); err != nil {
					bigErr <- err
					return
				}
			}
			bigErr <- nil
		}))
		d.Handle("/long", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			time.Sleep(time.Second) // longer than every timeout but the header's
			if err := r.Context().Err(); err != nil {
				http.Error(w, "canceled: "+err.Error(), 500)
				return
			}
			fmt.Fprint(w, "done "+r.Form.Get("q"))
		}))
	})
	addr := d.Addrs()[0].String()
	// wait fails the test when no error comes: a hang.
	wait := func(t *testing.T, errs chan error, what string) error {
		select {
		case err := <-errs:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still running after 30s", what)
			return nil
		}
	}

	t.Run("idle connection", func(t *testing.T) {
		c := dial(t, addr, 1)[0]
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", signal.PathHealthy, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("an idle kept-alive connection: read %v, want EOF (closed by serve)", err)
		}
	})
	t.Run("half-sent body", func(t *testing.T) {
		c := dial(t, addr, 1)[0]
		fmt.Fprintf(c, "POST /body HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n0123456789", addr)
		if err := wait(t, bodyErr, "reading a half-sent body"); err == nil {
			t.Error("reading a body that stopped after 10 of 100 bytes succeeded")
		}
	})
	t.Run("client reading nothing", func(t *testing.T) {
		c := dial(t, addr, 1)[0]
		fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		if err := wait(t, bigErr, "writing 1 GiB to a client that reads nothing"); err == nil {
			t.Error("writing 1 GiB to a client that reads nothing succeeded")
		}
	})
	t.Run("long routes", func(t *testing.T) {
		for _, c := range []struct {
			name string
			do   func() (*http.Response, error)
			want string
		}{
			{"GET", func() (*http.Response, error) { return http.Get(d.base + "/long?q=get") }, "done get"},
			{"POST", func() (*http.Response, error) { return http.PostForm(d.base+"/long", url.Values{"q": {"post"}}) }, "done post"},
			{"CPU profile", func() (*http.Response, error) { return http.Get(d.base + PathPprof + "profile?seconds=1") }, ""},
		} {
			resp, err := c.do()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || (c.want != "" && string(b) != c.want) {
				t.Errorf("%s of a route longer than the timeouts = %d %.200q, want 200 %q", c.name, resp.StatusCode, b, c.want)
			}
		}
	})
}

// linesWith returns the lines of s that contain substr.
func linesWith(s, substr string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// TestFailedLoginsThrottled: wrong passwords were neither limited nor
// logged, and each costs bcrypt (1,000 guesses: 55 CPU-seconds). A source
// fails LoginFailureBurst logins, then is answered 429 before its
// password is checked; another source is not; the failures are counted
// and logged once, not once each.
func TestFailedLoginsThrottled(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := writeFile(t, t.TempDir(), "web.yml", fmt.Sprintf("basic_auth_users:\n  prom: %s\n", hash))
	var logs testenv.Buffer
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: emptyConfig()}), WebConfigFile: webCfg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	from := func(ip string) *http.Client {
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		tr := &http.Transport{DialContext: dialer.DialContext}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	first, second := from("127.0.0.1"), from("127.0.0.2")
	req := func(c *http.Client, user, pass string) *http.Response {
		t.Helper()
		r, err := http.NewRequest("GET", d.base+PathMetrics, nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			r.SetBasicAuth(user, pass)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	const logMsg = "failed logins to kvwatch serve"

	begin := time.Now()
	var unauthorized, throttled int
	for i := range 30 {
		resp := req(first, "prom", fmt.Sprintf("guess%d", i))
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			unauthorized++
			if throttled > 0 {
				t.Errorf("guess %d checked after %d refused", i, throttled)
			}
		case http.StatusTooManyRequests:
			throttled++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > int(LoginFailureRefill/time.Second) {
				t.Errorf("guess %d: Retry-After %q, want 1 to %d seconds", i, resp.Header.Get("Retry-After"), int(LoginFailureRefill/time.Second))
			}
		default:
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	// The budget refills one failure per LoginFailureRefill, should the
	// guesses have taken that long.
	if most := LoginFailureBurst + int(time.Since(begin)/LoginFailureRefill); unauthorized < LoginFailureBurst || unauthorized > most {
		t.Errorf("%d of 30 wrong passwords checked, want %d (then 429)", unauthorized, LoginFailureBurst)
	}
	for _, c := range []struct {
		name       string
		client     *http.Client
		user, pass string
		want       int
	}{
		{"the right password from the throttled source", first, "prom", "s3cret", http.StatusTooManyRequests},
		{"no credentials from the throttled source", first, "", "", http.StatusUnauthorized},
		{"the right password from another source", second, "prom", "s3cret", http.StatusOK},
		{"a wrong password from another source", second, "prom", "nope", http.StatusUnauthorized},
	} {
		if got := req(c.client, c.user, c.pass).StatusCode; got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if got := one(t, d.own, signal.WebFailedLogins.Name, nil); got != float64(unauthorized+1) {
		t.Errorf("%s = %v, want %d", signal.WebFailedLogins.Name, got, unauthorized+1)
	}
	if got := refusals(t, d)[signal.RefusedLoginThrottled]; got != float64(throttled+1) {
		t.Errorf("refused login_throttled = %v, want %d", got, throttled+1)
	}
	if l := linesWith(logs.String(), logMsg); len(l) != 1 || !strings.Contains(l[0], "failed=1 ") {
		t.Errorf("log lines about failed logins while under attack: %q, want one, of the first", l)
	}
	d.stop()
	l := linesWith(logs.String(), logMsg)
	want := fmt.Sprintf("failed=%d throttled=%d sources=\"127.0.0.1 (%d), 127.0.0.2 (1)\"", unauthorized, throttled+1, unauthorized-1+throttled+1)
	if len(l) != 2 || !strings.Contains(l[1], want) {
		t.Errorf("log lines about failed logins after serve stopped: %q, want two, the second with %s", l, want)
	}
}
