package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// Synthetic kvwatch_* history with a known truth, written into real stores
// for `kvwatch plan`: Prometheus (Debian's promtool writes blocks from
// OpenMetrics files) and VictoriaMetrics (its import API).

const histDay = 24 * time.Hour

// synthPool is a pool whose noise-free daily peak load is (base + growth·d)
// times its first capacity, d days after the history's start, reached at
// 14:00 UTC (the daily cycle's top).
type synthPool struct {
	role, cluster string
	servers       int
	size          float64 // tokens per server
	base, growth  float64
	// addAt is when one server of size more joins (days after the start;
	// 0: never); startAt when the pool's series begin.
	addAt, startAt float64
	// demand: 5 % of the load is queued demand (SGLang PD decode), the
	// rest used.
	demand bool
	// restartAt is when server 1 is down for 3 hours (0: never), its load
	// spread over the others.
	restartAt float64
}

// name is the pool's name in kvwatch's output.
func (p synthPool) name() string {
	return kv.PoolKey{Role: kv.Role(p.role), Cluster: p.cluster}.String()
}

// firstCapacity is the pool's capacity at the start, tokens.
func (p synthPool) firstCapacity() float64 { return float64(p.servers) * p.size }

// capacityNow is the pool's capacity at the end of the history.
func (p synthPool) capacityNow() float64 {
	if p.addAt > 0 {
		return p.firstCapacity() + p.size
	}
	return p.firstCapacity()
}

// peakAt is the noise-free peak load d days after the start, tokens.
func (p synthPool) peakAt(d float64) float64 { return (p.base + p.growth*d) * p.firstCapacity() }

// truthDay is when the noise-free peak reaches ratio of the capacity at
// the end, in days after the start.
func (p synthPool) truthDay(ratio float64) float64 {
	return (ratio*p.capacityNow()/p.firstCapacity() - p.base) / p.growth
}

// outage is a time when nothing was written to the store (the collector
// was down), in days after the start.
type outage struct{ from, to float64 }

// synthSeries is one series and its samples, oldest first.
type synthSeries struct {
	name    string
	labels  string // {server="…",role="…",cluster="…",pool=""} without pool when empty
	samples []synthSample
}

type synthSample struct {
	ms int64
	v  float64
}

// synthHistory generates every series of pools from start for days, one
// sample per step, with ±noise (a ratio) on each pool's load at each
// instant.
func synthHistory(pools []synthPool, start time.Time, days float64, step time.Duration, noise float64, outages []outage, seed uint64) []*synthSeries {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []*synthSeries
	for _, p := range pools {
		n := p.servers
		if p.addAt > 0 {
			n++
		}
		type server struct{ used, capacity, running, demand *synthSeries }
		srv := make([]server, n)
		for i := range srv {
			lbl := fmt.Sprintf(`{%s=%q,%s=%q,%s=%q}`, signal.LabelServer, fmt.Sprintf("%s-%s-%d", p.cluster, p.role, i),
				signal.LabelRole, p.role, signal.LabelCluster, p.cluster)
			srv[i] = server{
				used:     &synthSeries{name: signal.KVUsedTokens.Name, labels: lbl},
				capacity: &synthSeries{name: signal.KVCapacityTokens.Name, labels: lbl},
				running:  &synthSeries{name: signal.RequestsRunning.Name, labels: lbl},
			}
			out = append(out, srv[i].used, srv[i].capacity, srv[i].running)
			if p.demand {
				srv[i].demand = &synthSeries{name: signal.KVDemandTokens.Name, labels: lbl}
				out = append(out, srv[i].demand)
			}
		}
		for t := start; t.Sub(start) <= time.Duration(days*float64(histDay)); t = t.Add(step) {
			d := float64(t.Sub(start)) / float64(histDay)
			shake := 1 + noise*(2*rng.Float64()-1) // drawn at every instant, so the noise does not depend on outages
			if d < p.startAt || slicesContainsOutage(outages, d) {
				continue
			}
			hour := float64(t.UTC().Hour()) + float64(t.UTC().Minute())/60
			cycle := 0.55 + 0.45*math.Cos(2*math.Pi*(hour-14)/24)
			load := p.peakAt(d) * cycle * shake
			var up []int
			for i := range n {
				if i == p.servers && (p.addAt == 0 || d < p.addAt) {
					continue // not added yet
				}
				if i == 1 && p.restartAt > 0 && d >= p.restartAt && d < p.restartAt+3.0/24 {
					continue // restarting
				}
				up = append(up, i)
			}
			ms := t.UnixMilli()
			for _, i := range up {
				share := load / float64(len(up))
				used := share
				if p.demand {
					used = 0.95 * share
					srv[i].demand.samples = append(srv[i].demand.samples, synthSample{ms, math.Round(0.05 * share)})
				}
				used = math.Round(min(used, p.size))
				srv[i].used.samples = append(srv[i].used.samples, synthSample{ms, used})
				srv[i].capacity.samples = append(srv[i].capacity.samples, synthSample{ms, p.size})
				srv[i].running.samples = append(srv[i].running.samples, synthSample{ms, math.Round(used / 2000)})
			}
		}
	}
	return out
}

func slicesContainsOutage(os []outage, d float64) bool {
	for _, o := range os {
		if d >= o.from && d < o.to {
			return true
		}
	}
	return false
}

// writeOpenMetricsDays writes the series as one OpenMetrics file per day
// (promtool reads a file once per 2-hour block it spans: a file per day
// keeps that to 12 passes over a day's samples) and returns the files.
func writeOpenMetricsDays(t testing.TB, dir string, series []*synthSeries, start time.Time, days int) []string {
	t.Helper()
	var files []string
	for day := range days + 1 {
		from, to := start.Add(time.Duration(day)*histDay).UnixMilli(), start.Add(time.Duration(day+1)*histDay).UnixMilli()
		path := filepath.Join(dir, fmt.Sprintf("day-%02d.om", day))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		wrote := false
		typed := map[string]bool{}
		// OpenMetrics wants each family's samples together: the series
		// are grouped by name here.
		for _, name := range []string{signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name, signal.RequestsRunning.Name, signal.KVDemandTokens.Name} {
			for _, s := range series {
				if s.name != name {
					continue
				}
				for _, smp := range s.samples {
					if smp.ms < from || smp.ms >= to {
						continue
					}
					if !typed[name] {
						fmt.Fprintf(w, "# TYPE %s gauge\n", name)
						typed[name] = true
					}
					fmt.Fprintf(w, "%s%s %s %s\n", name, s.labels, strconv.FormatFloat(smp.v, 'f', -1, 64), strconv.FormatFloat(float64(smp.ms)/1000, 'f', 3, 64))
					wrote = true
				}
			}
		}
		fmt.Fprintln(w, "# EOF")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if wrote {
			files = append(files, path)
		}
	}
	return files
}

// prometheusWithHistory writes series into a new Prometheus data directory
// with promtool, starts Debian's Prometheus on it on loopback and returns
// its base URL. promtool writes a block per 2 hours; with compact,
// Prometheus merges them as it would have over the days (a dozen blocks
// for two weeks) before this returns, else it leaves them as they are.
func prometheusWithHistory(t testing.TB, series []*synthSeries, start time.Time, days int, compact bool) string {
	t.Helper()
	promtool := testenv.Tool(t, "prometheus", "promtool")
	prom := testenv.Tool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	files := writeOpenMetricsDays(t, dir, series, start, days)
	// Two promtools at a time: the machine is shared.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for _, f := range files {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", f, data).CombinedOutput()
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("promtool %s: %v: %s", filepath.Base(f), err, out))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "\n"))
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1m\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + data, "--storage.tsdb.retention.time=3650d", "--web.listen-address=" + addr}
	if !compact {
		// The blocks stay as promtool wrote them: Prometheus spends no
		// CPU merging them while the test queries.
		args = append(args, "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h")
	}
	testenv.Start(t, filepath.Join(dir, "prometheus.log"), prom, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	base := "http://" + addr
	testenv.WaitOK(ctx, t, base+"/-/ready")
	if compact {
		waitCompacted(ctx, t, base, days)
	}
	return base
}

// waitCompacted waits until Prometheus holds at most days blocks, the
// same number three polls in a row.
func waitCompacted(ctx context.Context, t testing.TB, base string, days int) {
	t.Helper()
	last, same := -1, 0
	for same < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus still holds %d blocks", last)
		case <-time.After(2 * time.Second):
		}
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		n := -1
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "prometheus_tsdb_blocks_loaded "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				n = int(f)
			}
		}
		resp.Body.Close()
		if n == last && n >= 0 && n <= days {
			same++
		} else {
			same = 0
		}
		last = n
	}
}

// victoriaMetrics starts an empty VictoriaMetrics on loopback and returns
// its base URL.
func victoriaMetrics(t testing.TB) string {
	t.Helper()
	bin := testenv.VictoriaMetrics(t, "victoria-metrics")
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	testenv.Start(t, filepath.Join(dir, "vm.log"), bin, "-storageDataPath="+filepath.Join(dir, "vmdata"), "-httpListenAddr="+addr,
		"-retentionPeriod=100y", "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := "http://" + addr
	testenv.WaitOK(ctx, t, base+"/health")
	return base
}

// importVictoriaMetrics writes series through VictoriaMetrics' import API
// (Prometheus text with timestamps in milliseconds) and flushes them so
// that queries see them.
func importVictoriaMetrics(t testing.TB, base string, series []*synthSeries) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 1<<20)
		for _, s := range series {
			for _, smp := range s.samples {
				fmt.Fprintf(w, "%s%s %s %d\n", s.name, s.labels, strconv.FormatFloat(smp.v, 'f', -1, 64), smp.ms)
			}
		}
		pw.CloseWithError(w.Flush())
	}()
	resp, err := http.Post(base+"/api/v1/import/prometheus", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("import into VictoriaMetrics: %s", resp.Status)
	}
	resp, err = http.Get(base + "/internal/force_flush")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
