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
	// Engine runs the queries. Default: a new engine with a 5m lookback.
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
	opts     Options
	mu       sync.RWMutex
	groups   []*Group
	ext      *url.URL
	expander *Expander
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
	if opts.Engine == nil {
		opts.Engine = promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute,
			LookbackDelta: 5 * time.Minute, Logger: opts.Logger})
	}
	m := &Manager{opts: opts}
	if opts.ExternalURL != "" {
		u, err := url.Parse(opts.ExternalURL)
		if err != nil {
			return nil, fmt.Errorf("alerting: external URL: %w", err)
		}
		m.ext = u
	}
	p := parser.NewParser(parser.Options{})
	var errs []error
	var recs []RecordingRule
	for _, g := range opts.Groups {
		grp := &Group{Name: g.Name, File: "", interval: time.Duration(g.Interval)}
		if grp.interval <= 0 {
			grp.interval = opts.Interval
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
		m.groups = append(m.groups, grp)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if !opts.StoreAllRules {
		m.expander = NewExpander(recs)
	}
	for _, g := range m.groups {
		for _, r := range g.Rules {
			if r.Type == "recording" && m.expander.OnDemand(r.Name) {
				r.OnDemand, r.Health = true, "ok"
				continue
			}
			q, err := m.expander.ExpandString(r.Query)
			if err != nil {
				return nil, fmt.Errorf("group %q, rule %q: expand on-demand rules: %w", g.Name, r.Name, err)
			}
			r.evalQuery = q
		}
	}
	return m, nil
}

// Expand returns q with the names of on-demand recording rules replaced by
// their expressions (see Expander.Expand), ready for the promql engine; q
// itself when it names none. The error is q's parse error.
func (m *Manager) Expand(q string) (string, error) { return m.expander.ExpandString(q) }

// OnDemandNames returns the names of the on-demand recording rules, sorted:
// they have no stored series, but queries that name them get results.
func (m *Manager) OnDemandNames() []string { return m.expander.Names() }

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
	var rounds sync.WaitGroup
	for _, gs := range byInterval(m.groups) {
		rounds.Add(1)
		go func() {
			defer rounds.Done()
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
		}()
	}
	rounds.Wait() // every round returns once ctx ends
	close(out)
	<-sent
	return nil
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
	for _, g := range m.groups {
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
// rule's expanded, alertname) and expanded annotations.
func (m *Manager) expand(ctx context.Context, r *Rule, s promql.Sample, ts time.Time) (labels.Labels, labels.Labels) {
	data := template.AlertTemplateData(s.Metric.Map(), nil, m.opts.ExternalURL, s)
	defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	query := func(ctx context.Context, q string, t time.Time) (promql.Vector, error) {
		q, err := m.Expand(q)
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
