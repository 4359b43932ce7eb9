package querycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/expo"
)

// Store is where series live: a Prometheus-compatible API or scraped
// /metrics pages. Names are exact sample names (what a selector matches).
type Store interface {
	// Describe names the store in output.
	Describe() string
	// Metric reports whether any series named name exists, and the label
	// names those series carry.
	Metric(ctx context.Context, name string) (MetricInfo, error)
	// LabelValues lists the values label takes on name's series; complete
	// is false when the answer was cut at the store's bound.
	LabelValues(ctx context.Context, name, label string) (values []string, complete bool, err error)
	// Scraped is true for engine pages read directly: the labels a scraper
	// adds (job, instance and relabelling) are missing from them.
	Scraped() bool
}

// MetricInfo is what a store holds for one name.
type MetricInfo struct {
	Exists bool
	Labels []string
}

// ----- Prometheus HTTP API -----

// API reads a Prometheus-compatible HTTP API (Prometheus, kvwatch serve,
// VictoriaMetrics, Thanos, Mimir): /api/v1/label/__name__/values,
// /api/v1/labels and /api/v1/label/<name>/values, each bounded by a time
// window and a limit.
type API struct {
	// Base is the API's base URL (without /api/v1).
	Base *url.URL
	// Client carries auth and TLS.
	Client *http.Client
	// Window is how far back series count (default 1h).
	Window time.Duration
	// Limit bounds each list the API returns (default 10000); stores that
	// ignore the parameter return everything.
	Limit int
	// Now is the end of the window (default time.Now).
	Now func() time.Time

	once    sync.Once
	names   map[string]bool
	nameErr error
	mu      sync.Mutex
	labels  map[string][]string
	values  map[[2]string]valueList
}

type valueList struct {
	values   []string
	complete bool
}

// Describe implements Store.
func (a *API) Describe() string { return a.Base.Redacted() }

// Scraped implements Store.
func (a *API) Scraped() bool { return false }

func (a *API) window() (start, end string) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	w := a.Window
	if w <= 0 {
		w = time.Hour
	}
	// The end is a minute ahead: a series that appeared within the last
	// second, or on a store whose clock runs ahead, still counts.
	e := now().Add(time.Minute)
	return strconv.FormatInt(e.Add(-w-time.Minute).Unix(), 10), strconv.FormatInt(e.Unix(), 10)
}

func (a *API) limit() int {
	if a.Limit <= 0 {
		return 10000
	}
	return a.Limit
}

// get calls path with params plus the window and limit and decodes data.
func (a *API) get(ctx context.Context, path string, params url.Values, data any) error {
	start, end := a.window()
	params.Set("start", start)
	params.Set("end", end)
	params.Set("limit", strconv.Itoa(a.limit()))
	u := *a.Base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("query %s: %w", u.Redacted(), err)
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("query %s: %w; is --against the base URL of a Prometheus-compatible API?", a.Base.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("query %s: %w", a.Base.Redacted(), err)
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("query %s%s: %s: give credentials with --against.http-config (basic_auth, authorization, tls_config)", a.Base.Redacted(), path, resp.Status)
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status == "" {
		return fmt.Errorf("query %s%s: %s: not a Prometheus API answer; give the API's base URL (e.g. http://prometheus:9090), or an engine's /metrics URL", a.Base.Redacted(), path, resp.Status)
	}
	if env.Status != "success" {
		return fmt.Errorf("query %s%s: %s: %s", a.Base.Redacted(), path, resp.Status, Sanitize(env.Error))
	}
	return json.Unmarshal(env.Data, data)
}

// Metric implements Store: the metric-name list is read once, label names
// once per name.
func (a *API) Metric(ctx context.Context, name string) (MetricInfo, error) {
	a.once.Do(func() {
		var names []string
		a.nameErr = a.get(ctx, "/api/v1/label/__name__/values", url.Values{}, &names)
		a.names = map[string]bool{}
		for _, n := range names {
			a.names[n] = true
		}
	})
	if a.nameErr != nil {
		return MetricInfo{}, a.nameErr
	}
	if !a.names[name] {
		return MetricInfo{}, nil
	}
	a.mu.Lock()
	l, ok := a.labels[name]
	a.mu.Unlock()
	if !ok {
		var got []string
		if err := a.get(ctx, "/api/v1/labels", url.Values{"match[]": {matchName(name)}}, &got); err != nil {
			return MetricInfo{}, err
		}
		l = got
		a.mu.Lock()
		if a.labels == nil {
			a.labels = map[string][]string{}
		}
		a.labels[name] = l
		a.mu.Unlock()
	}
	return MetricInfo{Exists: true, Labels: l}, nil
}

// LabelValues implements Store; answers are cached per name and label.
func (a *API) LabelValues(ctx context.Context, name, label string) ([]string, bool, error) {
	key := [2]string{name, label}
	a.mu.Lock()
	v, ok := a.values[key]
	a.mu.Unlock()
	if ok {
		return v.values, v.complete, nil
	}
	var got []string
	if err := a.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", url.Values{"match[]": {matchName(name)}}, &got); err != nil {
		return nil, false, err
	}
	v = valueList{values: got, complete: len(got) < a.limit()}
	a.mu.Lock()
	if a.values == nil {
		a.values = map[[2]string]valueList{}
	}
	a.values[key] = v
	a.mu.Unlock()
	return v.values, v.complete, nil
}

// NameForms counts the metric names the store holds spelt prefix+x and
// with prefix's ':' as '_' (sglang:x, sglang_x), asking for those names
// only (a match[] on __name__), so the count is not cut by the bound on the
// whole name list.
func (a *API) NameForms(ctx context.Context, prefix string) (colon, underscore int, err error) {
	base := strings.TrimSuffix(prefix, ":")
	var names []string
	m := `{__name__=~"` + regexp.QuoteMeta(base) + `[:_].+"}`
	if err := a.get(ctx, "/api/v1/label/__name__/values", url.Values{"match[]": {m}}, &names); err != nil {
		return 0, 0, err
	}
	for _, n := range names {
		// A store that ignores match[] answers every name: count only these.
		switch {
		case strings.HasPrefix(n, base+":"):
			colon++
		case strings.HasPrefix(n, base+"_"):
			underscore++
		}
	}
	return colon, underscore, nil
}

// BuildVersion is the version /api/v1/status/buildinfo reports; "" when
// the store does not answer there (it only names the store in output).
func (a *API) BuildVersion(ctx context.Context) string {
	var info struct {
		Version string `json:"version"`
	}
	if err := a.get(ctx, "/api/v1/status/buildinfo", url.Values{}, &info); err != nil {
		return ""
	}
	return info.Version
}

// Evaluates reports whether an instant query for name returns anything:
// for recorded series a store computes on demand instead of storing
// them (kvwatch serve's label-preserving rules).
func (a *API) Evaluates(ctx context.Context, name string) (bool, error) {
	var res struct {
		Result []json.RawMessage `json:"result"`
	}
	u := *a.Base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/query"
	u.RawQuery = url.Values{"query": {"count(" + matchName(name) + ")"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	c := a.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, fmt.Errorf("query %s: %w", a.Base.Redacted(), err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env); err != nil || env.Status != "success" {
		return false, nil // not an answer: report the series as missing
	}
	if err := json.Unmarshal(env.Data, &res); err != nil {
		return false, nil
	}
	return len(res.Result) > 0, nil
}

// matchName is a selector for exactly the name, valid for any name.
func matchName(name string) string { return `{__name__=` + strconv.Quote(name) + `}` }

// ----- scraped pages -----

// Pages is the series of engine /metrics pages read once.
type Pages struct {
	// URLs names the pages (redacted) for output.
	URLs []string
	// series maps an exposed sample name to its label sets.
	series map[string][]labels.Labels
}

// AddPage adds every sample of a parsed page, under the names exactly as
// exposed.
func (p *Pages) AddPage(url string, page *expo.Page) {
	if p.series == nil {
		p.series = map[string][]labels.Labels{}
	}
	p.URLs = append(p.URLs, url)
	for _, n := range page.Names() {
		for _, s := range page.Samples(n) {
			exposed := s.Labels.Get(model.MetricNameLabel)
			p.series[exposed] = append(p.series[exposed], s.Labels)
		}
	}
}

// Describe implements Store.
func (p *Pages) Describe() string { return strings.Join(p.URLs, ", ") }

// Scraped implements Store.
func (p *Pages) Scraped() bool { return true }

// Metric implements Store.
func (p *Pages) Metric(_ context.Context, name string) (MetricInfo, error) {
	ss := p.series[name]
	if len(ss) == 0 {
		return MetricInfo{}, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range ss {
		l.Range(func(x labels.Label) {
			if !seen[x.Name] {
				seen[x.Name] = true
				out = append(out, x.Name)
			}
		})
	}
	slices.Sort(out)
	return MetricInfo{Exists: true, Labels: out}, nil
}

// LabelValues implements Store.
func (p *Pages) LabelValues(_ context.Context, name, label string) ([]string, bool, error) {
	seen := map[string]bool{}
	var out []string
	for _, l := range p.series[name] {
		if v := l.Get(label); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, true, nil
}
