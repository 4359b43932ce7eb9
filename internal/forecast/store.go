package forecast

import (
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
	DefaultWindow     = 14 * day
	DefaultPeriod     = day
	DefaultHorizon    = 90 * day
	DefaultResolution = 5 * time.Minute
	DefaultTimeout    = 2 * time.Minute
)

// maxAnswer bounds an answer's body: a few series per pool and period.
const maxAnswer = 64 << 20

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
	// Resolution is the step at which the pool sums are evaluated within
	// each period; Period is a multiple of it.
	Resolution time.Duration
	// Hold is the window each server's values are averaged over before a
	// peak is taken (alerts.kv_usage_warning_for): a burst shorter than
	// it does not count.
	Hold time.Duration
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
	sCapMax
	sCapMin
	sServers
	sCoverage
	nSeries
)

// Queries are the range queries Read asks, one per value of a Period,
// each evaluated once per period at its end. Every name and label comes
// from package signal.
func (r Request) Queries() [nSeries]string {
	by := "sum by (" + strings.Join(signal.PoolLabels(), ", ") + ") "
	cnt := "count by (" + strings.Join(signal.PoolLabels(), ", ") + ") "
	sub := "[" + model.Duration(r.Period).String() + ":" + model.Duration(r.Resolution).String() + "]"
	avg := func(m signal.Metric) string {
		return "avg_over_time(" + m.Name + "[" + model.Duration(r.Hold).String() + "])"
	}
	u, d, c := avg(signal.KVUsedTokens), avg(signal.KVDemandTokens), signal.KVCapacityTokens.Name
	var q [nSeries]string
	// Load: used plus demand of each server at one instant, used alone
	// where a server reports no demand (+ binds before or).
	q[sLoad] = "max_over_time((" + by + "(" + u + " + " + d + " or " + u + "))" + sub + ")"
	q[sUsed] = "max_over_time((" + by + "(" + u + "))" + sub + ")"
	q[sDemand] = "max_over_time((" + by + "(" + d + "))" + sub + ")"
	q[sRunning] = "max_over_time((" + by + "(" + avg(signal.RequestsRunning) + "))" + sub + ")"
	q[sCapMax] = "max_over_time((" + by + "(" + c + "))" + sub + ")"
	q[sCapMin] = "min_over_time((" + by + "(" + c + "))" + sub + ")"
	q[sServers] = "max_over_time((" + cnt + "(" + c + "))" + sub + ")"
	q[sCoverage] = "count_over_time((" + by + "(" + signal.KVUsedTokens.Name + "))" + sub + ")"
	return q
}

// ServersQuery is the instant query, at At, of each server's capacity in
// the last period.
func (r Request) ServersQuery() string {
	return "max_over_time(" + signal.KVCapacityTokens.Name + "[" + model.Duration(r.Period).String() + "])"
}

// Read reads every pool's periods and its servers' capacities. The
// queries run at once; the first error ends Read.
func (s *Store) Read(ctx context.Context, r Request) ([]History, error) {
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
		wg.Go(func() {
			m, err := s.rangeQuery(ctx, q, start, r.At, r.Period)
			if err != nil {
				fail(err)
				cancel()
				return
			}
			results[i] = m
		})
	}
	wg.Go(func() {
		v, err := s.instantQuery(ctx, r.ServersQuery(), r.At)
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
	steps := float64(r.Period / r.Resolution)
	for si, m := range results {
		for _, ss := range m {
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
				case sCapMax:
					pe.CapacityMax = ptr(v)
				case sCapMin:
					pe.CapacityMin = ptr(v)
				case sServers:
					pe.Servers = ptr(v)
				case sCoverage:
					pe.Coverage = min(v/steps, 1)
				}
			}
		}
	}
	for _, smp := range servers {
		if v := float64(smp.Value); v > 0 && !math.IsInf(v, 0) {
			h := pool(smp.Metric)
			h.Servers = append(h.Servers, v)
		}
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("%s holds no %s or %s series from %s to %s: %w; does kvwatch serve write to it (--remote-write.url), or does its Prometheus scrape serve (kvwatch stack generate)?",
			s.Describe(), signal.KVUsedTokens.Name, signal.KVCapacityTokens.Name,
			r.At.Add(-r.Window).UTC().Format(time.RFC3339), r.At.UTC().Format(time.RFC3339), ErrNoSeries)
	}
	out := make([]History, 0, len(pools))
	for _, h := range pools {
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b History) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	return out, nil
}

// keyOf is the pool of a series, by the labels of signal.PoolLabels.
func keyOf(m model.Metric) kv.PoolKey {
	return kv.PoolKey{
		Role:    kv.Role(m[model.LabelName(signal.LabelRole)]),
		Cluster: string(m[model.LabelName(signal.LabelCluster)]),
		Pool:    string(m[model.LabelName(signal.LabelPool)]),
	}
}

func (s *Store) rangeQuery(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
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

func (s *Store) instantQuery(ctx context.Context, q string, at time.Time) (model.Vector, error) {
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
		form.Set("timeout", strconv.FormatFloat(max(time.Until(dl).Seconds(), 0.001), 'f', 3, 64)+"s")
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
