package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promdiscovery "github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// DefaultCheckInterval is how often a Runner asks the API server of each
// kubernetes_sd_configs entry whether discovery can work (besides after
// each update of the entry, at most every minCheckGap).
const DefaultCheckInterval = 30 * time.Second

// minCheckGap bounds how often updates of an entry trigger its check.
const minCheckGap = 2 * time.Second

// Options configure a Runner.
type Options struct {
	// Registry receives Prometheus' discovery metrics (prometheus_sd_*)
	// and kvwatch's (signal.Discovery); required. One Runner per registry.
	Registry prometheus.Registerer
	// Logger receives the runner's and Prometheus' discovery logs; nil
	// discards them.
	Logger *slog.Logger
	// Engines checks the engine label of a discovered target
	// (pipeline.EngineNames); nil accepts any.
	Engines func(string) error
	// Changed is called, on the runner's goroutine, when new target groups
	// arrived; serve's daemon then asks Discovered again.
	Changed func()
	// CheckInterval is how often the Kubernetes API of each kubernetes
	// entry is checked; 0: DefaultCheckInterval.
	CheckInterval time.Duration
	// UpdateInterval bounds how often the discovery manager hands over
	// what changed; 0: Prometheus' own (5 s).
	UpdateInterval time.Duration
}

// Runner runs Prometheus' discovery manager over a config's SD entries
// and hands out the targets they find (Discovered). Its methods are safe
// for concurrent use.
type Runner struct {
	o    Options
	log  *slog.Logger
	sdm  *promdiscovery.SDMetrics
	m    runnerMetrics
	seen *seen

	mu     sync.Mutex
	es     []entry
	checks map[string]*kubeCheck // by set; kubernetes entries only
	mgr    *promdiscovery.Manager
	runCtx context.Context // Run's; nil before Run
	stop   context.CancelFunc
	wg     sync.WaitGroup // the checks' goroutines
	ended  bool           // Run is returning: no check starts (wg is waited on)
	// groups are the target groups of the manager's last update, by set.
	groups   map[string][]*targetgroup.Group
	lastSync time.Time
	// accepted are, per set, the targets last within its target_limit.
	accepted map[string][]config.Target
	// api is, per set, the last check of its Kubernetes API.
	api map[string]kubeResult
	// logged is, per set and topic, what was last logged about it (a
	// state is logged when it changes, not on every update).
	logged map[string]string
}

type runnerMetrics struct {
	targets, dropped, apiUp, noIP *prometheus.GaugeVec
	apiFailures                   *prometheus.CounterVec
}

// New registers the metrics and prepares the SD entries of c; Run runs
// them. It fails when an entry cannot have a client (a kubernetes entry
// without kubeconfig_file or api_server outside a pod).
func New(o Options, c *config.Config) (*Runner, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	r := &Runner{o: o, log: o.Logger, seen: newSeen(), groups: map[string][]*targetgroup.Group{},
		accepted: map[string][]config.Target{}, api: map[string]kubeResult{}, logged: map[string]string{}}
	es, checks, err := prepare(c)
	if err != nil {
		return nil, err
	}
	r.es, r.checks = es, checks
	gauge := func(m signal.Metric) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	}
	r.m = runnerMetrics{targets: gauge(signal.DiscoveryTargets), dropped: gauge(signal.DiscoveryDroppedTargets),
		apiUp: gauge(signal.DiscoveryKubernetesUp), noIP: gauge(signal.DiscoveryPodsWithoutIP),
		apiFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: signal.DiscoveryKubernetesFailures.Name,
			Help: signal.DiscoveryKubernetesFailures.Help}, signal.DiscoveryKubernetesFailures.Labels)}
	for _, c := range []prometheus.Collector{r.m.targets, r.m.dropped, r.m.apiUp, r.m.noIP, r.m.apiFailures} {
		if err := o.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("discovery metrics: %w", err)
		}
	}
	if r.sdm, err = promdiscovery.CreateAndRegisterSDMetrics(o.Registry); err != nil {
		return nil, err
	}
	r.initMetrics(es)
	return r, nil
}

// prepare lists c's entries and builds the checks of its kubernetes ones.
func prepare(c *config.Config) ([]entry, map[string]*kubeCheck, error) {
	es := entries(c)
	checks := map[string]*kubeCheck{}
	var errs []error
	for _, e := range es {
		if e.kube == nil {
			continue
		}
		k, err := newKubeCheck(e.set, e.kube)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		checks[e.set] = k
	}
	return es, checks, errors.Join(errs...)
}

// Prepare checks c's SD entries and returns what makes them the runner's
// (for a reload: nothing changes unless every component prepared).
func (r *Runner) Prepare(c *config.Config) (apply func(), err error) {
	es, checks, err := prepare(c)
	if err != nil {
		return nil, err
	}
	return func() { r.apply(es, checks) }, nil
}

func (r *Runner) apply(es []entry, checks map[string]*kubeCheck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sets := map[string]bool{}
	for _, e := range es {
		sets[e.set] = true
	}
	for _, e := range r.es {
		if !sets[e.set] { // its metrics and state go with it
			for _, v := range []*prometheus.GaugeVec{r.m.targets, r.m.dropped, r.m.apiUp, r.m.noIP} {
				v.DeletePartialMatch(prometheus.Labels{signal.LabelSDConfig: e.set})
			}
			r.m.apiFailures.DeletePartialMatch(prometheus.Labels{signal.LabelSDConfig: e.set})
			delete(r.accepted, e.set)
			delete(r.api, e.set)
			for k := range r.logged {
				if strings.HasPrefix(k, e.set+"/") {
					delete(r.logged, k)
				}
			}
		}
	}
	r.es, r.checks = es, checks
	r.initMetrics(es)
	if r.mgr != nil {
		if err := r.mgr.ApplyConfig(managerConfigs(es, r.seen)); err != nil {
			r.log.Error("service discovery: applying the config failed", "err", err)
		}
		r.restartChecks()
	}
}

// initMetrics gives every series of es a value from the start.
func (r *Runner) initMetrics(es []entry) {
	for _, e := range es {
		r.m.targets.WithLabelValues(e.set)
		for _, reason := range dropReasons {
			r.m.dropped.WithLabelValues(e.set, reason)
		}
		if e.kube != nil {
			for _, reason := range apiReasons {
				r.m.apiFailures.WithLabelValues(e.set, reason)
			}
		}
	}
}

// Run runs the discovery manager and the Kubernetes checks until ctx
// ends.
func (r *Runner) Run(ctx context.Context) error {
	opts := []func(*promdiscovery.Manager){promdiscovery.Name("scrape")}
	if r.o.UpdateInterval > 0 {
		opts = append(opts, promdiscovery.Updatert(r.o.UpdateInterval))
	}
	mgr := promdiscovery.NewManager(ctx, r.log.With("component", "discovery manager"), r.o.Registry, r.sdm, opts...)
	if mgr == nil {
		return errors.New("service discovery: Prometheus' discovery manager could not register its metrics (is a second one running on the same registry?)")
	}
	r.mu.Lock()
	if r.mgr != nil {
		r.mu.Unlock()
		return errors.New("service discovery: Run called twice")
	}
	r.mgr, r.runCtx = mgr, ctx
	if err := mgr.ApplyConfig(managerConfigs(r.es, r.seen)); err != nil {
		r.log.Error("service discovery: applying the config failed", "err", err)
	}
	r.restartChecks()
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		mgr.Run() // returns when ctx ends
		close(done)
	}()
	defer func() {
		r.mu.Lock()
		if r.stop != nil {
			r.stop()
		}
		r.ended = true // a reload from now on starts no check
		r.mu.Unlock()
		r.wg.Wait()
		<-done
		// The manager does not wait for its discoverers' goroutines:
		// nothing of them runs (or logs) once Run has returned.
		r.seen.wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case tgs, ok := <-mgr.SyncCh():
			if !ok {
				return nil
			}
			r.mu.Lock()
			r.groups = tgs
			r.lastSync = time.Now()
			r.mu.Unlock()
			if r.o.Changed != nil {
				r.o.Changed()
			}
		}
	}
}

// restartChecks stops the running checks and starts those of r.checks;
// under r.mu, after Run started and until it ends.
func (r *Runner) restartChecks() {
	if r.stop != nil {
		r.stop()
	}
	if r.ended {
		return
	}
	ctx, cancel := context.WithCancel(r.runCtx)
	r.stop = cancel
	for _, k := range r.checks {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.runCheck(ctx, k)
		}()
	}
}

// runCheck checks k now, every CheckInterval, and after updates of its
// entry (at most every minCheckGap), until ctx ends.
func (r *Runner) runCheck(ctx context.Context, k *kubeCheck) {
	poke := r.seen.poke(k.set)
	for {
		res := k.check(ctx)
		if ctx.Err() != nil {
			return
		}
		r.record(k, res)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.o.CheckInterval):
		case <-poke:
			select {
			case <-ctx.Done():
				return
			case <-time.After(minCheckGap):
			}
		}
	}
}

// record keeps a check's result, sets its metrics and logs what changed.
func (r *Runner) record(k *kubeCheck, res kubeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checks[k.set] != k {
		return // a reload replaced the check while it ran
	}
	prev, checked := r.api[k.set]
	r.api[k.set] = res
	up := 0.0
	if res.err == nil {
		up = 1
	} else {
		r.m.apiFailures.WithLabelValues(k.set, res.reason).Inc()
	}
	r.m.apiUp.WithLabelValues(k.set).Set(up)
	switch {
	case res.err != nil && (!checked || prev.err == nil || prev.err.Error() != res.err.Error()):
		r.log.Error("service discovery: "+k.set+": "+res.err.Error(), "sd_config", k.set, "reason", res.reason)
	case res.err == nil && checked && prev.err != nil:
		r.log.Info("service discovery: "+k.set+": the Kubernetes API answers again", "sd_config", k.set, "api_server", k.host)
	}
	if res.err != nil || k.role != "pod" {
		return
	}
	r.m.noIP.WithLabelValues(k.set).Set(float64(len(res.noIP)))
	names := strings.Join(res.noIP, ", ")
	if names == r.logged[k.set+"/noip"] {
		return
	}
	r.logged[k.set+"/noip"] = names
	if len(res.noIP) > 0 {
		n := fmt.Sprint(len(res.noIP))
		if res.noIPMore {
			n = "more than " + n
		}
		r.log.Info("service discovery: "+k.set+": "+n+" pods have no IP yet, so no target; they are scraped once the kubelet reports one (a pod stuck without an IP is pending: kubectl describe pod)",
			"sd_config", k.set, "pods", examples(res.noIP))
	}
}

// examples is the first few of names, and how many more.
func examples(names []string) string {
	if len(names) <= maxExamples {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxExamples], ", "), len(names)-maxExamples)
}

// Discovered returns p with the targets the SD entries of p's config
// find: each entry's target groups of the last update, relabeled by its
// relabel_configs, within its target_limit, after p's own targets (whose
// names win). It is serve's daemon's hook (serve.Options.Discovered): the
// daemon asks on every change, reload and file_sd refresh.
func (r *Runner) Discovered(p *pipeline.Pipeline) *pipeline.Pipeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := entries(p.Config)
	if len(es) == 0 {
		return p
	}
	var all []config.Target
	sets := make([]Set, len(es))
	owner := map[string]int{} // target name: its set
	for i, e := range es {
		s := relabelTargets(e.set, e.targets, &p.Config.Global, r.groups[e.set], r.o.Engines)
		if n := len(s.Targets); n > e.targets.TargetLimit {
			s.Dropped[ReasonOverLimit] = n
			s.Targets = r.accepted[e.set]
			r.logOnce(e.set, "limit", fmt.Sprint(n), slog.LevelError, fmt.Sprintf(
				"found %d targets, over its target_limit %d: kvwatch keeps the %d targets it had and scrapes none of the new ones; narrow its selectors or relabel_configs (one that matches every pod of a cluster is usually a mistake), or raise target_limit",
				n, e.targets.TargetLimit, len(s.Targets)))
		} else {
			r.accepted[e.set] = s.Targets
			r.logOnce(e.set, "limit", "", 0, "")
		}
		for _, t := range s.Targets {
			if _, ok := owner[t.Name]; !ok {
				owner[t.Name] = i
			}
		}
		all = append(all, s.Targets...)
		sets[i] = s
	}
	np, taken, err := p.WithDiscovered(all)
	if err != nil {
		r.log.Error("service discovery: the discovered targets cannot be scraped; keeping the config's targets only", "err", err)
		return p
	}
	takenBy := make([][]string, len(es))
	for _, name := range taken {
		i := owner[name]
		takenBy[i] = append(takenBy[i], name)
	}
	for i, s := range sets {
		s.Dropped[ReasonDuplicate] += len(takenBy[i])
		r.report(s, len(s.Targets)-len(takenBy[i]), takenBy[i])
	}
	return np
}

// report sets a set's metrics and logs what changed.
func (r *Runner) report(s Set, kept int, taken []string) {
	r.m.targets.WithLabelValues(s.Name).Set(float64(kept))
	for _, reason := range dropReasons {
		r.m.dropped.WithLabelValues(s.Name, reason).Set(float64(s.Dropped[reason]))
	}
	if !r.seen.at(s.Name).IsZero() { // its discoverer has answered
		level := slog.LevelDebug // churn is normal
		if r.logged[s.Name+"/targets"] == "" {
			level = slog.LevelInfo
		}
		r.logOnce(s.Name, "targets", fmt.Sprint(kept, "/", s.Dropped[ReasonRelabeled]), level,
			fmt.Sprintf("%d targets (%d dropped by relabel_configs)", kept, s.Dropped[ReasonRelabeled]))
	}
	msg := ""
	if len(s.Invalid) > 0 {
		msg = fmt.Sprintf("%d targets cannot be scraped and are left out: %s", s.Dropped[ReasonInvalid], strings.Join(s.Invalid, "; "))
	}
	r.logOnce(s.Name, "invalid", msg, slog.LevelWarn, msg)
	msg = ""
	if len(taken) > 0 {
		msg = fmt.Sprintf("%d targets have the name of another target and are left out: %s; give them distinct names (the name label, by default host:port)", len(taken), examples(taken))
	}
	r.logOnce(s.Name, "duplicate", msg, slog.LevelWarn, msg)
}

// logOnce logs msg about topic of set when state differs from the last
// state logged; an empty state is logged as nothing. Under r.mu.
func (r *Runner) logOnce(set, topic, state string, level slog.Level, msg string) {
	key := set + "/" + topic
	if r.logged[key] == state {
		return
	}
	r.logged[key] = state
	if state != "" {
		r.log.Log(context.Background(), level, "service discovery: "+set+": "+msg, "sd_config", set)
	}
}
