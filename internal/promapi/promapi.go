// Package promapi serves the subset of Prometheus' HTTP API that Grafana's
// Prometheus data source and kvwatch's web UI use, over serve's in-memory
// history: query, query_range, series, labels, label values, metadata
// (from package signal), format_query, rules, alerts and buildinfo, in GET and POST form, with Prometheus' JSON
// envelope and error types.
//
// Queries may name on-demand recording rules (label-preserving rules that
// the alerting manager does not store, see package alerting): query and
// query_range expand them into their expressions before the engine runs,
// and label/__name__/values lists their names; series does not list their
// series, since none are stored.
//
// It does not serve remote read/write, targets, TSDB status, flags or admin
// endpoints, and holds no exemplars (query_exemplars is always empty);
// Prometheus itself does that.
package promapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/kvwatch/kvwatch/internal/alerting"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Rules is where /api/v1/rules and /api/v1/alerts read from, and what
// expands on-demand recording rules in queries; *alerting.Manager
// satisfies it.
type Rules interface {
	Groups() []alerting.Group
	Alerts() []alerting.Alert
	// Expand returns the query with on-demand rule names replaced by their
	// expressions; the error is the query's parse error.
	Expand(query string) (string, error)
	// OnDemandNames lists the on-demand rules' names.
	OnDemandNames() []string
	// OnDemandInputs returns the selectors whose series an on-demand
	// rule's series need (nil: name is not one).
	OnDemandInputs(name string) [][]*labels.Matcher
}

// Options configure an API.
type Options struct {
	// Queryable is the history.
	Queryable storage.Queryable
	// Engine runs queries. Default: a new engine with a 5m lookback,
	// Timeout and MaxSamples.
	Engine *promql.Engine
	// Timeout bounds one query (DefaultTimeout when 0); a request's own
	// timeout parameter can only shorten it.
	Timeout time.Duration
	// MaxSamples bounds the samples one query holds in memory at once
	// (DefaultMaxSamples when 0), as Prometheus' --query.max-samples.
	MaxSamples int
	// MaxConcurrency bounds the queries that run at once
	// (DefaultMaxConcurrency when 0); up to MaxQueued more wait for a
	// slot (as long as their timeout allows; DefaultMaxQueued when 0, none
	// when negative), and beyond that a query is answered 503 at once.
	MaxConcurrency int
	MaxQueued      int
	// MaxQueryLength bounds a query expression, in bytes
	// (DefaultMaxQueryLength when 0); a longer one is refused with 400.
	// An expression nested deeper than MaxNesting is refused too.
	MaxQueryLength int
	// MaxLabelBytes bounds the bytes of the label sets that one query's
	// label_join and label_replace calls may build, as bounded from the
	// series they read before the query runs (DefaultMaxLabelBytes when
	// 0); over it the query is refused with 422.
	MaxLabelBytes int
	// Rules, when set, answers /api/v1/rules and /api/v1/alerts and
	// expands on-demand recording rules in queries; without it they answer
	// with no groups and no alerts, and queries run as written.
	Rules Rules
	// Version, Revision, Branch, BuildDate are reported by status/buildinfo.
	Version, Revision, Branch, BuildDate string
	// Logger receives internal errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock for queries without a time (default time.Now).
	Now func() time.Time
}

// defaultSubqueryStep is the step of a subquery that names none
// (`x[1h:]`): Prometheus' default evaluation interval.
const defaultSubqueryStep = time.Minute

// Defaults of the query bounds, sized for one box running serve beside
// inference servers (Prometheus: 50,000,000 samples, 2m, 20 at once, no
// length limit). The largest query kvwatch's dashboards send over 24h of
// 1,000 endpoints holds well under a million samples.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxSamples     = 5_000_000
	DefaultMaxConcurrency = 4
	DefaultMaxQueued      = 16
	DefaultMaxQueryLength = 16 << 10
)

// API is the HTTP handler set.
type API struct {
	opts   Options
	parser parser.Parser
	// slots holds one token per running query; queued counts the queries
	// waiting for one.
	slots  chan struct{}
	queued atomic.Int64
}

// New returns the API.
func New(opts Options) *API {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxSamples <= 0 {
		opts.MaxSamples = DefaultMaxSamples
	}
	if opts.MaxConcurrency <= 0 {
		opts.MaxConcurrency = DefaultMaxConcurrency
	}
	if opts.MaxQueued < 0 {
		opts.MaxQueued = 0
	} else if opts.MaxQueued == 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	if opts.MaxQueryLength <= 0 {
		opts.MaxQueryLength = DefaultMaxQueryLength
	}
	if opts.MaxLabelBytes <= 0 {
		opts.MaxLabelBytes = DefaultMaxLabelBytes
	}
	if opts.Engine == nil {
		opts.Engine = promql.NewEngine(promql.EngineOpts{MaxSamples: opts.MaxSamples, Timeout: opts.Timeout,
			LookbackDelta: 5 * time.Minute, Logger: opts.Logger,
			NoStepSubqueryIntervalFn: func(int64) int64 { return defaultSubqueryStep.Milliseconds() }})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &API{opts: opts, parser: parser.NewParser(parser.Options{}), slots: make(chan struct{}, opts.MaxConcurrency)}
}

// errBusy is the error of a query refused because MaxConcurrency queries
// run and MaxQueued wait.
var errBusy = errors.New("too many concurrent queries")

// acquire waits for a query slot; release gives it back.
func (a *API) acquire(ctx context.Context) *apiError {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	if a.queued.Add(1) > int64(a.opts.MaxQueued) {
		a.queued.Add(-1)
		return &apiError{errUnavailable, fmt.Errorf("%w: %d running and %d waiting (query.max-concurrency); try again shortly", errBusy, a.opts.MaxConcurrency, a.opts.MaxQueued)}
	}
	defer a.queued.Add(-1)
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return &apiError{errUnavailable, fmt.Errorf("%w: no query slot freed within the query's timeout (query.max-concurrency %d)", errBusy, a.opts.MaxConcurrency)}
	}
}

func (a *API) release() { <-a.slots }

// Handler is what routes are registered on; *http.ServeMux and serve's
// Daemon (behind its TLS and auth) satisfy it.
type Handler interface {
	Handle(pattern string, h http.Handler)
}

// Register adds every endpoint under /api/v1/ to mux.
func (a *API) Register(mux Handler) {
	routes := map[string]func(*http.Request) (any, *apiError){
		"/api/v1/query":               a.query,
		"/api/v1/query_range":         a.queryRange,
		"/api/v1/series":              a.series,
		"/api/v1/labels":              a.labelNames,
		"/api/v1/label/{name}/values": a.labelValues,
		"/api/v1/metadata":            a.metadata,
		"/api/v1/query_exemplars":     a.exemplars,
		"/api/v1/rules":               a.rules,
		"/api/v1/alerts":              a.alerts,
		"/api/v1/status/buildinfo":    a.buildinfo,
		"/api/v1/format_query":        a.formatQuery,
	}
	for p, f := range routes {
		mux.Handle(p, a.wrap(f))
	}
}

// Error types of the Prometheus API.
const (
	errBadData   = "bad_data"
	errExec      = "execution"
	errTimeout   = "timeout"
	errCanceled  = "canceled"
	errInternal  = "internal"
	errNotAllowd = "method_not_allowed"
	// errUnavailable is kvwatch's own: the query was not run (503).
	errUnavailable = "unavailable"
)

type apiError struct {
	typ string
	err error
}

type envelope struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

func (a *API) wrap(f func(*http.Request) (any, *apiError)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, envelope{Status: "error", ErrorType: errNotAllowd,
				Error: "use GET or POST"})
			return
		}
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, envelope{Status: "error", ErrorType: errBadData,
				Error: fmt.Sprintf("parse form: %v", err)})
			return
		}
		data, aerr := f(r)
		if aerr != nil {
			code := map[string]int{errBadData: 400, errExec: 422, errTimeout: 503, errCanceled: 503,
				errInternal: 500, errUnavailable: 503}[aerr.typ]
			if code == 0 {
				code = 500
			}
			if aerr.typ == errInternal {
				a.opts.Logger.Error("api", "path", r.URL.Path, "err", aerr.err)
			}
			if errors.Is(aerr.err, errBusy) {
				// Refused for want of a slot, not for the query: a client
				// (the web UI does) may send it again after a second.
				w.Header().Set("Retry-After", "1")
			}
			writeJSON(w, code, envelope{Status: "error", ErrorType: aerr.typ, Error: aerr.err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, envelope{Status: "success", Data: data})
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = 500
		b = []byte(`{"status":"error","errorType":"internal","error":"marshal response"}`)
	}
	w.WriteHeader(code)
	w.Write(b)
}

func badData(format string, args ...any) *apiError {
	return &apiError{typ: errBadData, err: fmt.Errorf(format, args...)}
}

// parseTime reads a Unix time in (fractional) seconds or RFC 3339.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(t)
		frac = math.Round(frac*1000) / 1000
		return time.Unix(int64(sec), int64(frac*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp (want Unix seconds or RFC 3339)", s)
}

// parseDuration reads seconds (float) or a Prometheus duration (5m).
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration: it overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q to a valid duration (want seconds or e.g. 5m)", s)
	}
	return time.Duration(d), nil
}

func (a *API) timeParam(r *http.Request, name string, def time.Time) (time.Time, *apiError) {
	v := r.Form.Get(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, badData("invalid parameter %q: %v", name, err)
	}
	return t, nil
}

// queryData is the data of query and query_range.
type queryData struct {
	ResultType parser.ValueType `json:"resultType"`
	Result     parser.Value     `json:"result"`
}

// runQuery runs q, the query of expr with points evaluation steps, in a
// query slot.
func (a *API) runQuery(ctx context.Context, q promql.Query, expr parser.Expr, points int64) (any, *apiError) {
	defer q.Close()
	if aerr := a.acquire(ctx); aerr != nil {
		return nil, aerr
	}
	defer a.release()
	if aerr := a.checkLabelBytes(ctx, expr, points); aerr != nil {
		return nil, aerr
	}
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, queryError(res.Err)
	}
	// Marshal before Close: Close hands the result's points back to the
	// engine's pool, where a concurrent query reuses them.
	b, err := json.Marshal(queryData{ResultType: res.Value.Type(), Result: res.Value})
	if err != nil {
		return nil, &apiError{errInternal, err}
	}
	return json.RawMessage(b), nil
}

func queryError(err error) *apiError {
	var (
		eqc promql.ErrQueryCanceled
		eqt promql.ErrQueryTimeout
		es  promql.ErrStorage
	)
	switch {
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &apiError{errCanceled, err}
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &apiError{errTimeout, err}
	case errors.As(err, &es):
		return &apiError{errInternal, err}
	}
	return &apiError{errExec, err}
}

// ctx is the context of one query: the request's, bounded by Timeout or
// the request's shorter timeout parameter (queueing included).
func (a *API) ctx(r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	d := a.opts.Timeout
	if to := r.Form.Get("timeout"); to != "" {
		td, err := parseDuration(to)
		if err != nil {
			return nil, nil, badData("invalid parameter \"timeout\": %v", err)
		}
		d = min(d, td)
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

func (a *API) query(r *http.Request) (any, *apiError) {
	ts, aerr := a.timeParam(r, "time", a.opts.Now())
	if aerr != nil {
		return nil, aerr
	}
	ctx, cancel, aerr := a.ctx(r)
	if aerr != nil {
		return nil, aerr
	}
	defer cancel()
	qs, aerr := a.expand(r)
	if aerr != nil {
		return nil, aerr
	}
	expr, aerr := a.checkSteps(qs, 1)
	if aerr != nil {
		return nil, aerr
	}
	q, err := a.opts.Engine.NewInstantQuery(ctx, a.opts.Queryable, nil, qs, ts)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return a.runQuery(ctx, q, expr, 1)
}

// queryParam returns the request's query, refused when it is longer than
// MaxQueryLength or nests deeper than MaxNesting.
func (a *API) queryParam(r *http.Request) (string, *apiError) {
	q := r.Form.Get("query")
	if len(q) > a.opts.MaxQueryLength {
		return "", badData("invalid parameter \"query\": the expression is %d bytes, over the %d-byte limit (query.max-length)", len(q), a.opts.MaxQueryLength)
	}
	if aerr := checkNesting(q); aerr != nil {
		return "", aerr
	}
	return q, nil
}

// expand returns the request's query with on-demand recording rules
// expanded. The engine then parses the expansion's text again: it has no
// entry point that takes a parsed expression.
func (a *API) expand(r *http.Request) (string, *apiError) {
	q, aerr := a.queryParam(r)
	if aerr != nil {
		return "", aerr
	}
	if a.opts.Rules == nil {
		return q, nil
	}
	qs, err := a.opts.Rules.Expand(q)
	if err != nil {
		return "", badData("invalid parameter \"query\": %v", err)
	}
	return qs, nil
}

// maxPoints is Prometheus' limit of points per series of a range query;
// kvwatch applies it to each subquery as well.
const maxPoints = 11000

// maxEvalSteps bounds the evaluation steps of one query: the points of a
// range query times the steps of every subquery nested in one another. A
// dashboard's 24h at 15s with a [5m:30s] subquery takes 57,600.
const maxEvalSteps = 2_000_000

// checkSteps parses qs and refuses it when its subqueries take more steps
// than maxPoints each, or maxEvalSteps nested and times points (the engine
// allocates per step: `[24h:1ms]` is 86 million steps). The expression is
// nil when qs does not parse: the engine reports that.
func (a *API) checkSteps(qs string, points int64) (parser.Expr, *apiError) {
	expr, err := a.parser.ParseExpr(qs)
	if err != nil {
		return nil, nil
	}
	var bad *apiError
	var walk func(n parser.Node, outer int64)
	walk = func(n parser.Node, outer int64) {
		if bad != nil || n == nil {
			return
		}
		if sq, ok := n.(*parser.SubqueryExpr); ok {
			steps := int64(subquerySteps(sq))
			switch {
			case steps > maxPoints:
				bad = badData("invalid parameter \"query\": subquery %s takes %d steps, over the %d per subquery; use a larger step", sq.String(), steps, maxPoints)
				return
			case outer*steps > maxEvalSteps:
				bad = badData("invalid parameter \"query\": the query takes over %d evaluation steps (points times nested subquery steps); use larger steps or a shorter range", maxEvalSteps)
				return
			}
			outer *= steps
		}
		for _, c := range parser.Children(n) {
			walk(c, outer)
		}
	}
	walk(expr, max(points, 1))
	return expr, bad
}

// subquerySteps is the evaluation steps of one run of sq's expression.
func subquerySteps(sq *parser.SubqueryExpr) float64 {
	step := sq.Step
	if step <= 0 {
		step = defaultSubqueryStep
	}
	return max(float64(sq.Range/step), 1)
}

func (a *API) queryRange(r *http.Request) (any, *apiError) {
	for _, p := range []string{"start", "end", "step"} {
		if r.Form.Get(p) == "" {
			return nil, badData("missing parameter %q", p)
		}
	}
	start, aerr := a.timeParam(r, "start", time.Time{})
	if aerr != nil {
		return nil, aerr
	}
	end, aerr := a.timeParam(r, "end", time.Time{})
	if aerr != nil {
		return nil, aerr
	}
	if end.Before(start) {
		return nil, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	step, err := parseDuration(r.Form.Get("step"))
	if err != nil {
		return nil, badData("invalid parameter \"step\": %v", err)
	}
	if step <= 0 {
		return nil, badData("zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	if end.Sub(start)/step > maxPoints {
		return nil, badData("exceeded maximum resolution of %d points per timeseries. Try decreasing the query resolution (?step=XX)", maxPoints)
	}
	ctx, cancel, aerr := a.ctx(r)
	if aerr != nil {
		return nil, aerr
	}
	defer cancel()
	qs, aerr := a.expand(r)
	if aerr != nil {
		return nil, aerr
	}
	points := int64(end.Sub(start)/step) + 1
	expr, aerr := a.checkSteps(qs, points)
	if aerr != nil {
		return nil, aerr
	}
	q, err := a.opts.Engine.NewRangeQuery(ctx, a.opts.Queryable, nil, qs, start, end, step)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	return a.runQuery(ctx, q, expr, points)
}

// window returns start and end of series and label queries: the whole
// history by default.
func (a *API) window(r *http.Request) (int64, int64, *apiError) {
	start, aerr := a.timeParam(r, "start", time.Unix(0, 0))
	if aerr != nil {
		return 0, 0, aerr
	}
	end, aerr := a.timeParam(r, "end", a.opts.Now().Add(time.Hour))
	if aerr != nil {
		return 0, 0, aerr
	}
	return start.UnixMilli(), end.UnixMilli(), nil
}

func (a *API) matchers(r *http.Request, required bool) ([][]*labels.Matcher, *apiError) {
	ms := r.Form["match[]"]
	if len(ms) == 0 {
		if required {
			return nil, badData("no match[] parameter provided")
		}
		return nil, nil
	}
	sets, err := a.parser.ParseMetricSelectors(ms)
	if err != nil {
		return nil, badData("invalid parameter \"match[]\": %v", err)
	}
	return sets, nil
}

func limitParam(r *http.Request) (int, *apiError) {
	s := r.Form.Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, badData("invalid parameter \"limit\": want a non-negative integer")
	}
	return n, nil
}

// metaQuery is what the series and label endpoints share: their match[]
// sets, time window, limit and a querier over that window.
type metaQuery struct {
	sets       [][]*labels.Matcher
	mint, maxt int64
	limit      int
	q          storage.Querier
}

// openMeta reads the shared parameters and opens a querier; the caller
// closes m.q.
func (a *API) openMeta(r *http.Request, matchersRequired bool) (*metaQuery, *apiError) {
	m := &metaQuery{}
	var aerr *apiError
	if m.sets, aerr = a.matchers(r, matchersRequired); aerr != nil {
		return nil, aerr
	}
	if m.mint, m.maxt, aerr = a.window(r); aerr != nil {
		return nil, aerr
	}
	if m.limit, aerr = limitParam(r); aerr != nil {
		return nil, aerr
	}
	q, err := a.opts.Queryable.Querier(m.mint, m.maxt)
	if err != nil {
		return nil, &apiError{errInternal, err}
	}
	m.q = q
	return m, nil
}

func (a *API) series(r *http.Request) (any, *apiError) {
	m, aerr := a.openMeta(r, true)
	if aerr != nil {
		return nil, aerr
	}
	defer m.q.Close()
	sets, q, mint, maxt, limit := m.sets, m.q, m.mint, m.maxt, m.limit
	seen := map[uint64]bool{}
	out := []labels.Labels{}
	add := func(l labels.Labels) {
		if h := l.Hash(); !seen[h] {
			seen[h] = true
			out = append(out, l)
		}
	}
	for _, ms := range sets {
		ss := q.Select(r.Context(), true, &storage.SelectHints{Start: mint, End: maxt, Func: "series"}, ms...)
		for ss.Next() {
			add(ss.At().Labels())
		}
		if err := ss.Err(); err != nil {
			return nil, &apiError{errInternal, err}
		}
		od, err := a.onDemandSeries(r.Context(), m, ms)
		if err != nil {
			return nil, &apiError{errInternal, err}
		}
		for _, l := range od {
			add(l)
		}
	}
	slices.SortFunc(out, labels.Compare)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// labelQuery runs f over each match[] set (or once without matchers) and
// returns the sorted union with what the on-demand rules add: with match[],
// pick over the on-demand series each set selects; without, all().
func (a *API) labelQuery(r *http.Request, f func(storage.Querier, []*labels.Matcher) ([]string, error),
	pick func(labels.Labels) []string, all func() []string) (any, *apiError) {
	m, aerr := a.openMeta(r, false)
	if aerr != nil {
		return nil, aerr
	}
	defer m.q.Close()
	sets, q, limit := m.sets, m.q, m.limit
	set := map[string]bool{}
	add := func(vals []string) {
		for _, v := range vals {
			set[v] = true
		}
	}
	if len(sets) == 0 {
		vals, err := f(q, nil)
		if err != nil {
			return nil, &apiError{errInternal, err}
		}
		add(vals)
		add(all())
	}
	for _, ms := range sets {
		vals, err := f(q, ms)
		if err != nil {
			return nil, &apiError{errInternal, err}
		}
		add(vals)
		od, err := a.onDemandSeries(r.Context(), m, ms)
		if err != nil {
			return nil, &apiError{errInternal, err}
		}
		for _, l := range od {
			add(pick(l))
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (a *API) labelNames(r *http.Request) (any, *apiError) {
	return a.labelQuery(r, func(q storage.Querier, ms []*labels.Matcher) ([]string, error) {
		v, _, err := q.LabelNames(r.Context(), nil, ms...)
		return v, err
	}, func(l labels.Labels) []string {
		var names []string
		l.Range(func(x labels.Label) { names = append(names, x.Name) })
		return names
	}, func() []string { return nil }) // the inputs' stored series have the same names
}

func (a *API) labelValues(r *http.Request) (any, *apiError) {
	name := r.PathValue("name")
	if !model.UTF8Validation.IsValidLabelName(name) { // as Prometheus' API validates
		return nil, badData("invalid label name: %q", name)
	}
	return a.labelQuery(r, func(q storage.Querier, ms []*labels.Matcher) ([]string, error) {
		v, _, err := q.LabelValues(r.Context(), name, nil, ms...)
		return v, err
	}, func(l labels.Labels) []string {
		if v := l.Get(name); v != "" {
			return []string{v}
		}
		return nil
	}, func() []string {
		if name != model.MetricNameLabel || a.opts.Rules == nil {
			return nil // other labels' values: the inputs' stored series have them
		}
		return a.opts.Rules.OnDemandNames()
	})
}

// onDemandSeries returns the series of the on-demand recording rules that
// ms selects in m's window, as if they were stored: for each rule whose
// name ms's __name__ matchers accept (every rule when it has none), each
// label set that every input of the rule has a series with (matched by
// ms's other matchers: the rule keeps its inputs' labels), under the
// rule's name. A rule that filters by value (`deriv(...) > 0`) is listed
// where its inputs are, even if no evaluation in the window kept it.
func (a *API) onDemandSeries(ctx context.Context, m *metaQuery, ms []*labels.Matcher) ([]labels.Labels, error) {
	if a.opts.Rules == nil {
		return nil, nil
	}
	var byName, others []*labels.Matcher
	for _, x := range ms {
		if x.Name == model.MetricNameLabel {
			byName = append(byName, x)
		} else {
			others = append(others, x)
		}
	}
	var out []labels.Labels
	for _, name := range a.opts.Rules.OnDemandNames() {
		if !slices.ContainsFunc(byName, func(x *labels.Matcher) bool { return !x.Matches(name) }) {
			common, err := a.commonInputs(ctx, m, a.opts.Rules.OnDemandInputs(name), others)
			if err != nil {
				return nil, err
			}
			for _, l := range common {
				out = append(out, labels.NewBuilder(l).Set(model.MetricNameLabel, name).Labels())
			}
		}
	}
	return out, nil
}

// commonInputs returns the label sets, names dropped, that each of the
// selectors (with extra added) has a series with in m's window.
func (*API) commonInputs(ctx context.Context, m *metaQuery, inputs [][]*labels.Matcher, extra []*labels.Matcher) ([]labels.Labels, error) {
	var common map[string]labels.Labels
	for _, in := range inputs {
		found := map[string]labels.Labels{}
		ss := m.q.Select(ctx, false, &storage.SelectHints{Start: m.mint, End: m.maxt, Func: "series"}, append(slices.Clone(in), extra...)...)
		for ss.Next() {
			l := ss.At().Labels().DropReserved(func(n string) bool { return n == model.MetricNameLabel })
			k := l.String()
			if _, ok := common[k]; common == nil || ok {
				found[k] = l
			}
		}
		if err := ss.Err(); err != nil {
			return nil, err
		}
		common = found
		if len(common) == 0 {
			return nil, nil
		}
	}
	out := make([]labels.Labels, 0, len(common))
	for _, l := range common {
		out = append(out, l)
	}
	return out, nil
}

// metadataEntry is one family's metadata in /api/v1/metadata.
type metadataEntry struct {
	Type string `json:"type"`
	Help string `json:"help"`
	Unit string `json:"unit"`
}

// metadata answers from package signal, the source of every kvwatch_* name.
func (a *API) metadata(r *http.Request) (any, *apiError) {
	out := map[string][]metadataEntry{}
	want := r.Form.Get("metric")
	for _, m := range signal.All() {
		if want != "" && m.Name != want {
			continue
		}
		out[m.Name] = []metadataEntry{{Type: string(m.Type), Help: m.Help, Unit: m.Unit}}
	}
	return out, nil
}

func (a *API) exemplars(*http.Request) (any, *apiError) { return []any{}, nil }

func (a *API) rules(r *http.Request) (any, *apiError) {
	typ := r.Form.Get("type")
	if typ != "" && typ != "alert" && typ != "record" {
		return nil, badData("invalid parameter \"type\": want alert or record")
	}
	groups := []alerting.Group{}
	if a.opts.Rules != nil {
		for _, g := range a.opts.Rules.Groups() {
			rules := g.Rules[:0:0]
			for _, rule := range g.Rules {
				if typ == "" || (typ == "alert") == (rule.Type == "alerting") {
					rules = append(rules, rule)
				}
			}
			if typ != "" && len(rules) == 0 {
				continue
			}
			g.Rules = rules
			groups = append(groups, g)
		}
	}
	return map[string]any{"groups": groups}, nil
}

func (a *API) alerts(*http.Request) (any, *apiError) {
	alerts := []alerting.Alert{}
	if a.opts.Rules != nil {
		alerts = append(alerts, a.opts.Rules.Alerts()...)
	}
	return map[string]any{"alerts": alerts}, nil
}

func (a *API) buildinfo(*http.Request) (any, *apiError) {
	return map[string]string{
		"version":   a.opts.Version,
		"revision":  a.opts.Revision,
		"branch":    a.opts.Branch,
		"buildUser": "",
		"buildDate": a.opts.BuildDate,
		"goVersion": runtime.Version(),
	}, nil
}

// formatQuery is bounded as queries are: length, nesting, a query slot,
// the timeout. Neither parsing nor formatting can be stopped once begun;
// the nesting bound keeps each short, and a request whose client has gone
// or whose time is up is not begun.
func (a *API) formatQuery(r *http.Request) (any, *apiError) {
	ctx, cancel, aerr := a.ctx(r)
	if aerr != nil {
		return nil, aerr
	}
	defer cancel()
	qs, aerr := a.queryParam(r)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := a.acquire(ctx); aerr != nil {
		return nil, aerr
	}
	defer a.release()
	if err := ctx.Err(); err != nil {
		return nil, queryError(err)
	}
	expr, err := a.parser.ParseExpr(qs)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, queryError(err)
	}
	return expr.Pretty(0), nil
}
