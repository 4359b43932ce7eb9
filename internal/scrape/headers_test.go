package scrape

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// rawServer listens on loopback and answers every connection's first
// request with answer, written on the connection as it likes; the
// connection is closed when answer returns or the test ends (done is
// closed then).
func rawServer(t *testing.T, answer func(c net.Conn, done <-chan struct{})) string {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return "http://" + connServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		answer(c, done)
	}) + "/metrics"
}

// endless writes head, then chunk over and over until 64 MiB are written,
// the client goes or the test ends; then it holds the connection open.
func endless(head string, chunk []byte) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, done <-chan struct{}) {
		if _, err := c.Write([]byte(head)); err != nil {
			return
		}
		for n := 0; n < 64<<20; n += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
		<-done
	}
}

// TestHostileHeaders: a target whose answer has a head without end (many
// header lines, one endless line, an endless status line) fails with
// reason too_large as soon as it is past 64 KiB, whatever the deadline,
// and the scrape allocates a bounded amount; one that sends its headers
// slowly fails at the deadline with reason timeout; a head just under the
// limit is read, and so is the page after it. Plain targets are read by
// the direct client, a /probe target by the pooled net/http client, a
// target with auth by prometheus/common's.
func TestHostileHeaders(t *testing.T) {
	line := []byte("X-Pad: " + strings.Repeat("p", 93) + "\r\n") // 102 bytes
	lines := bytes.Repeat(line, 10_000)
	xs := bytes.Repeat([]byte("x"), 1<<20)
	underLimit := "HTTP/1.1 200 OK\r\n" + strings.Repeat(string(line), 600) + // 61,200 bytes
		fmt.Sprintf("Content-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s", len(sglangPage), sglangPage)
	cases := []struct {
		name    string
		answer  func(net.Conn, <-chan struct{})
		timeout time.Duration
		reason  string // "" for a scrape that works
		msg     string
	}{
		{"endless header lines", endless("HTTP/1.1 200 OK\r\n", lines), time.Minute, signal.ReasonTooLarge, "more than 64KiB of response headers"},
		{"one endless header line", endless("HTTP/1.1 200 OK\r\nX-Pad: ", xs), time.Minute, signal.ReasonTooLarge, "more than 64KiB of response headers"},
		{"endless status line", endless("HTTP/1.1 200 ", xs), time.Minute, signal.ReasonTooLarge, "more than 64KiB of response headers"},
		// 20 KiB each: the fourth is over the limit, before the eighth
		// ends the scrape by their count.
		{"large informational answers", endless("", []byte("HTTP/1.1 103 Early Hints\r\n"+strings.Repeat("Link: </a.css>; rel=preload\r\n", 700)+"\r\n")), time.Minute, signal.ReasonTooLarge, "more than 64KiB of response headers"},
		// A byte at a time: the deadline cuts a line in two.
		{"slow headers", func(c net.Conn, done <-chan struct{}) {
			head := []byte("HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Slow: 1\r\n", 1000))
			for i := range head {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
				if _, err := c.Write(head[i : i+1]); err != nil {
					return
				}
			}
		}, 300 * time.Millisecond, signal.ReasonTimeout, "no complete answer within 300ms"},
		{"60 KiB of headers and a page", func(c net.Conn, _ <-chan struct{}) { c.Write([]byte(underLimit)) }, time.Minute, "", ""},
	}
	clients := []struct {
		name   string
		direct bool
		target func(*config.Target) (*Target, error)
	}{
		{"direct", true, NewTarget},
		{"probe", false, func(ct *config.Target) (*Target, error) { return NewTargetWithClient(ct, NewPooledClient(4)) }},
		{"auth", false, func(ct *config.Target) (*Target, error) {
			ct.HTTPClientConfig.BearerToken = "t0ken"
			return NewTarget(ct)
		}},
	}
	for _, client := range clients {
		for _, tc := range cases {
			t.Run(client.name+"/"+tc.name, func(t *testing.T) {
				tg, err := client.target(&config.Target{URL: rawServer(t, tc.answer), ScrapeTimeout: model.Duration(tc.timeout)})
				if err != nil {
					t.Fatal(err)
				}
				if tg.direct != client.direct {
					t.Fatalf("target read by the direct client: %v, want %v", tg.direct, client.direct)
				}
				s := New(engine.NewRegistry(), 1<<20)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				res := s.Scrape(context.Background(), tg)
				runtime.ReadMemStats(&after)
				if tc.reason == "" {
					if !res.OK() || res.Server.Capacity.V != 100000 {
						t.Fatalf("scrape failed: %s %v", res.Reason, res.Err)
					}
					return
				}
				if res.Reason != tc.reason || !strings.Contains(res.Err.Error(), tc.msg) {
					t.Errorf("reason %q, err %v; want %s and %q", res.Reason, res.Err, tc.reason, tc.msg)
				}
				// 64 KiB of head is parsed into a few copies of itself; a
				// scrape that reads on holds megabytes.
				if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
					t.Errorf("the scrape allocated %d bytes, want at most 4 MiB", got)
				}
			})
		}
	}
}
