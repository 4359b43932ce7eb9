package forecast

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/safetext"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Errors of Read, for the caller to tell apart with errors.Is.
var (
	// ErrTimeout: the store did not answer in time (the context's deadline,
	// or the store's own query timeout).
	ErrTimeout = errors.New("the store did not answer in time")
	// ErrUnreachable: no answer at all (connection refused, DNS, TLS).
	ErrUnreachable = errors.New("the store cannot be reached")
	// ErrAuth: the store refused the credentials (401, 403).
	ErrAuth = errors.New("the store refused the credentials")
	// ErrNotAPI: the URL answers, but not as a Prometheus API.
	ErrNotAPI = errors.New("not a Prometheus-compatible API")
	// ErrQuery: the store answered the query with an error.
	ErrQuery = errors.New("the store refused the query")
	// ErrNoSeries: the store holds none of the series in the window.
	ErrNoSeries = errors.New("no kvwatch series in the window")
)

// Defaults of `kvwatch plan`'s flags.
const (
	DefaultWindow  = 14 * day
	DefaultPeriod  = day
	DefaultHorizon = 90 * day
	DefaultTimeout = 2 * time.Minute
)

// maxAnswer bounds an answer's body: a few series per pool and period.
const maxAnswer = 64 << 20

// Source answers PromQL over kvwatch's series: a Store (a
// Prometheus-compatible HTTP API) or a Local (serve's own history). Errors
// wrap this package's (ErrTimeout, ErrQuery, ...).
type Source interface {
	// Describe names the source in output, without secrets.
	Describe() string
	// QueryRange evaluates q at every step from start to end.
	QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error)
	// Query evaluates q at one instant.
	Query(ctx context.Context, q string, at time.Time) (model.Vector, error)
}

// Store reads kvwatch's series from a Prometheus-compatible HTTP API:
// /api/v1/query_range and /api/v1/query.
type Store struct {
	// Base is the API's base URL (without /api/v1).
	Base *url.URL
	// Client carries auth and TLS; nil is http.DefaultClient.
	Client *http.Client
}

// Request is what Read reads.
type Request struct {
	// At is the end of the window.
	At time.Time
	// Window is how far back; Window / Period periods are read.
	Window, Period time.Duration
	// Resolution is the length of the windows each server's values are
	// averaged over, and the step of the pool's sums within a period;
	// Period is a multiple of it. At the warning's hold
	// (alerts.kv_usage_warning_for), a peak is the highest load the pool
	// held for as long as the warning needs to fire: a shorter burst does
	// not count.
	Resolution time.Duration
}

// Periods is the number of periods in the window.
func (r Request) Periods() int { return int(r.Window / r.Period) }

// Describe names the store in output, its password masked.
func (s *Store) Describe() string { return safetext.URL(s.Base) }

// series names a per-period query's answer.
type series int

const (
	sLoad series = iota
	sUsed
	sDemand
	sRunning
	sCapacity
	sServers
	sSamplesMax
	sSamplesMin
	nSeries
)

// serverGap is the share of the pool's fullest server's samples under
// which a server had a gap in a period.
const serverGap = 0.95

// Queries are the range queries Read asks, one per value of a Period,
// each evaluated once per period at its end. Every name and label comes
// from package signal. The peaks are subqueries (the pool's sum at each
// step of the period, then its highest); the rest are range functions
// over each server's raw samples, which cost a store little.
func (r Request) Queries() [nSeries]string {
	labels := strings.Join(signal.PoolLabels(), ", ")
	by := func(agg string) string { return agg + " by (" + labels + ") " }
	period := "[" + model.Duration(r.Period).String() + "]"
	sub := "[" + model.Duration(r.Period).String() + ":" + model.Duration(r.Resolution).String() + "]"
	avg := func(m signal.Metric) string {
		return "avg_over_time(" + m.Name + "[" + model.Duration(r.Resolution).String() + "])"
	}
	peak := func(expr string) string { return "max_over_time((" + by("sum") + "(" + expr + "))" + sub + ")" }
	u, d, c := avg(signal.KVUsedTokens), avg(signal.KVDemandTokens), signal.KVCapacityTokens.Name
	var q [nSeries]string
	// Load: used plus demand of each server at one instant, used alone
	// where a server reports no demand (+ binds before or).
	q[sLoad] = peak(u + " + " + d + " or " + u)
	q[sUsed] = peak(u)
	q[sDemand] = peak(d)
	q[sRunning] = peak(avg(signal.RequestsRunning))
	// Every server seen in the period counts, at its largest: a restart
	// or an outage does not change the capacity, a server added or
	// removed does.
	q[sCapacity] = by("sum") + "(max_over_time(" + c + period + "))"
	q[sServers] = by("count") + "(max_over_time(" + c + period + "))"
	q[sSamplesMax] = by("max") + "(count_over_time(" + signal.KVUsedTokens.Name + period + "))"
	q[sSamplesMin] = by("min") + "(count_over_time(" + signal.KVUsedTokens.Name + period + "))"
	return q
}

// ServersQuery is the instant query, at At, of each server's capacity in
// the last period.
func (r Request) ServersQuery() string {
	return "max_over_time(" + signal.KVCapacityTokens.Name + "[" + model.Duration(r.Period).String() + "])"
}

// Read reads every pool's periods and its servers' capacities from s. The
// queries run at once (the load's after them, where needed); the first
// error ends Read.
func Read(ctx context.Context, s Source, r Request) ([]History, error) {
	n := r.Periods()
	start := r.At.Add(-time.Duration(n-1) * r.Period)
	qs := r.Queries()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		results  [nSeries]model.Matrix
		servers  model.Vector
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, q := range qs {
		if series(i) == sLoad {
			continue // below, where some server reports demand
		}
		wg.Go(func() {
			m, err := s.QueryRange(ctx, q, start, r.At, r.Period)
			if err != nil {
				fail(err)
				cancel()
				return
			}
			results[i] = m
		})
	}
	wg.Go(func() {
		v, err := s.Query(ctx, r.ServersQuery(), r.At)
		if err != nil {
			fail(err)
			cancel()
			return
		}
		servers = v
	})
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	// The load is the used tokens where no server reports demand (most
	// engines): the load query, which reads the used tokens twice, runs
	// only where some does.
	if len(results[sDemand]) > 0 {
		m, err := s.QueryRange(ctx, qs[sLoad], start, r.At, r.Period)
		if err != nil {
			return nil, err
		}
		results[sLoad] = m
	} else {
		results[sLoad] = results[sUsed]
	}
	pools := map[kv.PoolKey]*History{}
	pool := func(m model.Metric) *History {
		k := keyOf(m)
		h := pools[k]
		if h == nil {
			h = &History{Key: k, Periods: make([]Period, n)}
			for i := range h.Periods {
				h.Periods[i].End = start.Add(time.Duration(i) * r.Period)
			}
			pools[k] = h
		}
		return h
	}
	for si, m := range results {
		for _, ss := range m {
			if !keyOf(ss.Metric).Role.HoldsKV() {
				continue // a router's running requests: no KV pool
			}
			h := pool(ss.Metric)
			for _, sp := range ss.Values {
				i := int(math.Round(float64(sp.Timestamp.Time().Sub(start)) / float64(r.Period)))
				v := float64(sp.Value)
				if i < 0 || i >= n || math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				pe := &h.Periods[i]
				switch series(si) {
				case sLoad:
					pe.PeakLoad = ptr(v)
				case sUsed:
					pe.PeakUsed = ptr(v)
				case sDemand:
					pe.PeakDemand = ptr(v)
				case sRunning:
					pe.PeakRunning = ptr(v)
				case sCapacity:
					pe.CapacityTokens = ptr(v)
				case sServers:
					pe.Servers = ptr(v)
				case sSamplesMax:
					pe.Samples = ptr(v)
				case sSamplesMin:
					pe.SamplesMin = ptr(v)
				}
			}
		}
	}
	for _, h := range pools {
		coverage(h.Periods)
	}
	for _, smp := range servers {
		if v := float64(smp.Value); v > 0 && !math.IsInf(v, 0) && keyOf(smp.Metric).Role.HoldsKV() {
			h := pool(smp.Metric)
			h.Servers = append(h.Servers, v)
		}
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("%s holds no %s or %s series from %s to %s: %w",
			s.Describe(), signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name,
			r.At.Add(-r.Window).UTC().Format(time.RFC3339), r.At.UTC().Format(time.RFC3339), ErrNoSeries)
	}
	out := make([]History, 0, len(pools))
	for _, h := range pools {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b History) int { return comparePools(a.Key, b.Key) })
	return out, nil
}

// coverage sets each period's Coverage, its samples over the median of
// the periods with samples (a whole period has as many as most), and
// ServerGaps.
func coverage(ps []Period) {
	var counts []float64
	for _, pe := range ps {
		if pe.Samples != nil {
			counts = append(counts, *pe.Samples)
		}
	}
	if len(counts) == 0 {
		return
	}
	slices.Sort(counts)
	whole := median(counts)
	for i := range ps {
		if pe := &ps[i]; pe.Samples != nil {
			pe.Coverage = min(*pe.Samples/whole, 1)
			pe.ServerGaps = pe.SamplesMin != nil && *pe.SamplesMin < serverGap**pe.Samples
		}
	}
}

// comparePools orders pools by cluster and pool, then role: a cluster's
// prefill pool next to its decode pool.
func comparePools(a, b kv.PoolKey) int {
	rank := func(r kv.Role) int {
		switch r {
		case kv.RolePrefill:
			return 0
		case kv.RoleDecode:
			return 1
		}
		return 2
	}
	return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Pool, b.Pool),
		rank(a.Role)-rank(b.Role), strings.Compare(string(a.Role), string(b.Role)))
}

// keyOf is the pool of a series, by the labels of signal.PoolLabels.
func keyOf(m model.Metric) kv.PoolKey {
	return kv.PoolKey{
		Role:    kv.Role(m[model.LabelName(signal.LabelRole)]),
		Cluster: string(m[model.LabelName(signal.LabelCluster)]),
		Pool:    string(m[model.LabelName(signal.LabelPool)]),
	}
}

// QueryRange evaluates q from start to end at each step.
func (s *Store) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	form := url.Values{
		"query": {q},
		"start": {unix(start)},
		"end":   {unix(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
		// VictoriaMetrics moves start and end onto multiples of step for
		// its cache past 50 points; nocache keeps the periods asked for.
		"nocache": {"1"},
	}
	var m model.Matrix
	if err := s.call(ctx, "/api/v1/query_range", form, model.ValMatrix, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// Query evaluates q at one instant.
func (s *Store) Query(ctx context.Context, q string, at time.Time) (model.Vector, error) {
	var v model.Vector
	if err := s.call(ctx, "/api/v1/query", url.Values{"query": {q}, "time": {unix(at)}}, model.ValVector, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// call posts form to path and decodes the answer's result of type want
// into result.
func (s *Store) call(ctx context.Context, path string, form url.Values, want model.ValueType, result any) error {
	if dl, ok := ctx.Deadline(); ok {
		// The store stops evaluating when the plan stops waiting.
		// In milliseconds: Prometheus 2 reads no fractional seconds.
		form.Set("timeout", strconv.FormatInt(max(time.Until(dl).Milliseconds(), 1), 10)+"ms")
	}
	u := *s.Base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	base := s.Describe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("query %s: %w", base, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("query %s: %w", base, ErrTimeout)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("query %s: %w: %w", base, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("query %s: %w", base, ErrTimeout)
		}
		return fmt.Errorf("query %s: %w: %w", base, ErrUnreachable, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("query %s%s: %s: %w; give credentials with --against.http-config (basic_auth, authorization, tls_config)", base, path, resp.Status, ErrAuth)
	}
	var env struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType model.ValueType `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status == "" {
		return fmt.Errorf("query %s%s: %s: %w; give the API's base URL, e.g. http://prometheus:9090 or http://victoria-metrics:8428", base, path, resp.Status, ErrNotAPI)
	}
	if env.Status != "success" {
		if env.ErrorType == "timeout" {
			return fmt.Errorf("query %s: %s: %w", base, oneLine(env.Error), ErrTimeout)
		}
		return fmt.Errorf("query %s%s: %s: %s: %w", base, path, resp.Status, oneLine(env.Error), ErrQuery)
	}
	if env.Data.ResultType != want {
		return fmt.Errorf("query %s%s: a %s result, want a %s: %w", base, path, env.Data.ResultType, want, ErrNotAPI)
	}
	if err := json.Unmarshal(env.Data.Result, result); err != nil {
		return fmt.Errorf("query %s%s: %w: %w", base, path, ErrNotAPI, err)
	}
	return nil
}

// oneLine keeps the first line of a store's error, at most 300 bytes,
// made safe to print.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return safetext.Line(s)
}

// HoldResolution is the default Resolution of a period: the longest whole
// number of minutes (at least one) up to hold (the warning's,
// alerts.kv_usage_warning_for) that divides period; the hold itself
// where it divides the period, as the default (10m) does.
func HoldResolution(period, hold time.Duration) time.Duration {
	m := max(hold.Truncate(time.Minute), time.Minute)
	for period%m != 0 && m > time.Minute {
		m -= time.Minute
	}
	return m
}
