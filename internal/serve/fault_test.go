package serve

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// faultServers starts one loopback server per fault; each is a real HTTP
// server misbehaving the way broken engines and proxies do.
func faultServers(t *testing.T) map[string]string {
	t.Helper()
	good := page(t, "sglang-dp2.prom")
	var flaps, restarts atomic.Int64
	restarted := bytes.ReplaceAll(bytes.ReplaceAll(good, []byte("} 1000\n"), []byte("} 10\n")), []byte("} 2000\n"), []byte("} 20\n"))
	urls := map[string]string{}
	add := func(name string, h http.HandlerFunc) { urls[name] = engineServerFunc(t, h).URL }

	add("good", func(w http.ResponseWriter, r *http.Request) { w.Write(good) })
	add("hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	add("error500", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Internal Server Error: CUDA out of memory", http.StatusInternalServerError)
	})
	add("garbage", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>\x00\x01\x02 bad gateway {{{ </body></html>\n"))
	})
	add("midbody", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(good)))
		w.WriteHeader(http.StatusOK)
		w.Write(good[:len(good)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	add("endless", testenv.EndlessBody)
	add("gzipbomb", testenv.GzipBomb())
	add("flap", func(w http.ResponseWriter, r *http.Request) {
		if flaps.Add(1)%2 == 0 {
			http.Error(w, "flapping", http.StatusBadGateway)
			return
		}
		w.Write(good)
	})
	add("restart", func(w http.ResponseWriter, r *http.Request) {
		if restarts.Add(1) <= 2 {
			w.Write(good)
			return
		}
		w.Write(restarted) // counters went down: the engine restarted
	})
	return urls
}

func TestFaultsAreBoundedAndIsolated(t *testing.T) {
	urls := faultServers(t)
	names := []string{"good", "hang", "error500", "garbage", "midbody", "endless", "gzipbomb", "flap", "restart"}
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 500ms\n  body_size_limit: 1MiB\ntargets:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - {name: %s, url: %q}\n", n, urls[n])
	}
	cfg := writeFile(t, t.TempDir(), "kvwatch.yml", b.String())
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})
	g := d.Gatherer()

	failures := func(name, reason string) float64 {
		s := series(t, g, signal.TargetScrapeFailures.Name, map[string]string{"server": name, signal.LabelReason: reason})
		for _, v := range s {
			return v
		}
		return 0
	}
	want := map[string]string{
		"hang":     signal.ReasonTimeout,
		"error500": signal.ReasonHTTPError,
		"garbage":  signal.ReasonNotMetrics,
		"midbody":  signal.ReasonTruncated,
		"endless":  signal.ReasonTooLarge,
		"gzipbomb": signal.ReasonTooLarge,
		"flap":     signal.ReasonHTTPError,
	}
	for name, reason := range want {
		waitFor(t, name+" to fail with "+reason, func() bool { return failures(name, reason) >= 1 })
	}
	waitFor(t, "flap to come back up", func() bool {
		return one(t, g, signal.TargetUp.Name, map[string]string{"server": "flap"}) == 1
	})
	waitFor(t, "the restarted target's lower counter", func() bool {
		s := series(t, g, signal.PromptTokens.Name, map[string]string{"server": "restart"})
		return len(s) == 1 && one(t, g, signal.PromptTokens.Name, map[string]string{"server": "restart"}) == 30
	})
	for _, row := range d.Report().Servers {
		if row.Name == "restart" && (row.Rates == nil || !row.Rates.Reset) {
			t.Errorf("restart row rates = %+v, want a detected counter reset", row.Rates)
		}
		if row.Name == "restart" && row.Rates != nil && row.Rates.PromptTokensPS.OK() && row.Rates.PromptTokensPS.V < 0 {
			t.Errorf("restart row prompt rate = %g, want never negative", row.Rates.PromptTokensPS.V)
		}
	}
	// Each fault is reported against its own target only.
	for name, reason := range want {
		for _, other := range names {
			if other != name && want[other] != reason && other != "good" && failures(other, reason) > 0 && name != "flap" {
				t.Errorf("%s has %s failures, which belong to %s", other, reason, name)
			}
		}
	}
	// The good target never failed and kept its schedule while the others misbehaved.
	waitFor(t, "three good scrapes", func() bool {
		return one(t, g, signal.TargetScrapes.Name, map[string]string{"server": "good"}) >= 3
	})
	if s := series(t, g, signal.TargetScrapeFailures.Name, map[string]string{"server": "good"}); len(s) != 0 {
		t.Errorf("good target failures = %v, want none", s)
	}
	if got := one(t, g, signal.KVUsedTokens.Name, map[string]string{"server": "good"}); got != 750 {
		t.Errorf("good target used = %g, want 750", got)
	}
	// Down targets export no signals, only their health.
	for name := range want {
		if name == "flap" {
			continue
		}
		if s := series(t, g, signal.KVCapacityTokens.Name, map[string]string{"server": name}); len(s) != 0 {
			t.Errorf("%s exports capacity %v while failing, want absent", name, s)
		}
	}
}

func TestNoGrowthAfterManyFailedScrapes(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 scrapes")
	}
	urls := faultServers(t)
	c := configWith(t, urls["error500"], urls["garbage"], urls["midbody"], "http://"+testenv.FreeAddr(t))
	d, err := New(Options{Pipeline: pipe(t, config.Sources{Config: c}), ListenAddresses: []string{"127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.closeListeners)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // loops stop at once; the test drives the scrape path itself
	d.apply(ctx, d.setup.Load())
	d.stopAll()
	states := make([]*targetState, 0, len(d.order))
	for _, n := range d.order {
		states = append(states, d.states[n])
	}

	run := func(n int) {
		for i := range n {
			st := states[i%len(states)]
			res, ok := d.scrapeOnce(context.Background(), st.target)
			if !ok || res.OK() {
				t.Fatalf("scrape %d of %s: ok=%v res.OK=%v, want a failed scrape", i, st.target.Name, ok, res.OK())
			}
			d.record(st, res)
		}
	}
	measure := func() (int, uint64) {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return runtime.NumGoroutine(), m.HeapAlloc
	}
	run(200) // warm up connection pools and caches
	g0, h0 := measure()
	run(10000)
	g1, h1 := measure()
	if g1 > g0+10 {
		t.Errorf("goroutines grew from %d to %d after 10,000 failed scrapes", g0, g1)
	}
	if h1 > h0+8<<20 {
		t.Errorf("heap grew from %d to %d bytes after 10,000 failed scrapes", h0, h1)
	}
	var total uint64
	for _, st := range states {
		total += st.e.scrapes
	}
	if total != 10200 {
		t.Errorf("scrapes counted = %d, want 10200", total)
	}
	t.Logf("goroutines %d -> %d, heap %d -> %d bytes", g0, g1, h0, h1)
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}

// 10,000 distinct probed URLs leave the file descriptors flat: every
// probe target shares one bounded connection pool, and evicted targets
// hold no connection.
func TestProbeManyURLsFDsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 probes")
	}
	body := page(t, "sglang-dp2.prom")
	var servers []string
	for range 4 {
		servers = append(servers, testenv.EngineServer(t, "", body).URL)
	}
	cfg := writeFile(t, t.TempDir(), "kvwatch.yml", "probe:\n  allow: [127.0.0.0/8]\n")
	d := start(t, Options{Pipeline: pipe(t, config.Sources{File: cfg})})
	probe := func(i int) {
		target := fmt.Sprintf("%s/metrics?i=%d", servers[i%len(servers)], i)
		rec := httptest.NewRecorder()
		d.serveProbe(rec, httptest.NewRequest(http.MethodGet, PathProbe+"?target="+url.QueryEscape(target), nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), signal.TargetUp.Name+`{kv_cluster="",pool="",role="unified",server="127.0.0.1:`) {
			t.Fatalf("probe %d of %s = %d:\n%s", i, target, rec.Code, rec.Body.String())
		}
	}
	for i := range 200 {
		probe(i)
	}
	before := openFDs(t)
	for i := 200; i < 10200; i++ {
		probe(i)
	}
	after := openFDs(t)
	t.Logf("open fds %d -> %d over 10,000 distinct URLs", before, after)
	if after > before+probeIdleConns/4 {
		t.Errorf("open fds grew from %d to %d over 10,000 distinct probed URLs, want flat", before, after)
	}
}

// hangingServer accepts connections on loopback and never answers; it
// returns its address.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}

// TestHangingTargetsDoNotStarveHealthyOnes: 90 of 100 targets hang, and
// their scrapes at their timeout would take 9 times the slots there are.
// The 10 healthy targets keep their schedule: each is scraped many times
// for each scrape of a hanging one. Sharing the slots first come, first
// served, every target got about the same number of scrapes.
func TestHangingTargetsDoNotStarveHealthyOnes(t *testing.T) {
	hang := hangingServer(t)
	good := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom")).URL
	var urls []string
	for i := range 100 {
		if i%10 == 0 {
			urls = append(urls, fmt.Sprintf("%s/metrics?healthy=%d", good, i))
		} else {
			urls = append(urls, fmt.Sprintf("http://%s/metrics?hanging=%d", hang, i))
		}
	}
	cfg := configWith(t, urls...)
	cfg.Global.ScrapeInterval, cfg.Global.ScrapeTimeout = model.Duration(100*time.Millisecond), model.Duration(80*time.Millisecond)
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: cfg}), MaxConcurrentScrapes: 8, Logger: slog.New(slog.DiscardHandler)})
	scrapes := func() (healthy, hanging []uint64) {
		d.mu.RLock()
		defer d.mu.RUnlock()
		for i, name := range d.order {
			n := d.states[name].e.scrapes
			if i%10 == 0 {
				healthy = append(healthy, n)
			} else {
				hanging = append(hanging, n)
			}
		}
		return healthy, hanging
	}
	// Until the hanging targets have had 2 scrapes each on average: at 8
	// slots of 80 ms, at least 1.8 s.
	var healthy, hanging []uint64
	waitFor(t, "180 scrapes of hanging targets", func() bool {
		healthy, hanging = scrapes()
		var sum uint64
		for _, n := range hanging {
			sum += n
		}
		return sum >= 180
	})
	// Meanwhile each healthy target, scheduled every 100 ms, had 18
	// scrapes or more on schedule; first come, first served it gets about
	// as many as a hanging one.
	for i, n := range healthy {
		if n < 10 {
			t.Errorf("healthy target t%d: %d scrapes while the hanging ones had 2 each on average; want at least 10", i*10, n)
		}
	}
	t.Logf("scrapes of healthy targets %v, of hanging ones %v", healthy, hanging)
}
