package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Allowlist decides which hosts /probe may scrape: host names and globs
// ("gpu-*.example") match the URL's host; CIDRs match every address the host
// resolves to. Anything else is refused, so serve cannot be used to reach
// arbitrary addresses.
type Allowlist struct {
	hosts []string
	nets  []*net.IPNet
	// lookup resolves host names; net.DefaultResolver when nil.
	lookup func(ctx context.Context, host string) ([]net.IPAddr, error)
}

// NewAllowlist builds an allowlist from config.Probe.Allow entries (already
// validated by the config package).
func NewAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{}
	for _, e := range entries {
		if strings.Contains(e, "/") {
			_, n, err := net.ParseCIDR(e)
			if err != nil {
				return nil, fmt.Errorf("probe.allow: %q is not a CIDR; write e.g. 10.0.0.0/8", e)
			}
			a.nets = append(a.nets, n)
			continue
		}
		a.hosts = append(a.hosts, strings.ToLower(e))
	}
	return a, nil
}

// errRefused marks a target the allowlist refuses.
var errRefused = errors.New("refused")

// Check returns nil and the addresses to connect to when host may be
// probed. For hosts allowed by name or glob, addrs is nil (connect by name).
// For hosts allowed by CIDR, addrs are the checked addresses, and the
// caller connects to one of them, so a DNS answer that changes after the
// check cannot redirect the scrape.
func (a *Allowlist) Check(ctx context.Context, host string) (addrs []net.IP, err error) {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, p := range a.hosts {
		if ok, _ := path.Match(p, h); ok {
			return nil, nil
		}
	}
	if len(a.nets) == 0 {
		if len(a.hosts) == 0 {
			return nil, fmt.Errorf("%w: probe.allow in the config file is empty, so /probe refuses every target; list the hosts, globs or CIDRs it may scrape", errRefused)
		}
		return nil, fmt.Errorf("%w: host %q matches no host or glob in probe.allow; add it to the config file to allow it", errRefused, host)
	}
	var ips []net.IP
	if ip := net.ParseIP(h); ip != nil {
		ips = []net.IP{ip}
	} else {
		lookup := a.lookup
		if lookup == nil {
			lookup = net.DefaultResolver.LookupIPAddr
		}
		res, err := lookup(ctx, h)
		if err != nil || len(res) == 0 {
			return nil, fmt.Errorf("%w: cannot resolve host %q to check it against probe.allow: %v", errRefused, host, err)
		}
		for _, r := range res {
			ips = append(ips, r.IP)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(a.nets, func(n *net.IPNet) bool { return n.Contains(ip) }) {
			return nil, fmt.Errorf("%w: host %q resolves to %s, which is in no CIDR of probe.allow (and the host matches no name or glob there); add it to the config file to allow it", errRefused, host, ip)
		}
	}
	return ips, nil
}

// probeCache keeps one scrape target (and its HTTP client, connections and
// rate tracker) per probed URL, so repeated probes reuse connections; the
// oldest entries are dropped beyond max.
type probeCache struct {
	mu    sync.Mutex
	max   int
	by    map[string]*probeTarget
	order []string
}

type probeTarget struct {
	mu      sync.Mutex // one probe of a target at a time
	target  *scrape.Target
	tracker *report.Tracker
	e       entry
}

func newProbeCache(max int) *probeCache {
	return &probeCache{max: max, by: map[string]*probeTarget{}}
}

func (c *probeCache) get(key string, mk func() (*probeTarget, error)) (*probeTarget, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.by[key]; ok {
		return p, nil
	}
	p, err := mk()
	if err != nil {
		return nil, err
	}
	if len(c.order) >= c.max {
		delete(c.by, c.order[0])
		c.order = c.order[1:]
	}
	c.by[key] = p
	c.order = append(c.order, key)
	return p, nil
}

// serveProbe scrapes ?target=URL once (blackbox-exporter style) and answers
// with that server's kvwatch_* metrics. Optional: engine=, role=.
func (d *Daemon) serveProbe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw := q.Get("target")
	if raw == "" {
		http.Error(w, "probe: give the server as ?target=http://host:port (optional: &engine=sglang&role=decode)", http.StatusBadRequest)
		return
	}
	u, err := config.ParseTargetURL(raw)
	if err != nil {
		http.Error(w, "probe: target: "+err.Error(), http.StatusBadRequest)
		return
	}
	eng, role := q.Get("engine"), q.Get("role")
	if eng != "" {
		if _, err := d.engines.ByName(eng); err != nil {
			http.Error(w, "probe: engine: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	if role != "" && !slices.Contains(sdRoles, role) {
		http.Error(w, fmt.Sprintf("probe: unknown role %q; want one of %s", role, strings.Join(sdRoles, ", ")), http.StatusBadRequest)
		return
	}
	s := d.setup.Load()
	allow, err := NewAllowlist(s.Config.Probe.Allow)
	if err != nil {
		http.Error(w, "probe: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if d.probeLookup != nil {
		allow.lookup = d.probeLookup
	}
	ips, err := allow.Check(r.Context(), u.Hostname())
	if err != nil {
		d.log.Warn("probe refused", "target", u.Redacted(), "err", err)
		http.Error(w, "probe: kvwatch refuses to scrape "+u.Redacted()+": "+strings.TrimPrefix(err.Error(), errRefused.Error()+": "), http.StatusForbidden)
		return
	}
	name := u.Host
	dial := *u
	if len(ips) > 0 && u.Scheme == "http" {
		// Connect to the checked address, never to a later DNS answer.
		dial.Host = net.JoinHostPort(ips[0].String(), portOf(u.Port(), u.Scheme))
	}
	timeout := time.Duration(s.Config.Global.ScrapeTimeout)
	if v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			if pt := time.Duration((f - 0.5) * float64(time.Second)); pt > 0 && pt < timeout {
				timeout = pt
			}
		}
	}
	key := strings.Join([]string{dial.String(), name, eng, role, timeout.String()}, "\x00")
	pt, err := d.probes.get(key, func() (*probeTarget, error) {
		ct := &config.Target{Name: name, URL: dial.String(), Role: role, Engine: eng, Labels: map[string]string{},
			ScrapeTimeout: model.Duration(timeout), ScrapeInterval: s.Config.Global.ScrapeInterval}
		for k, v := range s.Config.Global.Labels {
			ct.Labels[k] = v
		}
		t, err := scrape.NewTarget(ct)
		if err != nil {
			return nil, err
		}
		return &probeTarget{target: t, tracker: report.NewTracker(s.Config.Global.HeadroomTokens)}, nil
	})
	if err != nil {
		http.Error(w, "probe: "+err.Error(), http.StatusBadRequest)
		return
	}
	pt.mu.Lock()
	res, ok := d.scrapeOnce(r.Context(), pt.target)
	if !ok {
		pt.mu.Unlock()
		return // the client went away
	}
	row := pt.tracker.Update(res.Time, []scrape.Result{res}).Servers[0]
	e := &pt.e
	e.target, e.scraped, e.res, e.row = pt.target, true, res, row
	e.scrapes++
	e.role = kv.Role(role)
	if res.OK() {
		e.lastSuccess = res.Time.Add(res.Duration)
		if role == "" {
			e.role = res.Server.Role
		}
	} else {
		e.failures[reasonIndex(res.Reason)]++
	}
	if e.role == "" {
		e.role = kv.RoleUnified
	}
	snap := *e
	pt.mu.Unlock()
	if !res.OK() {
		d.log.Debug("probe failed", "target", u.Redacted(), "reason", res.Reason, "err", res.Err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(func() []entry { return []entry{snap} }))
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

func portOf(port, scheme string) string {
	if port != "" {
		return port
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}
