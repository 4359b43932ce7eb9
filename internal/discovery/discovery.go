// Package discovery finds targets with Prometheus' own service discovery:
// its discovery manager runs the config's kubernetes_sd_configs,
// dns_sd_configs and http_sd_configs entries (Prometheus' mechanisms,
// decoded by Prometheus' code in package config), and relabel_configs turn
// what they find into kvwatch targets, as a Prometheus scrape_config
// would. A Runner does it for serve (the daemon asks it for the
// discovered targets on every change, reload and file_sd refresh); Once
// does it once for status and top. For kubernetes entries it also asks
// the API server itself whether kvwatch may list what the entry needs,
// so that an unreachable server, a refused token or a missing RBAC rule
// is one clear log line and a metric, not a silent empty fleet.
//
// It scrapes nothing and reads no file_sd files (package config does);
// it does not import Prometheus' discovery/install, only the three
// mechanisms kvwatch takes.
package discovery

import (
	"context"
	"fmt"
	"sync"
	"time"

	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/kvwatch/kvwatch/internal/config"
)

// entry is one SD entry of a config.
type entry struct {
	// set names it as config problems do (kubernetes_sd_configs[0]); the
	// discovery manager's set name and the sd_config label.
	set string
	sd  promdiscovery.Config
	// targets are kvwatch's keys of the entry (relabel_configs, target_limit).
	targets *config.SDTargets
	// kube is the entry's Kubernetes config; nil for dns and http.
	kube *kubernetes.SDConfig
}

// entries lists c's SD entries in config order.
func entries(c *config.Config) []entry {
	var out []entry
	for i := range c.KubernetesSD {
		k := &c.KubernetesSD[i]
		out = append(out, entry{set: fmt.Sprintf("kubernetes_sd_configs[%d]", i), sd: &k.Config, targets: &k.SDTargets, kube: &k.Config})
	}
	for i := range c.DNSSD {
		d := &c.DNSSD[i]
		out = append(out, entry{set: fmt.Sprintf("dns_sd_configs[%d]", i), sd: &d.Config, targets: &d.SDTargets})
	}
	for i := range c.HTTPSD {
		h := &c.HTTPSD[i]
		out = append(out, entry{set: fmt.Sprintf("http_sd_configs[%d]", i), sd: &h.Config, targets: &h.SDTargets})
	}
	return out
}

// managerConfigs is what the discovery manager runs for es: each entry
// its own set, its discoverer reporting to s when it sends.
func managerConfigs(es []entry, s *seen) map[string]promdiscovery.Configs {
	out := make(map[string]promdiscovery.Configs, len(es))
	for _, e := range es {
		out[e.set] = promdiscovery.Configs{tracked{Config: e.sd, set: e.set, seen: s}}
	}
	return out
}

// tracked is an SD config whose discoverer reports to seen whenever it
// sends target groups, before the manager batches them: a kubernetes
// discoverer sends once its informers have synced, and an empty group for
// a pod without an IP, which the manager drops. Two tracked configs are
// equal (reflect.DeepEqual, as the manager compares them on a reload)
// when their sets and Prometheus configs are, so an unchanged entry keeps
// its running discoverer.
type tracked struct {
	promdiscovery.Config
	set  string
	seen *seen
}

// NewDiscoverer returns the Prometheus discoverer, reporting to t.seen.
func (t tracked) NewDiscoverer(o promdiscovery.DiscovererOptions) (promdiscovery.Discoverer, error) {
	d, err := t.Config.NewDiscoverer(o)
	if err != nil {
		return nil, err
	}
	return trackedDiscoverer{d: d, set: t.set, seen: t.seen}, nil
}

type trackedDiscoverer struct {
	d    promdiscovery.Discoverer
	set  string
	seen *seen
}

// Run runs the discoverer and passes on what it sends until ctx ends
// (Prometheus' discoverers stop sending when it does), and returns once
// the discoverer has: its goroutines log (a Kubernetes informer that never
// synced says so as it stops), and Prometheus' discovery manager does not
// wait for them; Runner.Run does (seen.running).
func (t trackedDiscoverer) Run(ctx context.Context, up chan<- []*targetgroup.Group) {
	if !t.seen.start() {
		return // Runner.Run has returned: its context ended before this began
	}
	defer t.seen.running.Done()
	ch := make(chan []*targetgroup.Group)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t.d.Run(ctx, ch)
	}()
	defer func() { <-stopped }()
	for {
		select {
		case <-ctx.Done():
			return
		case tgs := <-ch:
			t.seen.sent(t.set)
			select {
			case up <- tgs:
			case <-ctx.Done():
				return
			}
		}
	}
}

// seen records, per set, when its discoverer last sent, and pokes whoever
// waits for it (the Kubernetes checks, Once).
type seen struct {
	// running counts the discoverers running (trackedDiscoverer.Run), for
	// Runner.Run to wait for (wait). Prometheus' manager starts them in
	// goroutines of its own, which may begin after the wait did: start
	// and wait agree under mu, so that none is added once the wait began.
	running sync.WaitGroup

	mu     sync.Mutex
	closed bool // wait has begun
	last   map[string]time.Time
	pokes  map[string]chan struct{}
}

// start counts a discoverer as running, unless wait has begun (false:
// the discoverer must not run).
func (s *seen) start() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

// wait returns once every discoverer started has returned; none starts
// after it.
func (s *seen) wait() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.running.Wait()
}

func newSeen() *seen { return &seen{last: map[string]time.Time{}, pokes: map[string]chan struct{}{}} }

func (s *seen) sent(set string) {
	s.mu.Lock()
	s.last[set] = time.Now()
	p := s.pokes[set]
	s.mu.Unlock()
	if p != nil {
		select {
		case p <- struct{}{}:
		default: // a poke is already waiting
		}
	}
}

// at returns when set's discoverer last sent; zero: never.
func (s *seen) at(set string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[set]
}

// poke returns the channel poked when set's discoverer sends.
func (s *seen) poke(set string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pokes[set]
	if p == nil {
		p = make(chan struct{}, 1)
		s.pokes[set] = p
	}
	return p
}
