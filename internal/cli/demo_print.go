package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/kvwatch/kvwatch/internal/sim"
)

// checkBasePort rejects a --base-port whose n consecutive ports do not all
// exist.
func checkBasePort(base, n int) error {
	if base == 0 {
		return nil
	}
	if base < 1 || base+n-1 > 65535 {
		return fmt.Errorf("--base-port %d: the %d simulated servers need ports %d-%d; use a port from 1 to %d, or 0 for free ports", base, n, base, base+n-1, 65535-n+1)
	}
	return nil
}

// printDemo tells the user what the demo started: every simulated server
// with its role and URL (so status, top, curl or their own Prometheus can
// read it), the simulator's control endpoints and the two commands that
// overload the cluster, a status and a top command to paste, and kvwatch's
// own URLs. prog is how to type kvwatch here (selfCommand); the status
// command names the targets as serve does, so that status, top and the web
// UI call each server alike.
func printDemo(w io.Writer, prog, scenario string, eps []sim.Endpoint, url string) {
	fmt.Fprintf(w, "kvwatch demo: %d simulated servers (%s)\n", len(eps), scenario)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ROLE\tNAME\tENGINE\tMETRICS")
	var args []string
	for _, ep := range eps {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", ep.Role, ep.Name, ep.Engine, ep.URL, ep.MetricsPath)
		args = append(args, demoTarget(ep))
	}
	tw.Flush()
	fmt.Fprintln(w, "simulator control, on every server's own URL:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POST /-/sim/load?factor=3\tmultiply its arrival rate by 3 (0 stops arrivals, 1 restores)")
	fmt.Fprintln(tw, "  POST /-/sim/fault?kind=slow&delay=3s\tinject a fault (leak, slow, error, drop, restart, freeze, metrics-off; none clears)")
	fmt.Fprintln(tw, "  POST /-/sim/version?version=V\tserve another version's dialect in place (SGLang, vLLM, llama.cpp, trtllm-serve, Dynamo): kvwatch reports the drift")
	fmt.Fprintln(tw, "  GET  /-/sim/truth\tthe simulator's ground truth as JSON")
	tw.Flush()
	if load, leak := overloadTargets(eps); load != nil && leak != nil {
		fmt.Fprintf(w, "overload it (load ×8, then a KV leak on %s):\n", leak.Name)
		fmt.Fprintf(w, "  curl -X POST '%s/-/sim/load?factor=8'\n", load.URL)
		fmt.Fprintf(w, "  curl -X POST '%s/-/sim/fault?kind=leak'\n", leak.URL)
	}
	if ep, v := upgradeTarget(eps); ep != nil {
		fmt.Fprintf(w, "upgrade %s in place (its page changes dialect: a drift kvwatch reports):\n", ep.Name)
		fmt.Fprintf(w, "  curl -X POST '%s/-/sim/version?version=%s'\n", ep.URL, v)
	}
	fmt.Fprintf(w, "read them: %s status %s\n", prog, strings.Join(args, " "))
	fmt.Fprintf(w, "watch them: %s top --serve.url %s\n", prog, url)
	fmt.Fprintf(w, "web UI:  %s\nmetrics: %smetrics\nPrometheus API: %sapi/v1/query\nStop with Ctrl-C.\n", url, url, url)
}

// demoTarget is ep as a status argument with its role and name, as the
// demo's serve names it: ROLE:NAME=URL (the metrics path only when it is
// not /metrics).
func demoTarget(ep sim.Endpoint) string {
	a := ep.URL
	if ep.MetricsPath != "/metrics" {
		a += ep.MetricsPath
	}
	if isRole(ep.Role) {
		return ep.Role + ":" + ep.Name + "=" + a
	}
	return ep.Name + "=" + a
}

// overloadTargets are the servers the overload commands go to: the load
// to the router (else the first server), the leak to the first decode
// server (else the first that holds KV); nil when there is none.
func overloadTargets(eps []sim.Endpoint) (load, leak *sim.Endpoint) {
	for i := range eps {
		ep := &eps[i]
		if load == nil || (ep.Role == "router" && load.Role != "router") {
			load = ep
		}
		holdsKV := ep.Role != "router" && ep.Role != "cache"
		if holdsKV && (leak == nil || (ep.Role == "decode" && leak.Role != "decode")) {
			leak = ep
		}
	}
	return load, leak
}

// upgradeTarget is the first server whose engine the simulator serves in
// more than one version, with the first version other than the one it
// serves; nil when there is none.
func upgradeTarget(eps []sim.Endpoint) (*sim.Endpoint, string) {
	for i := range eps {
		for _, v := range sim.Versions(eps[i].Engine) {
			if v != eps[i].Version {
				return &eps[i], v
			}
		}
	}
	return nil, ""
}

// selfCommand is how to type the running kvwatch in the working directory:
// "kvwatch" when that name on $PATH is this binary, else its path
// relative to the working directory when it is below it ("bin/kvwatch",
// as make demo runs it), else its absolute path; quoted for the shell
// where it needs to be.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "kvwatch"
	}
	if p, err := exec.LookPath("kvwatch"); err == nil {
		if a, err := os.Stat(p); err == nil {
			if b, err := os.Stat(exe); err == nil && os.SameFile(a, b) {
				return "kvwatch"
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, exe); err == nil && filepath.IsLocal(rel) {
			exe = rel
			if !strings.ContainsRune(rel, filepath.Separator) {
				exe = "." + string(filepath.Separator) + rel // a bare name would be looked up on $PATH
			}
		}
	}
	return shellQuote(exe)
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and ./_-+:@,=
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789./_-+:@,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
