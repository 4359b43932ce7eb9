package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options control a Cluster. The zero value is usable: real-time clock,
// speed 1, seed 0, loopback, free ports.
type Options struct {
	// Seed makes the load model deterministic: same seed, same scenario,
	// same steps ⇒ same pages.
	Seed uint64
	// Speed multiplies simulated time against wall time (default 1).
	Speed float64
	// Tick is the wall time between load-model updates in real-time mode
	// (default 1s). Pages are rendered at most once per tick.
	Tick time.Duration
	// ManualClock stops the real-time ticker; the caller moves time with Advance.
	ManualClock bool
	// Epoch is the wall-clock time of simulated time 0, used for _created
	// series and start times (default: time.Now() at NewCluster).
	Epoch time.Time
	// Logger receives the simulator's logs (default: discard).
	Logger *slog.Logger
	// ListenHost is the address to listen on (default 127.0.0.1).
	ListenHost string
	// BasePort, when not 0, gives server i the port BasePort+i unless its
	// scenario entry sets a port; 0 picks free ports.
	BasePort int
}

// Endpoint is one simulated server as a client sees it.
type Endpoint struct {
	Name        string
	Role        string // prefill, decode, unified, router or cache
	Engine      string
	URL         string // base URL, e.g. http://127.0.0.1:30000
	MetricsPath string // e.g. /metrics
	Version     string // the dialect it serves now (servers[].version or SetVersion's; "" for an engine of one dialect)
	// KVUnified is, for a llama.cpp server, whether its slots share one
	// KV cache (servers[].kv_unified): what a kvwatch target of it sets
	// as kv_unified. nil for other engines.
	KVUnified *bool
}

// Cluster runs the servers of a scenario under one load model. Its methods
// are safe for concurrent use.
type Cluster struct {
	sc   *Scenario
	opts Options
	log  *slog.Logger

	mu      sync.Mutex // guards the load model below
	servers []*server
	byName  map[string]*server
	step    int64
	now     time.Duration // simulated time since start
	carry   time.Duration

	started  bool
	stop     context.CancelFunc
	wg       sync.WaitGroup
	httpSrvs []*http.Server

	// pages counts the metrics pages served whole, by every server of the
	// cluster (GET /-/sim/pages): a benchmark counts a scraper's scrapes
	// with it without asking the scraper.
	pages atomic.Uint64
}

// PagesServed returns how many metrics pages the cluster's servers have
// served whole since it started.
func (c *Cluster) PagesServed() uint64 { return c.pages.Load() }

// server is one simulated endpoint: its ranks, faults and rendered page.
type server struct {
	cl      *Cluster
	idx     int
	spec    ServerSpec
	eng     *engine
	rng     *rand.Rand
	ranks   []*rank
	workers []*server
	pd      bool

	factor float64
	fault  Fault
	// version is the engine's dialect (spec.Version, or SetVersion's).
	version                       string
	cacheOn, reserveAll, preempts bool

	nextID, nextTask int64
	startedAt        time.Duration
	// processAt is when the server's process started: at a restart, and
	// at a new version (SetVersion keeps the counters, not the process).
	processAt time.Duration
	restarts  int

	// router state, per worker
	active, processed, selected []int64
	routed, routeErrors         int64

	frozen *Truth
	snap   atomic.Pointer[snapshot]
	url    string
	ln     net.Listener
}

// NewCluster builds the load model for sc. Call Start to listen.
func NewCluster(sc *Scenario, opts Options) (*Cluster, error) {
	if sc == nil || len(sc.Servers) == 0 {
		return nil, errors.New("new cluster: empty scenario; load one with LoadScenario or BuiltinScenario")
	}
	if opts.Speed == 0 {
		opts.Speed = 1
	}
	if opts.Speed < 0 {
		return nil, fmt.Errorf("new cluster: speed must be positive, got %g", opts.Speed)
	}
	if opts.Tick == 0 {
		opts.Tick = time.Second
	}
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Now()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ListenHost == "" {
		opts.ListenHost = "127.0.0.1"
	}
	c := &Cluster{sc: sc, opts: opts, log: opts.Logger, byName: map[string]*server{}}
	for i, spec := range sc.Servers {
		eng, ok := engineOf(spec.Engine)
		if !ok {
			return nil, fmt.Errorf("new cluster: server %q: unknown engine %q; build the scenario with ParseScenario, LoadScenario or GeneratedScenario, which check it", spec.Name, spec.Engine)
		}
		h := fnv.New64a()
		h.Write([]byte(spec.Name))
		s := &server{
			cl: c, idx: i, spec: spec, eng: eng, factor: 1, version: spec.Version,
			rng:        rand.New(rand.NewPCG(opts.Seed, h.Sum64())),
			cacheOn:    *spec.PrefixCaching,
			reserveAll: eng.reserves,
			preempts:   !eng.reserves && !eng.slots,
		}
		if k, err := ParseFaultKind(spec.Fault.Kind); err == nil {
			s.fault = Fault{Kind: k, Delay: spec.Fault.Delay}
			if k == FaultSlow && s.fault.Delay == 0 {
				s.fault.Delay = 3 * time.Second
			}
		}
		s.reset()
		c.servers = append(c.servers, s)
		c.byName[spec.Name] = s
	}
	for _, s := range c.servers {
		for _, w := range s.spec.Workers {
			ws := c.byName[w]
			s.workers = append(s.workers, ws)
			s.pd = s.pd || ws.spec.Role == RolePrefill
		}
		n := len(s.workers)
		s.active, s.processed, s.selected = make([]int64, n), make([]int64, n), make([]int64, n)
	}
	c.publish()
	return c, nil
}

// reset empties the server's ranks and counters (start and restart).
func (s *server) reset() {
	s.ranks = nil
	if s.spec.Role != RoleRouter && !s.eng.tierOf {
		for dp := range s.spec.DP {
			k := &rank{srv: s, dp: dp, capacity: s.spec.CapacityTokens, page: s.spec.PageSize,
				maxRunning: admissionLimit(s.spec), groups: make([]group, s.spec.Load.PrefixGroups)}
			if s.eng.slots {
				k.slots = make([]slot, s.spec.MaxRunningRequests)
				for i := range k.slots {
					k.slots[i].group = -1
				}
			}
			k.h = newHists()
			k.host = s.newHostTier()
			s.ranks = append(s.ranks, k)
		}
	}
	for i := range s.active {
		s.active[i], s.processed[i], s.selected[i] = 0, 0, 0
	}
	s.routed, s.routeErrors = 0, 0
	if s.cl != nil {
		s.startedAt, s.processAt = s.cl.now, s.cl.now
	}
}

var (
	ttftBuckets  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	e2eBuckets   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	itlBuckets   = []float64{0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8}
	tokenBuckets = []float64{100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12000, 15000, 20000, 30000, 40000, 50000, 60000, 70000, 80000, 90000, 100000}
)

// healthy reports whether a router would send work to s.
func (s *server) healthy() bool {
	return s.fault.Kind != FaultError && s.fault.Kind != FaultDrop
}

func (s *server) load() int {
	n := 0
	for _, k := range s.ranks {
		n += k.load()
	}
	return n
}

// leastLoaded picks the healthy worker with the least load among those
// accepted by ok; ties go to the first.
func (s *server) leastLoaded(ok func(*server) bool) int {
	best, bestLoad := -1, 0
	for i, w := range s.workers {
		if !ok(w) || !w.healthy() {
			continue
		}
		if l := w.load(); best < 0 || l < bestLoad {
			best, bestLoad = i, l
		}
	}
	return best
}

// pickRank is the server's own DP balancing: the least-loaded rank.
func (s *server) pickRank() *rank {
	best := s.ranks[0]
	for _, k := range s.ranks[1:] {
		if k.load() < best.load() {
			best = k
		}
	}
	return best
}

// arrive delivers new requests arriving at s during one step.
func (s *server) arrive(now, dt time.Duration) {
	l := &s.spec.Load
	if l.Rate == 0 {
		return
	}
	rate := l.Rate * s.factor * l.scheduleFactor(now) * l.growthFactor(now)
	if l.BurstFactor > 1 && now%l.BurstEvery >= l.BurstEvery-l.BurstDuration {
		rate *= l.BurstFactor
	}
	for range poisson(s.rng, rate*dt.Seconds()) {
		s.nextID++
		r := newRequest(s.rng, l, s.nextID, now)
		if s.spec.Role == RoleRouter {
			s.route(r)
		} else {
			k := s.pickRank()
			k.waiting = append(k.waiting, r)
		}
	}
}

// route sends r to a worker (regular) or to a prefill/decode pair (PD).
func (s *server) route(r *request) {
	s.routed++
	if !s.pd {
		i := s.leastLoaded(func(*server) bool { return true })
		if i < 0 {
			s.routeErrors++
			return
		}
		s.selected[i]++
		s.active[i]++
		r.router, r.worker = s, i
		w := s.workers[i]
		k := w.pickRank()
		k.waiting = append(k.waiting, r)
		return
	}
	p := s.leastLoaded(func(w *server) bool { return w.spec.Role == RolePrefill })
	d := s.leastLoaded(func(w *server) bool { return w.spec.Role == RoleDecode })
	if p < 0 || d < 0 {
		s.routeErrors++
		return
	}
	s.selected[p]++
	s.selected[d]++
	s.active[p]++
	s.active[d]++
	link := &pdLink{}
	r.link, r.router, r.worker = link, s, p
	pr := s.workers[p].pickRank()
	pr.bootstrap = append(pr.bootstrap, r)
	dr := &request{id: r.id, prompt: r.prompt, output: r.output, maxNew: r.maxNew, group: -1, arrived: r.arrived, link: link, router: s, worker: d}
	dr.computed = dr.prompt
	dk := s.workers[d].pickRank()
	dk.prealloc = append(dk.prealloc, dr)
}

// advanceLocked runs the load model for d of simulated time, in whole steps.
func (c *Cluster) advanceLocked(d time.Duration) {
	c.carry += d
	step := c.sc.Step
	for c.carry >= step {
		c.carry -= step
		c.step++
		c.now += step
		for _, s := range c.servers {
			s.arrive(c.now, step)
		}
		for _, s := range c.servers {
			for _, k := range s.ranks {
				k.dropLost()
				k.step(c.now, step)
				k.stepReuse()
				k.stepHost()
			}
		}
	}
}

// dropLost removes PD half-requests whose other half was lost in a restart.
func (k *rank) dropLost() {
	if len(k.bootstrap)+len(k.transfer)+len(k.prealloc) == 0 {
		return
	}
	filter := func(q []*request, held bool) []*request {
		keep := q[:0]
		for _, r := range q {
			if r.link != nil && r.link.lost {
				if held {
					k.release(r, false)
				}
				if r.router != nil && r.router.active[r.worker] > 0 {
					r.router.active[r.worker]--
				}
				continue
			}
			keep = append(keep, r)
		}
		clear(q[len(keep):])
		return keep
	}
	k.bootstrap = filter(k.bootstrap, false)
	k.prealloc = filter(k.prealloc, false)
	k.transfer = filter(k.transfer, true)
}

// Advance moves simulated time forward by d and publishes new pages. It is
// how tests drive a cluster made with Options.ManualClock; d is rounded down
// to whole scenario steps, the remainder carried to the next call.
func (c *Cluster) Advance(d time.Duration) {
	c.mu.Lock()
	c.advanceLocked(d)
	c.publishLocked()
	c.mu.Unlock()
}

// Now returns the simulated time since start.
func (c *Cluster) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Cluster) publish() {
	c.mu.Lock()
	c.publishLocked()
	c.mu.Unlock()
}

// publishLocked takes a snapshot of every server; pages render lazily from it.
func (c *Cluster) publishLocked() {
	for _, s := range c.servers {
		t := s.truthLocked()
		if s.fault.Kind == FaultFreeze {
			if s.frozen == nil {
				f := t
				s.frozen = &f
			}
		} else {
			s.frozen = nil
		}
		t.Frozen = s.frozen
		s.snap.Store(&snapshot{srv: s, truth: t, frozen: s.frozen, hists: s.histSnapshot(), created: c.opts.Epoch.Add(s.startedAt), started: c.opts.Epoch.Add(s.processAt), wall: c.opts.Epoch.Add(c.now)})
	}
}

func (c *Cluster) server(name string) (*server, error) {
	s, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("unknown simulated server %q", name)
	}
	return s, nil
}

// Truth returns the ground truth that name's /metrics page shows right now
// (the zero Truth if there is no such server). Under FaultFreeze the page's
// gauges stay at Truth.Frozen while Truth itself keeps moving.
func (c *Cluster) Truth(name string) Truth {
	s, ok := c.byName[name]
	if !ok {
		return Truth{}
	}
	return s.snap.Load().truth
}

// SetLoad multiplies name's arrival rate by factor (1 = the scenario's
// rate). For a router it scales the traffic it spreads over its workers.
func (c *Cluster) SetLoad(name string, factor float64) error {
	if factor < 0 || factor != factor {
		return fmt.Errorf("set load %s: factor must be 0 or more, got %g", name, factor)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.server(name)
	if err != nil {
		return err
	}
	s.factor = factor
	return nil
}

// SetVersion upgrades (or downgrades) name's engine to version in place,
// as a rolling restart with a new image would, keeping its requests and
// counters: from the next page on it is written in that version's dialect.
func (c *Cluster) SetVersion(name, version string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.server(name)
	if err != nil {
		return err
	}
	if err := s.eng.checkVersion(version); err != nil {
		return fmt.Errorf("set version %s: %w", name, err)
	}
	s.version = version
	s.processAt = c.now
	c.publishLocked()
	return nil
}

// SetFault switches name's fault; FaultNone clears it. FaultRestart resets
// the server at once (requests lost, counters 0) and then clears itself.
func (c *Cluster) SetFault(name string, f Fault) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.server(name)
	if err != nil {
		return err
	}
	if f.Kind == FaultSlow && f.Delay == 0 {
		f.Delay = 3 * time.Second
	}
	if f.Kind == FaultRestart {
		s.restartLocked()
		f = Fault{}
	}
	s.fault = f
	c.publishLocked()
	return nil
}

// restartLocked drops every request on s and resets its counters.
func (s *server) restartLocked() {
	for _, k := range s.ranks {
		for _, q := range [][]*request{k.waiting, k.running, k.bootstrap, k.inflight, k.prealloc, k.transfer} {
			for _, r := range q {
				if r.link != nil {
					r.link.lost = true
				}
				if r.router != nil && r.router.active[r.worker] > 0 {
					r.router.active[r.worker]--
				}
			}
		}
	}
	s.restarts++
	s.frozen = nil
	s.reset()
}

// Endpoints lists the servers with their URLs (empty URLs before Start).
func (c *Cluster) Endpoints() []Endpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	eps := make([]Endpoint, 0, len(c.servers))
	for _, s := range c.servers {
		ep := Endpoint{Name: s.spec.Name, Role: s.spec.Role, Engine: s.spec.Engine, URL: s.url, MetricsPath: s.eng.path(), Version: s.version}
		if s.eng.slots {
			ep.KVUnified = new(s.spec.KVUnified)
		}
		eps = append(eps, ep)
	}
	return eps
}

// Start listens on every server's port and, unless ManualClock is set,
// starts the clock. It returns once every listener is open; ctx bounds the
// cluster's lifetime as well as Close.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("start simulator: already started")
	}
	c.started = true
	c.mu.Unlock()
	var lc net.ListenConfig
	for i, s := range c.servers {
		port := s.spec.Port
		if port == 0 && c.opts.BasePort != 0 {
			port = c.opts.BasePort + i
		}
		addr := net.JoinHostPort(c.opts.ListenHost, strconv.Itoa(port))
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			c.Close()
			return fmt.Errorf("start simulator: listen for %s on %s: %w; pick another --base-port or free the port", s.spec.Name, addr, err)
		}
		s.ln = ln
		c.mu.Lock()
		s.url = "http://" + ln.Addr().String()
		c.mu.Unlock()
		hs := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
		c.httpSrvs = append(c.httpSrvs, hs)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.log.Error("simulated server stopped", "server", s.spec.Name, "err", err)
			}
		}()
	}
	c.publish() // pages name the workers' URLs from now on
	runCtx, cancel := context.WithCancel(ctx)
	c.stop = cancel
	if !c.opts.ManualClock {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			t := time.NewTicker(c.opts.Tick)
			defer t.Stop()
			sim := time.Duration(float64(c.opts.Tick) * c.opts.Speed)
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					c.Advance(sim)
				}
			}
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-runCtx.Done()
		for _, hs := range c.httpSrvs {
			hs.Close()
		}
	}()
	return nil
}

// Close stops the clock and every listener and waits for them.
func (c *Cluster) Close() error {
	if c.stop != nil {
		c.stop()
	} else {
		for _, hs := range c.httpSrvs {
			hs.Close()
		}
	}
	c.wg.Wait()
	return nil
}
