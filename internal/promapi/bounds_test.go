package promapi

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/kvwatch/kvwatch/internal/history"
)

// gate is a Queryable whose Select blocks until the gate opens (or the
// query's context ends), counting the queries inside.
type gate struct {
	storage.Queryable
	open    chan struct{}
	mu      sync.Mutex
	inside  int
	entered chan struct{}
}

func (g *gate) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := g.Queryable.Querier(mint, maxt)
	return &gateQuerier{Querier: q, g: g}, err
}

type gateQuerier struct {
	storage.Querier
	g *gate
}

func (q *gateQuerier) Select(ctx context.Context, sorted bool, h *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	q.g.mu.Lock()
	q.g.inside++
	q.g.mu.Unlock()
	q.g.entered <- struct{}{}
	select {
	case <-q.g.open:
	case <-ctx.Done():
		return storage.ErrSeriesSet(ctx.Err())
	}
	return q.Querier.Select(ctx, sorted, h, ms...)
}

// One query runs, one waits, the third is refused with 503 at once; when
// the gate opens both admitted queries answer.
func TestQueryConcurrencyQueueThen503(t *testing.T) {
	st, end := fixture(t)
	g := &gate{Queryable: st, open: make(chan struct{}), entered: make(chan struct{}, 8)}
	srv := server(t, Options{Queryable: g, MaxConcurrency: 1, MaxQueued: 1, Now: func() time.Time { return end }})
	form := url.Values{"query": {"kvwatch_kv_used_tokens"}}
	type answer struct {
		code int
		r    response
	}
	answers := make(chan answer, 2)
	go func() { c, r := call(t, srv, http.MethodGet, "/api/v1/query", form); answers <- answer{c, r} }()
	<-g.entered // the first runs
	go func() { c, r := call(t, srv, http.MethodGet, "/api/v1/query", form); answers <- answer{c, r} }()
	// The second is queued: wait until it is counted.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if n := sapi(t, srv).queued.Load(); n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", form)
	if code != 503 || r.ErrorType != "unavailable" || !strings.Contains(r.Error, "too many concurrent queries") || !strings.Contains(r.Error, "query.max-concurrency") {
		t.Errorf("third query = %d %s %q, want 503 unavailable, too many concurrent queries", code, r.ErrorType, r.Error)
	}
	// The refusal tells a client when to try again (the web UI does).
	resp, err := srv.Client().Get(srv.URL + "/api/v1/query?" + form.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a refused query = %d, Retry-After %q; want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(g.open)
	for range 2 {
		if a := <-answers; a.code != 200 {
			t.Errorf("an admitted query = %d %q, want 200", a.code, a.r.Error)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inside != 2 {
		t.Errorf("%d queries reached the storage, want 2", g.inside)
	}
}

// apis remembers the API behind each test server, for sapi.
var apis sync.Map

func sapi(t *testing.T, srv interface{ Close() }) *API {
	v, ok := apis.Load(srv)
	if !ok {
		t.Fatal("no API recorded for the server")
	}
	return v.(*API)
}

func TestQueryTimeoutDefaultAndCap(t *testing.T) {
	st, end := fixture(t)
	g := &gate{Queryable: st, open: make(chan struct{}), entered: make(chan struct{}, 8)}
	defer close(g.open)
	srv := server(t, Options{Queryable: g, Timeout: 200 * time.Millisecond, Now: func() time.Time { return end }})
	start := time.Now()
	// A longer timeout parameter does not lift the bound.
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"kvwatch_kv_used_tokens"}, "timeout": {"1h"}})
	took := time.Since(start)
	if code != 503 || r.ErrorType != "timeout" && r.ErrorType != "canceled" {
		t.Errorf("a hung query = %d %s %q, want 503 timeout", code, r.ErrorType, r.Error)
	}
	if took > 5*time.Second {
		t.Errorf("a hung query took %s with a 200ms timeout", took)
	}
	if a := New(Options{}); a.opts.Timeout != 30*time.Second || a.opts.MaxSamples != 5_000_000 || a.opts.MaxConcurrency != 4 || a.opts.MaxQueryLength != 16384 || a.opts.MaxLabelBytes != 256<<20 {
		t.Errorf("defaults = %+v", a.opts)
	}
}

func TestQueryMaxSamples(t *testing.T) {
	st, end := fixture(t)
	// 15 series x 241 samples in the window: a 20m range over them holds
	// 15*241 = 3,615 samples at once, over a limit of 1,000.
	srv := server(t, Options{Queryable: st, MaxSamples: 1000, Now: func() time.Time { return end }})
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {`{__name__=~".+"}[20m]`}})
	if code != 422 || !strings.Contains(r.Error, "too many samples") {
		t.Errorf("over max samples = %d %q, want 422 too many samples", code, r.Error)
	}
	code, r = call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {`count_over_time(kvwatch_kv_used_tokens{server="d1"}[20m])`}})
	if code != 200 {
		t.Errorf("a query under the limit (241 samples) = %d %q", code, r.Error)
	}
}

func TestSubquerySteps(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	for _, c := range []struct {
		q    string
		code int
		msg  string
	}{
		{`max_over_time(kvwatch_kv_used_tokens[20m:1s])`, 200, ""},                 // 1,200 steps
		{`max_over_time(kvwatch_kv_used_tokens[4h:1s])`, 400, "takes 14400 steps"}, // over 11,000
		{`max_over_time(max_over_time(kvwatch_kv_used_tokens[1h:1s])[3h:1s])`, 400, "evaluation steps"},
		// Without a step, the default 1m (the engine dereferenced a nil
		// function for it).
		{`max_over_time(kvwatch_kv_used_tokens{server="d1"}[5m:])`, 200, ""},
		{`max_over_time(kvwatch_kv_used_tokens[2w:])`, 400, "takes 20160 steps"},
	} {
		code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {c.q}})
		if code != c.code || !strings.Contains(r.Error, c.msg) {
			t.Errorf("%s = %d %q, want %d %q", c.q, code, r.Error, c.code, c.msg)
		}
	}
	// A range query's points count too: 1,201 points x 2,000 steps.
	form := url.Values{"query": {`max_over_time(kvwatch_kv_used_tokens[2000s:1s])`}, "start": {unix(end.Add(-20 * time.Minute))}, "end": {unix(end)}, "step": {"1"}}
	if code, r := call(t, srv, http.MethodGet, "/api/v1/query_range", form); code != 400 || !strings.Contains(r.Error, "evaluation steps") {
		t.Errorf("range query x subquery = %d %q, want 400", code, r.Error)
	}
}

func TestQueryMaxLength(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, MaxQueryLength: 100, Now: func() time.Time { return end }})
	long := "a" + strings.Repeat(" + a", 25) // 101 bytes
	for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
		form := url.Values{"query": {long}, "start": {unix(end.Add(-time.Minute))}, "end": {unix(end)}, "step": {"15"}}
		code, r := call(t, srv, http.MethodPost, path, form)
		if code != 400 || !strings.Contains(r.Error, "101 bytes, over the 100-byte limit") {
			t.Errorf("%s with a 101-byte query = %d %q, want 400", path, code, r.Error)
		}
	}
	if code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {long[:97] + "   "}}); code != 200 {
		t.Errorf("a 100-byte query = %d %q, want 200", code, r.Error)
	}
}

// The hostile query ends within the timeout or the sample bound,
// and the heap stays bounded while it runs.
func TestHostileQueryBounded(t *testing.T) {
	st := history.New(history.Options{Retention: 24 * time.Hour, FullResolution: 24 * time.Hour})
	end := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 2000 {
		ts := end.Add(-time.Duration(2000-i) * 5 * time.Second).UnixMilli()
		for s := range 20 {
			st.Append(labels.FromStrings(model.MetricNameLabel, "kvwatch_kv_used_tokens", "server", string(rune('a'+s))), ts, float64(i*s))
		}
	}
	srv := server(t, Options{Queryable: st, Timeout: 3 * time.Second, Now: func() time.Time { return end }})
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	}()
	start := time.Now()
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {`max_over_time(count_values("v", {__name__=~".+"})[24h:1ms])`}})
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if code != 400 || !strings.Contains(r.Error, "over the 11000 per subquery") {
		t.Errorf("the hostile query = %d %q; want it refused for its subquery steps", code, r.Error)
	}
	if took > 10*time.Second {
		t.Errorf("the hostile query ran %s, want it stopped by the 3s timeout", took)
	}
	if peak > 1<<30 {
		t.Errorf("heap in use peaked at %d MiB while the hostile query ran", peak>>20)
	}
	t.Logf("hostile query: %d %s %q after %s, heap peak %d MiB", code, r.ErrorType, r.Error, took.Round(time.Millisecond), peak>>20)
}
