// Package alerting evaluates Prometheus rule groups (recording and alerting
// rules, in the rulefmt YAML that `kvwatch stack` generates) with the promql
// engine over serve's in-memory history. Recording rules write their results
// back into the history, except label-preserving ones (one output series per
// input series, such as rate(counter[5m])): those are computed on demand,
// their names expanded into their expressions in every other rule and, through
// the Manager's Expand, in the query API (see ondemand.go). Alerting rules go pending → firing → resolved with
// their `for` and `keep_firing_for`, write ALERTS series, and are sent to
// Alertmanager's v2 API and to webhooks when configured.
//
// It does not use github.com/prometheus/prometheus/rules: that package pulls
// in the notifier and service discovery (Kubernetes, cloud SDKs, over 700
// packages). This evaluator follows its semantics for the subset kvwatch
// needs: no rule-group limits, query offsets or alert restoration across
// restarts beyond what the snapshotted history holds.
package alerting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
)

// Storage is where rules read from and recording rules write to; the
// history store satisfies it.
type Storage interface {
	storage.Queryable
	// Append adds one sample at t (milliseconds); false if it was dropped.
	Append(lset labels.Labels, t int64, v float64) bool
}

// Options configure a Manager.
type Options struct {
	// Groups are the rule groups to evaluate.
	Groups []rulefmt.RuleGroup
	// Interval is the evaluation interval of groups that set none. Default 15s.
	Interval time.Duration
	// Storage is read by every rule and written by recording rules.
	Storage Storage
	// Engine runs the queries. Default: a new engine with a 5m lookback
	// whose subqueries without a step (`x[5m:]`) run at Interval, as
	// Prometheus runs them at its global evaluation_interval.
	Engine *promql.Engine
	// Notifiers receive firing and resolved alerts.
	Notifiers []Notifier
	// ExternalURL is kvwatch's own URL, used for alerts' generatorURL.
	ExternalURL string
	// ResendDelay is how often a still-firing alert is sent again. Default 1m.
	ResendDelay time.Duration
	// Logger receives evaluation and notification errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// StoreAllRules evaluates and stores every recording rule, as
	// Prometheus does, instead of computing label-preserving ones on
	// demand. It costs one stored series per input series of each such
	// rule; the default (false) saves that memory for query-time CPU.
	StoreAllRules bool
}

// Alert states, as the Prometheus API names them.
const (
	StateInactive = "inactive"
	StatePending  = "pending"
	StateFiring   = "firing"
)

// resolvedRetention is how long a resolved alert is kept (and re-sent as
// resolved), as Prometheus does.
const resolvedRetention = 15 * time.Minute

// Alert is one alert instance.
type Alert struct {
	Labels      labels.Labels `json:"labels"`
	Annotations labels.Labels `json:"annotations"`
	// State is pending, firing, or inactive once resolved.
	State    string    `json:"state"`
	ActiveAt time.Time `json:"activeAt"`
	// FiredAt is when it started firing; zero while pending.
	FiredAt    time.Time `json:"firedAt,omitzero"`
	ResolvedAt time.Time `json:"resolvedAt,omitzero"`
	// Value is the expression's value at the last evaluation, as a string
	// (the Prometheus API form).
	Value string `json:"value"`

	lastSeen time.Time
	lastSent time.Time
}

// Rule is one rule's state, in the form of Prometheus' /api/v1/rules.
type Rule struct {
	Name        string        `json:"name"`
	Query       string        `json:"query"`
	Duration    float64       `json:"duration,omitempty"`
	KeepFiring  float64       `json:"keepFiringFor,omitempty"`
	Labels      labels.Labels `json:"labels"`
	Annotations labels.Labels `json:"annotations,omitempty"`
	Alerts      []Alert       `json:"alerts,omitempty"`
	Health      string        `json:"health"`
	LastError   string        `json:"lastError,omitempty"`
	Type        string        `json:"type"`
	State       string        `json:"state,omitempty"`
	// OnDemand marks a recording rule that is not evaluated on a schedule
	// nor stored: queries compute it from its expression when they name
	// it. Its health is "ok", its lastEvaluation the zero time and its
	// evaluationTime 0, as for a rule not evaluated yet.
	OnDemand    bool      `json:"onDemand,omitempty"`
	LastEval    time.Time `json:"lastEvaluation"`
	EvalTime    float64   `json:"evaluationTime"`
	evalQuery   string
	forD        time.Duration
	keep        time.Duration
	recordName  string
	active      map[uint64]*Alert
	prevSeries  map[uint64]labels.Labels
	annotations map[string]string
	labelTmpl   map[string]string
}

// Group is one rule group's state, in the form of /api/v1/rules.
type Group struct {
	Name     string    `json:"name"`
	File     string    `json:"file"`
	Rules    []*Rule   `json:"rules"`
	Interval float64   `json:"interval"`
	LastEval time.Time `json:"lastEvaluation"`
	EvalTime float64   `json:"evaluationTime"`
	interval time.Duration
}

// Manager evaluates rule groups. It is safe for concurrent use.
type Manager struct {
	opts Options
	mu   sync.RWMutex
	// subqueryStep is Interval in milliseconds, the default engine's step
	// of a subquery that names none; read while a query runs (outside mu).
	subqueryStep atomic.Int64
	// groups, expander and opts' Groups, Interval and Notifiers change
	// on ApplyConfig, under mu.
	groups   []*Group
	ext      *url.URL
	expander *Expander
	// reset tells Run that the groups changed: it restarts its rounds.
	reset chan struct{}
}

// Config is what a reload may change in a running manager.
type Config struct {
	// Groups are the rule groups to evaluate.
	Groups []rulefmt.RuleGroup
	// Interval is the evaluation interval of groups that set none; must
	// be positive.
	Interval time.Duration
	// Notifiers receive firing and resolved alerts.
	Notifiers []Notifier
}

// New checks every rule's expression and returns a manager for them.
func New(opts Options) (*Manager, error) {
	if opts.Storage == nil {
		return nil, errors.New("alerting: no storage")
	}
	if opts.Interval <= 0 {
		opts.Interval = 15 * time.Second
	}
	if opts.ResendDelay <= 0 {
		opts.ResendDelay = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Manager{opts: opts, reset: make(chan struct{}, 1)}
	m.subqueryStep.Store(opts.Interval.Milliseconds())
	if opts.Engine == nil {
		// Without NoStepSubqueryIntervalFn the engine dereferences nil on
		// `x[5m:]` (in a rule or a template's query) and the panic ends
		// the process.
		m.opts.Engine = promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute,
			LookbackDelta: 5 * time.Minute, Logger: opts.Logger,
			NoStepSubqueryIntervalFn: func(int64) int64 { return m.subqueryStep.Load() }})
	}
	if opts.ExternalURL != "" {
		u, err := url.Parse(opts.ExternalURL)
		if err != nil {
			return nil, fmt.Errorf("alerting: external URL: %w", err)
		}
		m.ext = u
	}
	groups, expander, err := m.compile(opts.Groups, opts.Interval)
	if err != nil {
		return nil, err
	}
	m.groups, m.expander = groups, expander
	return m, nil
}

// compile parses the groups' rules; a group without an interval gets
// interval.
func (m *Manager) compile(rgs []rulefmt.RuleGroup, interval time.Duration) ([]*Group, *Expander, error) {
	p := parser.NewParser(parser.Options{})
	var errs []error
	var recs []RecordingRule
	var groups []*Group
	for _, g := range rgs {
		grp := &Group{Name: g.Name, File: "", interval: time.Duration(g.Interval)}
		if grp.interval <= 0 {
			grp.interval = interval
		}
		grp.Interval = grp.interval.Seconds()
		for _, r := range g.Rules {
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				errs = append(errs, fmt.Errorf("group %q, rule %q: %w", g.Name, r.Record+r.Alert, err))
				continue
			}
			lset := labels.FromMap(mergeMaps(g.Labels, r.Labels))
			rule := &Rule{Query: expr.String(), Labels: lset, Health: "unknown", evalQuery: expr.String(),
				active: map[uint64]*Alert{}, prevSeries: map[uint64]labels.Labels{}, labelTmpl: lset.Map()}
			if r.Record != "" {
				rule.Name, rule.Type, rule.recordName = r.Record, "recording", r.Record
				recs = append(recs, RecordingRule{Name: r.Record, Expr: expr, Labels: lset, Interval: grp.interval})
			} else {
				rule.Name, rule.Type, rule.State = r.Alert, "alerting", StateInactive
				rule.forD, rule.keep = time.Duration(r.For), time.Duration(r.KeepFiringFor)
				rule.Duration, rule.KeepFiring = rule.forD.Seconds(), rule.keep.Seconds()
				rule.annotations = r.Annotations
				rule.Annotations = labels.FromMap(r.Annotations)
			}
			grp.Rules = append(grp.Rules, rule)
		}
		groups = append(groups, grp)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	var expander *Expander
	if !m.opts.StoreAllRules {
		expander = NewExpander(recs)
	}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Type == "recording" && expander.OnDemand(r.Name) {
				r.OnDemand, r.Health = true, "ok"
				continue
			}
			q, err := expander.ExpandString(r.Query)
			if err != nil {
				return nil, nil, fmt.Errorf("group %q, rule %q: expand on-demand rules: %w", g.Name, r.Name, err)
			}
			r.evalQuery = q
		}
	}
	return groups, expander, nil
}

// Prepare checks c and returns what makes it the manager's: the rules
// are replaced, each keeping the state (pending and firing alerts, the
// series it wrote, its health) of the rule of the same group, name, type
// and labels before it, as Prometheus does on a reload; the series of
// rules that went get staleness markers, and Run restarts its rounds at
// the new intervals. Nothing changes until apply is called, so a runtime
// can check every component before it changes any.
func (m *Manager) Prepare(c Config) (apply func(), err error) {
	if c.Interval <= 0 {
		return nil, fmt.Errorf("alerting: evaluation interval %s is not positive", c.Interval)
	}
	groups, expander, err := m.compile(c.Groups, c.Interval)
	if err != nil {
		return nil, err
	}
	return func() {
		m.mu.Lock()
		old := m.groups
		kept := map[*Rule]bool{}
		for _, g := range groups {
			for _, r := range g.Rules {
				if o := findRule(old, g.Name, r); o != nil {
					r.active, r.prevSeries, r.State = o.active, o.prevSeries, o.State
					if !r.OnDemand {
						r.Health, r.LastError, r.LastEval, r.EvalTime = o.Health, o.LastError, o.LastEval, o.EvalTime
					}
					kept[o] = true
				}
			}
		}
		t := m.opts.Now().UnixMilli()
		for _, g := range old {
			for _, r := range g.Rules {
				if !kept[r] {
					m.staleMissing(r.prevSeries, nil, t)
				}
			}
		}
		m.groups, m.expander = groups, expander
		m.opts.Groups, m.opts.Interval, m.opts.Notifiers = c.Groups, c.Interval, c.Notifiers
		m.subqueryStep.Store(c.Interval.Milliseconds())
		m.mu.Unlock()
		select {
		case m.reset <- struct{}{}:
		default: // a restart is already due
		}
	}, nil
}

// ApplyConfig makes c the manager's config (Prepare, then apply).
func (m *Manager) ApplyConfig(c Config) error {
	apply, err := m.Prepare(c)
	if err != nil {
		return err
	}
	apply()
	return nil
}

// Config returns the manager's config in effect.
func (m *Manager) Config() Config {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return Config{Groups: m.opts.Groups, Interval: m.opts.Interval, Notifiers: m.opts.Notifiers}
}

// findRule returns the rule of groups that r continues: same group name,
// rule name, type and labels; nil when there is none.
func findRule(groups []*Group, group string, r *Rule) *Rule {
	for _, g := range groups {
		if g.Name != group {
			continue
		}
		for _, o := range g.Rules {
			if o.Name == r.Name && o.Type == r.Type && labels.Equal(o.Labels, r.Labels) {
				return o
			}
		}
	}
	return nil
}

// Expand returns q with the names of on-demand recording rules replaced by
// their expressions (see Expander.Expand), ready for the promql engine; q
// itself when it names none. The error is q's parse error.
func (m *Manager) Expand(q string) (string, error) {
	m.mu.RLock()
	e := m.expander
	m.mu.RUnlock()
	return e.ExpandString(q)
}

// OnDemandNames returns the names of the on-demand recording rules, sorted:
// they have no stored series, but queries that name them get results.
func (m *Manager) OnDemandNames() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.expander.Names()
}

// OnDemandInputs returns the selectors whose series an on-demand rule's
// series need (Expander.Inputs); nil when name is not one.
func (m *Manager) OnDemandInputs(name string) [][]*labels.Matcher {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.expander.Inputs(name)
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Run evaluates every group at its interval until ctx ends, and sends
// notifications from a goroutine of its own so that a slow receiver does
// not delay evaluation. It returns nil when ctx ends.
//
// Groups of one interval are evaluated one after the other at one
// timestamp, in their order (the recording groups before the alert groups
// in serve's rules), as EvalAt and promtool's rule tests do: a rule that
// reads a series an earlier group records sees this evaluation's value.
// Prometheus evaluates each group on a schedule of its own, where such a
// rule may read the previous evaluation's value instead (docs/stack.md).
func (m *Manager) Run(ctx context.Context) error {
	out := make(chan []Alert, 16)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for batch := range out {
			m.notify(ctx, batch)
		}
	}()
	defer func() {
		close(out)
		<-sent
	}()
	for {
		rctx, cancel := context.WithCancel(ctx)
		var rounds sync.WaitGroup
		m.mu.RLock()
		sets := byInterval(m.groups)
		m.mu.RUnlock()
		for _, gs := range sets {
			rounds.Add(1)
			go func() {
				defer rounds.Done()
				m.rounds(rctx, gs, out)
			}()
		}
		select {
		case <-ctx.Done():
		case <-m.reset: // ApplyConfig: new groups, new intervals
		}
		cancel()
		rounds.Wait() // every round returns once rctx ends
		if ctx.Err() != nil {
			return nil
		}
	}
}

// rounds evaluates gs, groups of one interval, every interval until ctx
// ends, and queues the alerts due on out.
func (m *Manager) rounds(ctx context.Context, gs []*Group, out chan<- []Alert) {
	t := time.NewTicker(gs[0].interval)
	defer t.Stop()
	for {
		ts := m.opts.Now()
		for _, g := range gs {
			if ctx.Err() != nil {
				return
			}
			if batch := m.evalGroup(ctx, g, ts); len(batch) > 0 {
				select {
				case out <- batch:
				default:
					m.opts.Logger.Warn("alert notifications are backing up; dropped a batch", "group", g.Name)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// byInterval splits groups by interval, each list in the groups' order,
// the lists in the order of their first group.
func byInterval(groups []*Group) [][]*Group {
	var out [][]*Group
	for _, g := range groups {
		i := slices.IndexFunc(out, func(gs []*Group) bool { return gs[0].interval == g.interval })
		if i < 0 {
			out = append(out, nil)
			i = len(out) - 1
		}
		out[i] = append(out[i], g)
	}
	return out
}

// EvalAt evaluates every group once at ts and sends what is due to the
// notifiers synchronously. Tests and `kvwatch demo` drive time with it.
func (m *Manager) EvalAt(ctx context.Context, ts time.Time) {
	m.mu.RLock()
	groups := m.groups
	m.mu.RUnlock()
	for _, g := range groups {
		if batch := m.evalGroup(ctx, g, ts); len(batch) > 0 {
			m.notify(ctx, batch)
		}
	}
}

// evalGroup evaluates g's rules in order at ts and returns the alerts due
// to be sent.
func (m *Manager) evalGroup(ctx context.Context, g *Group, ts time.Time) []Alert {
	start := time.Now()
	var due []Alert
	for _, r := range g.Rules {
		if r.OnDemand {
			continue
		}
		rs := time.Now()
		var vec promql.Vector
		var err error
		// The rule's CPU shows under its name in serve's profiles
		// (/debug/pprof/profile; go tool pprof -tags, -tagfocus rule=NAME).
		pprof.Do(ctx, pprof.Labels("rule_group", g.Name, "rule", r.Name), func(ctx context.Context) {
			vec, err = m.query(ctx, r.evalQuery, ts)
		})
		m.mu.Lock()
		r.LastEval = ts
		if err != nil {
			r.Health, r.LastError = "err", err.Error()
			m.opts.Logger.Warn("rule evaluation failed", "group", g.Name, "rule", r.Name, "err", err)
		} else {
			r.Health, r.LastError = "ok", ""
			if r.Type == "recording" {
				m.record(r, vec, ts)
			} else {
				due = append(due, m.alert(ctx, r, vec, ts)...)
			}
		}
		r.EvalTime = time.Since(rs).Seconds()
		m.mu.Unlock()
	}
	m.mu.Lock()
	g.LastEval, g.EvalTime = ts, time.Since(start).Seconds()
	m.mu.Unlock()
	return due
}

func (m *Manager) query(ctx context.Context, q string, ts time.Time) (promql.Vector, error) {
	qry, err := m.opts.Engine.NewInstantQuery(ctx, m.opts.Storage, nil, q, ts)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{promql.Sample{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	default:
		return nil, fmt.Errorf("rule result is a %s, want a vector or scalar", res.Value.Type())
	}
}

// record writes a recording rule's result into the storage, and a
// staleness marker for series it produced last time but not now.
func (m *Manager) record(r *Rule, vec promql.Vector, ts time.Time) {
	t := ts.UnixMilli()
	now := make(map[uint64]labels.Labels, len(vec))
	b := labels.NewBuilder(labels.EmptyLabels())
	for _, s := range vec {
		b.Reset(s.Metric)
		b.Set(model.MetricNameLabel, r.recordName)
		r.Labels.Range(func(l labels.Label) { b.Set(l.Name, l.Value) })
		lset := b.Labels()
		m.opts.Storage.Append(lset, t, s.F)
		now[lset.Hash()] = lset
	}
	m.staleMissing(r.prevSeries, now, t)
	r.prevSeries = now
}

func (m *Manager) staleMissing(prev, now map[uint64]labels.Labels, t int64) {
	for h, lset := range prev {
		if _, ok := now[h]; !ok {
			m.opts.Storage.Append(lset, t, math.Float64frombits(value.StaleNaN))
		}
	}
}

// alert updates an alerting rule's instances from its result at ts and
// returns the alerts due to be sent. Callers hold m.mu.
func (m *Manager) alert(ctx context.Context, r *Rule, vec promql.Vector, ts time.Time) []Alert {
	seen := map[uint64]bool{}
	for _, s := range vec {
		lset, ann := m.expand(ctx, r, s, ts)
		h := lset.Hash()
		seen[h] = true
		a, ok := r.active[h]
		if !ok || a.State == StateInactive {
			a = &Alert{Labels: lset, State: StatePending, ActiveAt: ts}
			r.active[h] = a
		}
		a.Annotations, a.Value, a.lastSeen = ann, strconvF(s.F), ts
		if a.State == StatePending && ts.Sub(a.ActiveAt) >= r.forD {
			a.State, a.FiredAt = StateFiring, ts
		}
	}
	for h, a := range r.active {
		if seen[h] {
			continue
		}
		switch {
		case a.State == StatePending:
			delete(r.active, h)
		case a.State == StateFiring && r.keep > 0 && ts.Sub(a.lastSeen) < r.keep:
			// keep_firing_for: still firing.
		case a.State == StateFiring:
			a.State, a.ResolvedAt = StateInactive, ts
		case a.State == StateInactive && ts.Sub(a.ResolvedAt) > resolvedRetention:
			delete(r.active, h)
		}
	}
	// ALERTS series, as Prometheus writes them.
	t := ts.UnixMilli()
	now := map[uint64]labels.Labels{}
	r.State = StateInactive
	var due []Alert
	for _, a := range r.active {
		switch a.State {
		case StateFiring:
			r.State = StateFiring
		case StatePending:
			if r.State != StateFiring {
				r.State = StatePending
			}
		}
		if a.State != StateInactive {
			b := labels.NewBuilder(a.Labels)
			b.Set(model.MetricNameLabel, "ALERTS")
			b.Set("alertstate", a.State)
			lset := b.Labels()
			m.opts.Storage.Append(lset, t, 1)
			now[lset.Hash()] = lset
		}
		if a.State == StatePending {
			continue
		}
		if a.State == StateInactive && !a.lastSent.Before(a.ResolvedAt) {
			continue // resolved and already sent as resolved
		}
		if a.State == StateFiring && !a.lastSent.IsZero() && ts.Sub(a.lastSent) < m.opts.ResendDelay {
			continue
		}
		a.lastSent = ts
		due = append(due, *a)
	}
	m.staleMissing(r.prevSeries, now, t)
	r.prevSeries = now
	return due
}

func strconvF(f float64) string { return model.SampleValue(f).String() }

// expand returns an alert's labels (the sample's without __name__, the
// rule's expanded, alertname) and expanded annotations. Callers hold m.mu:
// a template's query expands on-demand rules with the expander in effect
// without taking it again (Expand would wait for it forever).
func (m *Manager) expand(ctx context.Context, r *Rule, s promql.Sample, ts time.Time) (labels.Labels, labels.Labels) {
	data := template.AlertTemplateData(s.Metric.Map(), nil, m.opts.ExternalURL, s)
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	expander := m.expander
	query := func(ctx context.Context, q string, t time.Time) (promql.Vector, error) {
		q, err := expander.ExpandString(q)
		if err != nil {
			return nil, err
		}
		return m.query(ctx, q, t)
	}
	expand := func(text string) string {
		if !strings.Contains(text, "{{") {
			return text
		}
		e := template.NewTemplateExpander(ctx, defs+text, "__alert_"+r.Name, data,
			model.TimeFromUnixNano(ts.UnixNano()), query, m.ext, nil)
		out, err := e.Expand()
		if err != nil {
			m.opts.Logger.Warn("alert template", "rule", r.Name, "err", err)
			return fmt.Sprintf("<error expanding template: %s>", err)
		}
		return out
	}
	b := labels.NewBuilder(s.Metric)
	b.Del(model.MetricNameLabel)
	for k, v := range r.labelTmpl {
		b.Set(k, expand(v))
	}
	b.Set(labels.AlertName, r.Name)
	ann := labels.NewBuilder(labels.EmptyLabels())
	for k, v := range r.annotations {
		ann.Set(k, expand(v))
	}
	return b.Labels(), ann.Labels()
}

// Groups returns a copy of every group's state with its rules and alerts.
func (m *Manager) Groups() []Group {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Group, 0, len(m.groups))
	for _, g := range m.groups {
		c := *g
		c.Rules = make([]*Rule, len(g.Rules))
		for i, r := range g.Rules {
			rc := *r
			rc.Alerts = sortedAlerts(r.active, false)
			c.Rules[i] = &rc
		}
		out = append(out, c)
	}
	return out
}

// Alerts returns the pending and firing alerts, firing first, then by
// labels.
func (m *Manager) Alerts() []Alert {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Alert
	for _, g := range m.groups {
		for _, r := range g.Rules {
			out = append(out, sortedAlerts(r.active, false)...)
		}
	}
	sortAlerts(out)
	return out
}

// sortedAlerts copies the active (pending or firing) alerts of one rule;
// resolved ones only when withResolved.
func sortedAlerts(active map[uint64]*Alert, withResolved bool) []Alert {
	var out []Alert
	for _, a := range active {
		if a.State == StateInactive && !withResolved {
			continue
		}
		out = append(out, *a)
	}
	sortAlerts(out)
	return out
}

func sortAlerts(a []Alert) {
	sort.Slice(a, func(i, j int) bool {
		if (a[i].State == StateFiring) != (a[j].State == StateFiring) {
			return a[i].State == StateFiring
		}
		return labels.Compare(a[i].Labels, a[j].Labels) < 0
	})
}

// LoadFiles reads rule files in Prometheus' rulefmt YAML (strict: unknown
// fields are errors) and returns their groups, with every problem of every
// file at once.
func LoadFiles(paths []string) ([]rulefmt.RuleGroup, error) {
	p := parser.NewParser(parser.Options{})
	var groups []rulefmt.RuleGroup
	var errs []error
	for _, path := range paths {
		rgs, es := rulefmt.ParseFile(path, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		if len(es) > 0 {
			errs = append(errs, es...)
			continue
		}
		groups = append(groups, rgs.Groups...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("rule files (check them with promtool check rules): %w", errors.Join(errs...))
	}
	return groups, nil
}
