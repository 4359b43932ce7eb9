package cli

import (
	"fmt"
	"io"
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
// read it), the simulator's control endpoints, a status command to paste,
// and kvwatch's own URLs.
func printDemo(w io.Writer, scenario string, eps []sim.Endpoint, url string) {
	fmt.Fprintf(w, "kvwatch demo: %d simulated servers (%s)\n", len(eps), scenario)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ROLE\tNAME\tENGINE\tMETRICS")
	var args []string
	for _, ep := range eps {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", ep.Role, ep.Name, ep.Engine, ep.URL, ep.MetricsPath)
		a := ep.URL
		if ep.MetricsPath != "/metrics" {
			a += ep.MetricsPath
		}
		if isRole(ep.Role) { // what `kvwatch status ROLE=URL` accepts
			a = ep.Role + "=" + a
		}
		args = append(args, a)
	}
	tw.Flush()
	fmt.Fprintln(w, "simulator control, on every server's own URL:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  POST /-/sim/load?factor=3\tmultiply its arrival rate by 3 (0 stops arrivals, 1 restores)")
	fmt.Fprintln(tw, "  POST /-/sim/fault?kind=slow&delay=3s\tinject a fault (leak, slow, error, drop, restart, freeze, metrics-off; none clears)")
	fmt.Fprintln(tw, "  GET  /-/sim/truth\tthe simulator's ground truth as JSON")
	tw.Flush()
	if len(eps) > 0 {
		fmt.Fprintf(w, "  e.g. curl -X POST '%s/-/sim/load?factor=3'\n", eps[0].URL)
	}
	fmt.Fprintf(w, "read them: kvwatch status %s\n", strings.Join(args, " "))
	fmt.Fprintf(w, "web UI:  %s\nmetrics: %smetrics\nPrometheus API: %sapi/v1/query\nStop with Ctrl-C.\n", url, url, url)
}
