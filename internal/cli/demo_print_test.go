package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestPrintDemoListsServersAndControls(t *testing.T) {
	eps := []sim.Endpoint{
		{Name: "router", Role: "router", Engine: "sgl-router", URL: "http://127.0.0.1:31000", MetricsPath: "/metrics"},
		{Name: "prefill-0", Role: "prefill", Engine: "sglang", URL: "http://127.0.0.1:31001", MetricsPath: "/metrics"},
		{Name: "trt", Role: "unified", Engine: "trtllm-serve", URL: "http://127.0.0.1:31002", MetricsPath: "/prometheus/metrics"},
	}
	var b strings.Builder
	printDemo(&b, "pd-sglang", eps, "http://127.0.0.1:9477/")
	// Written by hand: tabwriter pads each column to its widest cell plus 2.
	want := `kvwatch demo: 3 simulated servers (pd-sglang)
  ROLE     NAME       ENGINE        METRICS
  router   router     sgl-router    http://127.0.0.1:31000/metrics
  prefill  prefill-0  sglang        http://127.0.0.1:31001/metrics
  unified  trt        trtllm-serve  http://127.0.0.1:31002/prometheus/metrics
simulator control, on every server's own URL:
  POST /-/sim/load?factor=3             multiply its arrival rate by 3 (0 stops arrivals, 1 restores)
  POST /-/sim/fault?kind=slow&delay=3s  inject a fault (leak, slow, error, drop, restart, freeze, metrics-off; none clears)
  GET  /-/sim/truth                     the simulator's ground truth as JSON
  e.g. curl -X POST 'http://127.0.0.1:31000/-/sim/load?factor=3'
read them: kvwatch status router=http://127.0.0.1:31000 prefill=http://127.0.0.1:31001 unified=http://127.0.0.1:31002/prometheus/metrics
web UI:  http://127.0.0.1:9477/
metrics: http://127.0.0.1:9477/metrics
Prometheus API: http://127.0.0.1:9477/api/v1/query
Stop with Ctrl-C.
`
	if got := b.String(); got != want {
		t.Errorf("printDemo:\n%s\nwant:\n%s", got, want)
	}
}

// freePorts finds n consecutive free loopback ports.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for base := 32000 + time.Now().Nanosecond()%20000; base < 65000; base += n + 7 {
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if len(ls) == n {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// TestDemoBasePort runs the demo with --base-port and reads every server it
// printed, on the ports the flag asked for, and a control endpoint.
func TestDemoBasePort(t *testing.T) {
	base := freePorts(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testenv.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"demo", "--base-port", fmt.Sprint(base), "--web.listen-address", "127.0.0.1:0", "--history", "0"},
			Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "Stop with Ctrl-C.") {
		select {
		case code := <-done:
			t.Fatalf("demo exited with %d before printing; stderr: %s", code, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no banner in 20s: %q", out.String())
		}
	}
	lines := strings.Split(out.String(), "\n")
	// pd-sglang: a router, then a prefill and a decode server, in scenario order.
	wantRoles := []string{"router", "prefill", "decode"}
	var status string
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, "read them: kvwatch status "); ok {
			status = s
		}
	}
	for i, role := range wantRoles {
		f := strings.Fields(lines[2+i])
		url := fmt.Sprintf("http://127.0.0.1:%d", base+i)
		if len(f) != 4 || f[0] != role || f[3] != url+"/metrics" {
			t.Fatalf("server line %d = %q, want role %s and %s/metrics", i, lines[2+i], role, url)
		}
		resp, err := http.Get(f[3])
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d", f[3], resp.StatusCode)
		}
		if !strings.Contains(" "+status+" ", " "+role+"="+url+" ") {
			t.Errorf("status command %q lacks %s=%s", status, role, url)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/-/sim/truth", base+1))
	if err != nil {
		t.Fatal(err)
	}
	var truth map[string]any
	err = json.NewDecoder(resp.Body).Decode(&truth)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil {
		t.Errorf("GET /-/sim/truth = %d, %v", resp.StatusCode, err)
	}
	// The command the demo printed reads the servers.
	code, stdout, stderr := run(t, append([]string{"status"}, strings.Fields(status)...)...)
	if code != exitOK || !strings.Contains(stdout, "fleet") {
		t.Errorf("kvwatch status %s = %d\n%s%s", status, code, stdout, stderr)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("demo exit code = %d, want 0; stderr: %s", code, errb.String())
	}
}

func TestDemoBasePortOutOfRange(t *testing.T) {
	code, _, stderr := run(t, "demo", "--base-port", "65534")
	if code != exitUsage || !strings.Contains(stderr, "--base-port 65534: the 3 simulated servers need ports 65534-65536") {
		t.Errorf("exit %d, stderr %q; want 2 and the ports named", code, stderr)
	}
}
