package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// Soak settings: KVWATCH_SOAK sets the duration (scripts/soak-hostile.sh
// runs 10m), KVWATCH_SOAK_REPORT a file for the Markdown table of samples.
const (
	soakDefault = 60 * time.Second
	soakEvery   = 10 * time.Second
	// soakRSSBound is the resident memory serve must stay under, in
	// bytes. serve holds 130–210 MiB against these targets, flat over 10
	// minutes (docs/benchmarks.md, "Hostile soak"): mostly the bodies of
	// the endless and gzip-bomb targets, read up to body_size_limit (32
	// MiB) each scrape. The bound leaves room for a busy machine's
	// garbage collector.
	soakRSSBound = 512 << 20
	// soakSeriesBound bounds the history's series: the churning target
	// adds 13 a scrape (4 new DP ranks, 3 series each, and a new model
	// label) and the history keeps 5 minutes of them at 2 s: 150 scrapes,
	// about 2,000 series, plus the steady ones.
	soakSeriesBound = 4000
)

// soakServers serves the hostile targets of the soak beyond those of
// hostileServers: NaN and infinite values, a counter that only goes down,
// labels that change on every page, a slow-loris body, endless headers,
// an endless body, a gzip bomb, a hang-up, and one real page.
func soakServers(t *testing.T) map[string]string {
	t.Helper()
	out, add := namedServers(t)
	good, err := os.ReadFile(filepath.Join("testdata", "sglang-docs-production_metrics.prom"))
	if err != nil {
		t.Fatal(err)
	}
	var churn, backwards atomic.Int64
	add("good", func(w http.ResponseWriter, r *http.Request) { w.Write(good) })
	add("nan", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{tp_rank="0"} NaN
# TYPE sglang:num_used_tokens gauge
sglang:num_used_tokens{tp_rank="0"} +Inf
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{tp_rank="0"} -1e308
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{tp_rank="0"} -Inf
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{tp_rank="0"} NaN
`)
	})
	add("backwards", func(w http.ResponseWriter, r *http.Request) {
		n := backwards.Add(1)
		fmt.Fprintf(w, "# TYPE sglang:max_total_num_tokens gauge\nsglang:max_total_num_tokens 100000\n# TYPE sglang:num_used_tokens gauge\nsglang:num_used_tokens 1000\n# TYPE sglang:prompt_tokens_total counter\nsglang:prompt_tokens_total %d\n", 1_000_000_000-5000*n)
	})
	add("churn", func(w http.ResponseWriter, r *http.Request) {
		n := churn.Add(1)
		fmt.Fprint(w, "# TYPE sglang:max_total_num_tokens gauge\n")
		for k := range int64(4) {
			fmt.Fprintf(w, "sglang:max_total_num_tokens{model_name=\"churn-%d\",dp_rank=\"%d\",tp_rank=\"0\"} 1000\n", n, 4*n+k)
		}
		fmt.Fprint(w, "# TYPE sglang:num_used_tokens gauge\n")
		for k := range int64(4) {
			fmt.Fprintf(w, "sglang:num_used_tokens{model_name=\"churn-%d\",dp_rank=\"%d\",tp_rank=\"0\"} %d\n", n, 4*n+k, 10*k)
		}
	})
	add("slowloris", testenv.SlowLoris)
	add("endlessheaders", func(w http.ResponseWriter, r *http.Request) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(buf, "X-Pad-%d: %s\r\n", i, strings.Repeat("p", 100)); err != nil {
				return
			}
			if i%100 == 0 && buf.Flush() != nil {
				return
			}
		}
	})
	add("endlessbody", testenv.EndlessBody)
	add("gzipbomb", testenv.GzipBomb())
	add("hangup", testenv.HangUp)
	return out
}

// soakSample is one measurement of serve.
type soakSample struct {
	at            time.Duration
	rss           int64   // bytes, VmRSS
	cpu           float64 // seconds, utime + stime since start
	heap, series  float64 // go_memstats_heap_inuse_bytes, kvwatch_history_series
	goodUp, scrap float64 // the real page's target up; scrapes of every target
}

// procStats reads a process's resident set (bytes) and CPU time (seconds,
// at Linux's USER_HZ of 100).
func procStats(pid int) (rss int64, cpu float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			rss = kb << 10
		}
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return rss, (ut + stime) / 100, nil
}

// metricSum sums the samples of name (with any labels matching the
// given label text, "" for all) on a /metrics page.
func metricSum(page, name, labels string) float64 {
	var s float64
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+" ") && !strings.HasPrefix(l, name+"{") || !strings.Contains(l, labels) {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			s += v
		}
	}
	return s
}

// TestSoakHostile runs the built kvwatch serve, history on (5 minutes),
// against every hostile target of hostileServers and soakServers, scraped
// every 2 s, beside one real page, for KVWATCH_SOAK (default 60s),
// measuring serve's resident memory and CPU from /proc every 10 s. It
// asserts memory counts only (no timing): serve's RSS stays under
// soakRSSBound, the history's series under soakSeriesBound, serve answers
// every sample, and the real page's target is up in one of them.
func TestSoakHostile(t *testing.T) {
	dur := soakDefault
	if v := os.Getenv("KVWATCH_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("KVWATCH_SOAK=%q: %v; write a duration such as 10m", v, err)
		}
		dur = d
	}
	bin := filepath.Join(strings.SplitN(kvwatchOnPath(t), string(os.PathListSeparator), 2)[0], "kvwatch")
	urls := soakServers(t)
	for name, u := range hostileServers(t) {
		urls[name] = u
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\ntargets:\n")
	for name, u := range urls {
		fmt.Fprintf(&cfg, "  - {name: %s, url: %q}\n", name, u)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	base := "http://" + addr
	p := testenv.Start(t, filepath.Join(dir, "serve.log"), bin, "serve", "--config.file", cfgFile,
		"--web.listen-address", addr, "--history", "5m", "--history.snapshot-file", filepath.Join(dir, "history.snap"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	testenv.WaitOK(ctx, t, base+"/-/ready")
	cancel()
	log := func() string { b, _ := os.ReadFile(p.Log()); return string(b) }

	var samples []soakSample
	start := time.Now()
	for i := 0; ; i++ {
		if next := start.Add(time.Duration(i) * soakEvery); time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
		s := soakSample{at: time.Since(start).Round(time.Second)}
		var err error
		if s.rss, s.cpu, err = procStats(p.Pid()); err != nil {
			t.Fatalf("serve is gone after %s: %v\n%s", s.at, err, log())
		}
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatalf("serve does not answer after %s: %v\n%s", s.at, err, log())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(b)
		s.heap = metricSum(page, "go_memstats_heap_inuse_bytes", "")
		s.series = metricSum(page, "kvwatch_history_series", "")
		s.goodUp = metricSum(page, "kvwatch_target_up", `server="good"`)
		s.scrap = metricSum(page, "kvwatch_target_scrapes_total", "")
		samples = append(samples, s)
		if s.at >= dur {
			break
		}
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "| time | RSS | Go heap in use | history series | CPU-seconds | CPU over the last 10 s | scrapes |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for i, s := range samples {
		cores := "–"
		if i > 0 {
			cores = fmt.Sprintf("%.2f cores", (s.cpu-samples[i-1].cpu)/(s.at-samples[i-1].at).Seconds())
		}
		fmt.Fprintf(&tab, "| %s | %.1f MiB | %.1f MiB | %.0f | %.1f | %s | %.0f |\n", s.at, float64(s.rss)/(1<<20), s.heap/(1<<20), s.series, s.cpu, cores, s.scrap)
	}
	t.Logf("serve against %d hostile targets and one real page, every 2 s:\n%s", len(urls)-1, tab.String())
	if f := os.Getenv("KVWATCH_SOAK_REPORT"); f != "" {
		if err := os.WriteFile(f, []byte(tab.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, s := range samples {
		if s.rss > soakRSSBound {
			t.Errorf("serve's RSS at %s is %.1f MiB, over the %d MiB bound", s.at, float64(s.rss)/(1<<20), soakRSSBound>>20)
		}
		if s.series > soakSeriesBound {
			t.Errorf("the history holds %.0f series at %s, over %d: churned series are not dropped", s.series, s.at, soakSeriesBound)
		}
	}
	up := false
	for _, s := range samples {
		up = up || s.goodUp == 1
	}
	if !up {
		t.Errorf("the real page's target was never up beside the hostile ones\n%s", log())
	}
}
