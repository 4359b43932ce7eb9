package serve

import (
	"errors"
	"fmt"
	"maps"
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
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// Allowlist decides which hosts /probe may scrape. IP and CIDR entries
// match only targets given as IP literals; host names and globs match only
// targets given as host names, label by label: a '*' never crosses a dot,
// so "gpu-*.example.com" allows gpu-1.example.com but not
// gpu-1.evil.example.com, and "10.0.0.*" allows no address at all (write
// 10.0.0.0/24; `check config` warns). A host name is scraped by name, an
// IP literal at that address. Anything else is refused, so serve cannot be
// used to reach arbitrary addresses.
type Allowlist struct {
	hosts [][]string // host names and globs, split into labels
	nets  []*net.IPNet
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
		if ip := net.ParseIP(e); ip != nil {
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			a.nets = append(a.nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		a.hosts = append(a.hosts, strings.Split(strings.ToLower(strings.TrimSuffix(e, ".")), "."))
	}
	return a, nil
}

// errRefused marks a target the allowlist refuses.
var errRefused = errors.New("refused")

// Check returns nil and the addresses to connect to when host may be
// probed: for an IP literal, that address; for a host name allowed by
// name or glob, nil (connect by name).
func (a *Allowlist) Check(host string) (addrs []net.IP, err error) {
	if len(a.nets) == 0 && len(a.hosts) == 0 {
		return nil, fmt.Errorf("%w: probe.allow in the config file is empty, so /probe refuses every target; list the hosts, globs or CIDRs it may scrape", errRefused)
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(h); ip != nil {
		if slices.ContainsFunc(a.nets, func(n *net.IPNet) bool { return n.Contains(ip) }) {
			return []net.IP{ip}, nil
		}
		return nil, fmt.Errorf("%w: address %s is in no IP or CIDR of probe.allow (host names and globs there match only names); add it to the config file to allow it", errRefused, ip)
	}
	labels := strings.Split(h, ".")
	for _, p := range a.hosts {
		if matchLabels(p, labels) {
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%w: host %q matches no host or glob in probe.allow (CIDRs there match only IP addresses given as such); add it to the config file to allow it", errRefused, host)
}

// matchLabels matches a host, split into labels, against a glob split the
// same way: the same number of labels, each matching (path.Match).
func matchLabels(glob, host []string) bool {
	if len(glob) != len(host) {
		return false
	}
	for i := range glob {
		if ok, _ := path.Match(glob[i], host[i]); !ok {
			return false
		}
	}
	return true
}

// probeCache keeps one scrape target (and its HTTP client, connections and
// rate tracker) per probed URL, so repeated probes reuse connections; the
// oldest entries are dropped beyond max.
type probeCache struct {
	mu    sync.Mutex
	max   int
	by    map[string]*probeTarget
	order []string
	// client is the one HTTP client of every probed target: its pool
	// bounds the idle connections (and so the file descriptors) however
	// many distinct URLs are probed, and an evicted target holds none.
	client *http.Client
}

// probeIdleConns bounds the idle connections /probe keeps over all hosts.
const probeIdleConns = 64

type probeTarget struct {
	mu      sync.Mutex // one probe of a target at a time
	target  *scrape.Target
	tracker *report.Tracker
	e       entry
}

func newProbeCache(max int) *probeCache {
	return &probeCache{max: max, by: map[string]*probeTarget{}, client: scrape.NewPooledClient(probeIdleConns)}
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
// with that server's kvwatch_* metrics. Optional: engine=, role= and the
// target labels cluster=, pool=, model= (over global.labels), as a
// configured or discovered target has them.
func (d *Daemon) serveProbe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw := q.Get("target")
	if raw == "" {
		http.Error(w, "probe: give the server as ?target=http://host:port (optional: &engine=sglang&role=decode&cluster=c&pool=p&model=m)", http.StatusBadRequest)
		return
	}
	u, err := config.ParseTargetURL(raw)
	if err != nil {
		http.Error(w, "probe: target: "+err.Error(), http.StatusBadRequest)
		return
	}
	eng, role := q.Get("engine"), q.Get("role")
	if eng != "" {
		if _, err := d.setup.Load().Engines.ByName(eng); err != nil {
			http.Error(w, "probe: engine: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	if role != "" && !slices.Contains(config.Roles, role) {
		http.Error(w, fmt.Sprintf("probe: unknown role %q; want one of %s", role, strings.Join(config.Roles, ", ")), http.StatusBadRequest)
		return
	}
	s := d.setup.Load()
	allow, err := NewAllowlist(s.Config.Probe.Allow)
	if err != nil {
		http.Error(w, "probe: "+err.Error(), http.StatusInternalServerError)
		return
	}
	ips, err := allow.Check(u.Hostname())
	shown := safetext.URL(u, s.Config.Global.SecretQueryParams...)
	if err != nil {
		d.log.Warn("probe refused", "target", shown, "err", err)
		http.Error(w, "probe: kvwatch refuses to scrape "+safetext.Terminal(shown)+": "+strings.TrimPrefix(err.Error(), errRefused.Error()+": "), http.StatusForbidden)
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
	labels := maps.Clone(s.Config.Global.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	keyParts := []string{dial.String(), name, eng, role, timeout.String()}
	for _, k := range config.TargetLabels {
		if v := q.Get(k); v != "" {
			labels[k] = v
		}
		keyParts = append(keyParts, labels[k])
	}
	key := strings.Join(keyParts, "\x00")
	pt, err := d.probes.get(key, func() (*probeTarget, error) {
		ct := &config.Target{Name: name, URL: dial.String(), Role: role, Engine: eng, Labels: labels,
			ScrapeTimeout: model.Duration(timeout), ScrapeInterval: s.Config.Global.ScrapeInterval,
			Limits: s.Config.Global.Limits}
		t, err := scrape.NewTargetWithClient(ct, d.probes.client)
		if err != nil {
			return nil, err
		}
		t.SecretParams = s.Config.Global.SecretQueryParams
		return &probeTarget{target: t, tracker: s.NewTracker()}, nil
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
	row := pt.tracker.Row(&res)
	e := &pt.e
	e.target, e.scraped, e.res, e.row = pt.target, true, res, row
	e.scrapes++
	e.role = kv.Role(role)
	if res.OK() {
		e.lastSuccess = res.Time.Add(res.Duration)
		e.role = res.Server.Role // the configured role, or the engine's; cache for a page of tiers only (scrape.Target)
	} else {
		e.failures[reasonIndex(res.Reason)]++
	}
	if e.role == "" {
		e.role = kv.RoleUnified
	}
	snap := *e
	pt.mu.Unlock()
	if !res.OK() {
		d.log.Debug("probe failed", "target", shown, "reason", res.Reason, "err", res.Err)
	}
	reg := prometheus.NewRegistry()
	coll := newCollector(func() []entry { return []entry{snap} })
	coll.planOptions = d.planOptions // the config's settings, as the target loops'
	reg.MustRegister(coll)
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
