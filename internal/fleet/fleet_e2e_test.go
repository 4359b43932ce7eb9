package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/serve"
	"github.com/kvwatch/kvwatch/internal/stack"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// scenario is a PD cluster whose decode KV fills when the router's load is
// multiplied (as in the stack's end-to-end test), plus unified servers so
// that two shards both get engines.
const scenario = `model_name: fleet
servers:
  - name: router
    engine: sglang-router
    workers: [prefill, decode]
    load: {rate: 1}
  - name: prefill
    engine: sglang
    role: prefill
    capacity_tokens: 400000
  - name: decode
    engine: sglang
    role: decode
    dp: 2
    tp: 2
    capacity_tokens: 75000
    max_running_requests: 512
  - {name: u1, engine: sglang, load: {rate: 0.2}}
  - {name: u2, engine: vllm, load: {rate: 0.2}}
  - {name: u3, engine: sglang, load: {rate: 0.2}}
  - {name: u4, engine: vllm, load: {rate: 0.2}}
`

const endpoints = 7

// grafanaVars are values for the dashboards' Grafana variables.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m",
	"$kv_cluster", ".*", "$pool", ".*", "$role", ".*", "$server", ".*")

func buildKVWatch(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(dir, "kvwatch")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kvwatch")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kvwatch: %v\n%s", err, b)
	}
	return bin
}

// basePort picks a run of free loopback ports for the simulator whose
// addresses fall in both of two shards (so the test does not depend on
// where free ports happen to hash).
func basePort(t *testing.T) int {
	t.Helper()
	for try := 0; try < 200; try++ {
		base := 20000 + rand.IntN(30000)
		shards := map[int]int{}
		free := true
		for i := 0; i < endpoints && free; i++ {
			addr := "127.0.0.1:" + strconv.Itoa(base+i)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				free = false
				break
			}
			l.Close()
			shards[serve.ShardOf(addr, 2)]++
		}
		if free && shards[0] > 0 && shards[1] > 0 {
			return base
		}
	}
	t.Fatal("found no run of free ports")
	return 0
}

// query runs an instant query on a Prometheus-API store.
func query(ctx context.Context, base, q string) ([]struct {
	Metric map[string]string
	Value  [2]any
}, error) {
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, r.Error)
	}
	return r.Data.Result, nil
}

func count(ctx context.Context, base, q string) (int, error) {
	r, err := query(ctx, base, q)
	return len(r), err
}

// scalar returns the value of a query with one result.
func scalar(ctx context.Context, base, q string) (float64, error) {
	r, err := query(ctx, base, q)
	if err != nil {
		return 0, err
	}
	if len(r) != 1 {
		return 0, fmt.Errorf("%s: %d results, want 1", q, len(r))
	}
	s, _ := r[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

type amAlert struct {
	Labels map[string]string
	Status struct{ State string }
}

func activeAlerts(ctx context.Context, am, name string) ([]amAlert, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+am+"/api/v2/alerts", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var as []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&as); err != nil {
		return nil, err
	}
	var out []amAlert
	for _, a := range as {
		if a.Labels["alertname"] == name && a.Status.State == "active" {
			out = append(out, a)
		}
	}
	return out, nil
}

func eventually(ctx context.Context, t *testing.T, what string, f func() (bool, error)) {
	t.Helper()
	var last error
	start := time.Now()
	for {
		ok, err := f()
		if ok {
			if d := time.Since(start); d > 2*time.Second {
				t.Logf("%s: %s", what, d.Round(100*time.Millisecond))
			}
			return
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: gave up waiting (last error: %v)", what, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func postLoad(ctx context.Context, base string, factor int) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	u.Path, u.RawQuery = "/-/sim/load", fmt.Sprintf("factor=%d", factor)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST load factor %d: %s: %s", factor, resp.Status, b)
	}
	return nil
}

// startSimulator runs the simulator and returns its endpoints as
// role → URLs, in the order printed.
func startSimulator(t *testing.T, dir, bin string, base int) map[string][]string {
	t.Helper()
	scen := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(scen, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "simulate.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "simulate", "--scenario", scen, "--speed", "4", "--tick", "250ms", "--base-port", strconv.Itoa(base))
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	eps := map[string][]string{}
	n := 0
	sc := bufio.NewScanner(out)
	for n < endpoints && sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			eps[f[0]] = append(eps[f[0]], f[2])
			n++
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if n < endpoints {
		t.Fatalf("the simulator printed %d of %d endpoints; see %s", n, endpoints, logf.Name())
	}
	return eps
}

// fileSD writes a file_sd file listing every endpoint with its role and
// the given cluster label.
func fileSD(t *testing.T, path, cluster string, eps map[string][]string) {
	t.Helper()
	var groups []map[string]any
	for role, urls := range eps {
		var addrs []string
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			addrs = append(addrs, pu.Host)
		}
		groups = append(groups, map[string]any{"targets": addrs,
			"labels": map[string]string{"role": role, "cluster": cluster, "pool": "p1"}})
	}
	b, _ := json.Marshal(groups)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFleetEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped with -short")
	}
	testenv.StateDir(t)
	vmBin := testenv.VictoriaMetrics(t, "victoria-metrics")
	vmalertBin := testenv.VictoriaMetrics(t, "vmalert")
	vmagentBin := testenv.VictoriaMetrics(t, "vmagent")
	amBin := testenv.Tool(t, "prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")
	dir := t.TempDir()
	bin := buildKVWatch(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Second)
	defer cancel()
	started := time.Now()

	eps := startSimulator(t, dir, bin, basePort(t))

	// The store.
	vmAddr := testenv.FreeAddr(t)
	vm := "http://" + vmAddr
	testenv.Start(t, filepath.Join(dir, "victoria-metrics.log"), vmBin,
		"-storageDataPath="+filepath.Join(dir, "vmdata"), "-httpListenAddr="+vmAddr,
		"-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN", "-retentionPeriod=1d")
	testenv.WaitOK(ctx, t, vm+"/health")

	// Two sharded serves push the cluster "e2e" with remote write.
	sd := filepath.Join(dir, "targets.json")
	fileSD(t, sd, "e2e", eps)
	cfg := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte("global: {scrape_interval: 1s, scrape_timeout: 1s}\nfile_sd_configs:\n  - files: [targets.json]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		testenv.Start(t, filepath.Join(dir, fmt.Sprintf("serve-%d.log", i)), bin, "serve",
			"--config.file", cfg, "--web.listen-address", testenv.FreeAddr(t), "--history", "0",
			"--shard", fmt.Sprintf("%d/2", i), "--remote-write.url", vm+"/api/v1/write",
			"--remote-write.send-interval", "1s", "--remote-write.instance", fmt.Sprintf("shard-%d", i),
			"--remote-write.external-label", "path=push")
	}

	// Agent mode: vmagent scrapes a third serve (the same engines as
	// cluster "agent") into the same store.
	sdAgent := filepath.Join(dir, "targets-agent.json")
	fileSD(t, sdAgent, "agent", eps)
	cfgAgent := filepath.Join(dir, "kvwatch-agent.yml")
	if err := os.WriteFile(cfgAgent, []byte("global: {scrape_interval: 1s, scrape_timeout: 1s}\nfile_sd_configs:\n  - files: [targets-agent.json]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kvAgent := testenv.FreeAddr(t)
	testenv.Start(t, filepath.Join(dir, "serve-agent.log"), bin, "serve", "--config.file", cfgAgent,
		"--web.listen-address", kvAgent, "--history", "0")

	// The generated stack in agent mode: rules, Alertmanager, collector
	// and ruler files.
	am := testenv.FreeAddr(t)
	stackCfg := config.Default()
	a := &stackCfg.Alerts
	a.KVUsageWarning, a.KVUsageCritical = 0.3, 0.5
	a.KVUsageCriticalFor, a.KVUsageWarningFor = model.Duration(time.Second), model.Duration(time.Second)
	o := stack.Options{KVWatchAddress: kvAgent, AlertmanagerAddress: am, GrafanaAdminPassword: "x",
		ScrapeInterval: model.Duration(time.Second), EvaluationInterval: model.Duration(time.Second), Config: stackCfg,
		Agent: stack.AgentOptions{Enabled: true, RemoteWriteURL: vm + "/api/v1/write",
			ExternalLabels: map[string]string{"collector": "e2e-box"},
			VMAlertAddress: testenv.FreeAddr(t), VMAgentAddress: testenv.FreeAddr(t)}}
	files, err := stack.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(dir, "stack")
	if err := files.Write(st); err != nil {
		t.Fatal(err)
	}
	testenv.StartIn(t, st, filepath.Join(dir, "alertmanager.log"), amBin, "--config.file=alertmanager.yml",
		"--storage.path="+filepath.Join(dir, "amdata"), "--web.listen-address="+am, "--cluster.listen-address=")
	testenv.StartIn(t, st, filepath.Join(dir, "vmagent.log"), vmagentBin, stack.ReadFlagsFile(files.Get(stack.AgentVMAgentFlags))...)
	// The generated flags, and no evaluation delay: vmalert's default 30s
	// matches victoria-metrics' default -search.latencyOffset, which this
	// store runs without.
	testenv.StartIn(t, st, filepath.Join(dir, "vmalert.log"), vmalertBin,
		append(stack.ReadFlagsFile(files.Get(stack.AgentVMAlertFlags)), "-rule.evalDelay=0s")...)
	testenv.WaitOK(ctx, t, "http://"+am+"/-/ready")

	// Both shards push, and together they are every engine exactly once.
	eventually(ctx, t, "both shards' target health in victoria-metrics", func() (bool, error) {
		n, err := count(ctx, vm, `count by (instance) (kvwatch_target_up{kv_cluster="e2e",path="push",job="kvwatch"})`)
		return n == 2, err
	})
	eventually(ctx, t, "every engine once in the shards' union", func() (bool, error) {
		total, err := scalar(ctx, vm, `count(kvwatch_target_up{kv_cluster="e2e"})`)
		if err != nil {
			return false, err
		}
		servers, err := scalar(ctx, vm, `count(count by (server) (kvwatch_target_up{kv_cluster="e2e"}))`)
		return total == endpoints && servers == endpoints, err
	})
	for i := 0; i < 2; i++ {
		n, err := scalar(ctx, vm, fmt.Sprintf(`count(kvwatch_target_up{kv_cluster="e2e",instance="shard-%d"})`, i))
		if err != nil || n == 0 || n == endpoints {
			t.Errorf("shard %d pushes %g of %d engines (%v); want some, not all", i, n, endpoints, err)
		}
	}
	eventually(ctx, t, "decode KV usage pushed", func() (bool, error) {
		n, err := count(ctx, vm, `kvwatch_kv_usage_ratio{kv_cluster="e2e",role="decode"}`)
		return n == 1, err
	})
	// The agent path lands in the same store, with the collector's label.
	eventually(ctx, t, "vmagent's scrape of serve in victoria-metrics", func() (bool, error) {
		up, err := scalar(ctx, vm, `up{job="kvwatch",collector="e2e-box"}`)
		if err != nil || up != 1 {
			return false, err
		}
		n, err := count(ctx, vm, `kvwatch_kv_usage_ratio{kv_cluster="agent",role="decode",collector="e2e-box"}`)
		return n == 1, err
	})
	// vmalert's recording rules are written back to the store.
	eventually(ctx, t, "recorded series from vmalert", func() (bool, error) {
		n, err := count(ctx, vm, `{__name__=~"server:.+",kv_cluster="e2e"}`)
		return n > 0, err
	})

	// Overload: decode KV passes the critical threshold; vmalert fires and
	// Alertmanager has the alert.
	if err := postLoad(ctx, eps["router"][0], 40); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "KVCacheUsageCritical for decode in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(ctx, am, stack.AlertKVCritical)
		for _, a := range as {
			if a.Labels["role"] == "decode" && a.Labels["severity"] == stack.SeverityCritical && a.Labels["kv_cluster"] == "e2e" {
				return true, nil
			}
		}
		return false, err
	})

	// Load off at once (a long overload queues more than drains in
	// time); while KV drains, every dashboard query returns data from
	// victoria-metrics, then the alert resolves.
	if err := postLoad(ctx, eps["router"][0], 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range stack.Dashboards(stack.Options{}) {
		for _, q := range d.Queries() {
			if q.EmptyOK != "" {
				continue
			}
			expr := grafanaVars.Replace(q.Expr)
			eventually(ctx, t, fmt.Sprintf("%s / %s: %s returns data from victoria-metrics", q.Dashboard, q.Panel, expr), func() (bool, error) {
				n, err := count(ctx, vm, expr)
				return n > 0, err
			})
		}
	}

	eventually(ctx, t, "KVCacheUsageCritical resolves in Alertmanager", func() (bool, error) {
		as, err := activeAlerts(ctx, am, stack.AlertKVCritical)
		if err == nil && len(as) > 0 {
			r, _ := query(ctx, vm, `kvwatch_kv_usage_ratio{role="decode"}`)
			return false, fmt.Errorf("still active: %v; decode usage %v", as, r)
		}
		return err == nil, err
	})
	t.Logf("fleet end to end in %s", time.Since(started).Round(time.Second))
}
