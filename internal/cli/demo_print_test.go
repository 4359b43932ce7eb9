package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/sim"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestPrintDemoListsServersAndControls(t *testing.T) {
	eps := []sim.Endpoint{
		{Name: "router", Role: "router", Engine: "sgl-router", URL: "http://127.0.0.1:31000", MetricsPath: "/metrics"},
		{Name: "prefill-0", Role: "prefill", Engine: "sglang", URL: "http://127.0.0.1:31001", MetricsPath: "/metrics", Version: "current"},
		{Name: "trt", Role: "unified", Engine: "trtllm-serve", URL: "http://127.0.0.1:31002", MetricsPath: "/prometheus/metrics", Version: "current"},
		{Name: "decode-0", Role: "decode", Engine: "sglang", URL: "http://127.0.0.1:31003", MetricsPath: "/metrics", Version: "current"},
	}
	var b strings.Builder
	printDemo(&b, "bin/kvwatch", "pd-sglang", eps, "http://127.0.0.1:9477/")
	// Written by hand: tabwriter pads each column to its widest cell plus
	// 2; the load goes to the router, the leak to the decode server, the
	// upgrade to the first server of an engine with versions (SGLang's
	// after current: 0.5.16).
	want := `kvwatch demo: 4 simulated servers (pd-sglang)
  ROLE     NAME       ENGINE        METRICS
  router   router     sgl-router    http://127.0.0.1:31000/metrics
  prefill  prefill-0  sglang        http://127.0.0.1:31001/metrics
  unified  trt        trtllm-serve  http://127.0.0.1:31002/prometheus/metrics
  decode   decode-0   sglang        http://127.0.0.1:31003/metrics
simulator control, on every server's own URL:
  POST /-/sim/load?factor=3             multiply its arrival rate by 3 (0 stops arrivals, 1 restores)
  POST /-/sim/fault?kind=slow&delay=3s  inject a fault (leak, slow, error, drop, restart, freeze, metrics-off; none clears)
  POST /-/sim/version?version=V         serve another version's dialect in place (SGLang, vLLM, llama.cpp, trtllm-serve, Dynamo): kvwatch reports the drift
  GET  /-/sim/truth                     the simulator's ground truth as JSON
overload it (load ×8, then a KV leak on decode-0):
  curl -X POST 'http://127.0.0.1:31000/-/sim/load?factor=8'
  curl -X POST 'http://127.0.0.1:31003/-/sim/fault?kind=leak'
upgrade prefill-0 in place (its page changes dialect: a drift kvwatch reports):
  curl -X POST 'http://127.0.0.1:31001/-/sim/version?version=0.5.16'
read them: bin/kvwatch status router:router=http://127.0.0.1:31000 prefill:prefill-0=http://127.0.0.1:31001 unified:trt=http://127.0.0.1:31002/prometheus/metrics decode:decode-0=http://127.0.0.1:31003
watch them: bin/kvwatch top --serve.url http://127.0.0.1:9477/
web UI:  http://127.0.0.1:9477/
metrics: http://127.0.0.1:9477/metrics
Prometheus API: http://127.0.0.1:9477/api/v1/query
Stop with Ctrl-C.
`
	if got := b.String(); got != want {
		t.Errorf("printDemo:\n%s\nwant:\n%s", got, want)
	}
}

// The overload goes where the demo's pictures have it: the load to the
// router, the leak to a decode server; without them, to the first server
// (that holds KV, for the leak).
func TestOverloadTargets(t *testing.T) {
	ep := func(name, role string) sim.Endpoint { return sim.Endpoint{Name: name, Role: role} }
	for _, tt := range []struct {
		name       string
		eps        []sim.Endpoint
		load, leak string
	}{
		{"pd", []sim.Endpoint{ep("p", "prefill"), ep("r", "router"), ep("d", "decode")}, "r", "d"},
		{"unified", []sim.Endpoint{ep("a", "unified"), ep("b", "unified")}, "a", "a"},
		{"a cache server first", []sim.Endpoint{ep("c", "cache"), ep("v", "unified")}, "c", "v"},
		{"routers only", []sim.Endpoint{ep("r", "router")}, "r", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			load, leak := overloadTargets(tt.eps)
			name := func(e *sim.Endpoint) string {
				if e == nil {
					return ""
				}
				return e.Name
			}
			if name(load) != tt.load || name(leak) != tt.leak {
				t.Errorf("load on %q, leak on %q; want %q, %q", name(load), name(leak), tt.load, tt.leak)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"bin/kvwatch":           "bin/kvwatch",
		"/usr/bin/kvwatch":      "/usr/bin/kvwatch",
		"/home/a b/kvwatch":     "'/home/a b/kvwatch'",
		"/tmp/it's/kvwatch":     `'/tmp/it'\''s/kvwatch'`,
		"/opt/$HOME/kvwatch":    "'/opt/$HOME/kvwatch'",
		"./kvwatch-1.2+dev_x86": "./kvwatch-1.2+dev_x86",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestDemoCommandsWorkAsTyped runs the built kvwatch as make demo does
// (bin/kvwatch from the directory above bin, kvwatch not on $PATH) and
// runs what it prints, as typed, in a shell there: the overload commands
// (with curl, where there is one) and the status command, whose rows name
// the servers as the demo does.
func TestDemoCommandsWorkAsTyped(t *testing.T) {
	sh := testenv.Tool(t, "sh", "sh")
	built := strings.SplitN(kvwatchOnPath(t), string(os.PathListSeparator), 2)[0]
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy: the running binary's path is the file's, with its links
	// resolved.
	bin, err := os.ReadFile(filepath.Join(built, "kvwatch"))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "bin", "kvwatch"), bin, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := freePorts(t, 3)
	demo := exec.CommandContext(ctx, "bin/kvwatch", "demo", "--base-port", fmt.Sprint(base), "--web.listen-address", "127.0.0.1:0", "--history", "0")
	demo.Dir = dir
	demo.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
	var out testenv.Buffer
	demo.Stdout, demo.Stderr = &out, io.Discard
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); demo.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "Stop with Ctrl-C."); {
		if time.Now().After(deadline) {
			t.Fatalf("the demo printed no banner in 30s: %q", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	typed := func(cmd string) string {
		t.Helper()
		c := exec.Command(sh, "-c", cmd)
		c.Dir, c.Env = dir, demo.Env
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, b)
		}
		return string(b)
	}
	var status string
	curls := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "read them: "); ok {
			status = s
		}
		if c, ok := strings.CutPrefix(l, "  curl "); ok {
			curls++
			if _, err := exec.LookPath("curl"); err == nil {
				if got := typed("curl -sf " + c); !strings.Contains(got, "load factor 8") && !strings.Contains(got, "fault leak") && !strings.Contains(got, "version 0.5.16") {
					t.Errorf("curl %s: %q", c, got)
				}
			}
		}
	}
	if !strings.HasPrefix(status, "bin/kvwatch status ") || curls != 3 {
		t.Fatalf("the demo printed status command %q and %d curl commands; want bin/kvwatch status and 3:\n%s", status, curls, out.String())
	}
	got := typed(status)
	for _, row := range []string{"router   router ", "prefill  prefill ", "decode   decode "} {
		if !strings.Contains(got, row) {
			t.Errorf("%s: no row %q (the demo's names):\n%s", status, row, got)
		}
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
	demo := runBackground(t, "demo", "--base-port", fmt.Sprint(base), "--web.listen-address", "127.0.0.1:0", "--history", "0")
	out, errb := &demo.Stdout, &demo.Stderr
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "Stop with Ctrl-C.") {
		if code, ok := demo.Exited(); ok {
			t.Fatalf("demo exited with %d before printing; stderr: %s", code, errb.String())
		}
		time.Sleep(20 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatalf("demo printed no banner in 20s: %q", out.String())
		}
	}
	lines := strings.Split(out.String(), "\n")
	// pd-sglang: a router, then a prefill and a decode server, in scenario order.
	wantRoles := []string{"router", "prefill", "decode"}
	var status string
	for _, l := range lines {
		if _, s, ok := strings.Cut(l, "read them: "); ok {
			_, status, _ = strings.Cut(s, " status ") // after how to type kvwatch here
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
		if !strings.Contains(" "+status+" ", " "+role+":"+role+"="+url+" ") {
			t.Errorf("status command %q lacks %s:%s=%s", status, role, role, url)
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
}

func TestDemoBasePortOutOfRange(t *testing.T) {
	code, _, stderr := run(t, "demo", "--base-port", "65534")
	if code != exitUsage || !strings.Contains(stderr, "--base-port 65534: the 3 simulated servers need ports 65534-65536") {
		t.Errorf("exit %d, stderr %q; want 2 and the ports named", code, stderr)
	}
}
