package promapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// fleet46 fills 20 minutes at 15s of 46 servers with kvwatch's labels and
// 3 series each: the 138 series of the attack.
func fleet46(t *testing.T) (*history.Store, time.Time) {
	t.Helper()
	st := history.New(history.Options{Retention: time.Hour})
	var end time.Time
	for i := 0; i <= 80; i++ {
		end = t0.Add(time.Duration(i) * 15 * time.Second)
		for s := range 46 {
			role, pool := "decode", "pool-decode"
			if s%3 == 0 {
				role, pool = "prefill", "pool-prefill"
			}
			id := []string{signal.LabelServer, fmt.Sprintf("10.0.%d.%d:30002", s/8, s%8), signal.LabelRole, role,
				signal.LabelPool, pool, signal.LabelCluster, "prod-eu-west", signal.LabelEngine, "sglang",
				signal.LabelModel, "meta-llama/Llama-3.1-70B-Instruct"}
			for _, m := range []signal.Metric{signal.KVUsedTokens, signal.KVCapacityTokens, signal.KVUsageRatio} {
				st.Append(labels.FromStrings(append([]string{model.MetricNameLabel, m.Name}, id...)...), end.UnixMilli(), float64(i*s))
			}
		}
	}
	return st, end
}

// nested wraps inner in n calls of f(…, tail).
func nested(f, inner, tail string, n int) string {
	return strings.Repeat(f+"(", n) + inner + strings.Repeat(", "+tail+")", n)
}

// Label functions that double a label at each nesting are refused before
// they run, with the bound's name, and while they are refused the process
// allocates little; plain uses of them answer.
func TestLabelFunctionBomb(t *testing.T) {
	st, end := fleet46(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	all := `{__name__=~"kvwatch_.+"}`
	for _, c := range []struct {
		name, query string
		code        int
		msg         string
	}{
		// The issue's: 138 series, the model doubled 20 times (1.7 GiB
		// at 18, a crash at 20).
		{"label_join x20", nested("label_join", all, `"model", "", "model", "model"`, 20), 422, "query.max-label-bytes"},
		// At 24 a label passed 16 MiB and the engine panicked.
		{"label_join x24", nested("label_join", all, `"model", "", "model", "model"`, 24), 422, "query.max-label-bytes"},
		{"label_join of 4 x10", nested("label_join", all, `"model", "", "model", "model", "model", "model"`, 10), 422, "query.max-label-bytes"},
		{"label_replace $1$1 x20", nested("label_replace", all, `"model", "$1$1", "model", "(.*)"`, 20), 422, "query.max-label-bytes"},
		// No series read at all: the separator alone grows.
		{"label_join of vector(1) x30", nested("label_join", "vector(1)", `"a", "--------", "a", "a"`, 30), 422, "query.max-label-bytes"},
		{"inside a subquery", `max_over_time(` + nested("label_join", all, `"model", "", "model", "model"`, 20) + `[5m:1m])`, 422, "query.max-label-bytes"},
		{"label_join", `label_join(kvwatch_kv_used_tokens, "id", "/", "kv_cluster", "server")`, 200, ""},
		{"label_replace of label_join", `label_replace(label_join(` + all + `, "id", "/", "kv_cluster", "server"), "host", "$1", "server", "(.*):.*")`, 200, ""},
		{"label_join of count_values", `label_join(count_values("v", kvwatch_kv_used_tokens), "w", "", "v", "v")`, 200, ""},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {c.query}})
		runtime.ReadMemStats(&after)
		if code != c.code || !strings.Contains(r.Error, c.msg) {
			t.Errorf("%s = %d %q, want %d %q", c.name, code, r.Error, c.code, c.msg)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; code == 422 && alloc > 64<<20 {
			t.Errorf("%s: refused after allocating %d MiB", c.name, alloc>>20)
		}
	}
	// The answer of a plain one is right.
	code, r := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {`label_join(kvwatch_kv_used_tokens{server="10.0.0.1:30002"}, "id", "/", "kv_cluster", "server")`}})
	if code != 200 || !strings.Contains(string(r.Data), `"id":"prod-eu-west/10.0.0.1:30002"`) {
		t.Errorf("label_join = %d %s", code, r.Data)
	}
}

// The bound's arithmetic on one series {__name__="m", a="xx"}: 12 bytes of
// labels, no value over 2 bytes. Each query answers at MaxLabelBytes equal
// to its bound and is refused one byte below it.
func TestLabelBytesBound(t *testing.T) {
	st := history.New(history.Options{Retention: time.Hour})
	for i := range 5 {
		st.Append(labels.FromStrings(model.MetricNameLabel, "m", "a", "xx"), t0.Add(time.Duration(i)*15*time.Second).UnixMilli(), float64(i))
	}
	end := t0.Add(time.Minute)
	for _, c := range []struct {
		query  string
		points int // 0: an instant query
		bound  int
	}{
		// a = 2 values of 2: 4 bytes; 12 + len("a") + 4.
		{`label_join(m, "a", "", "a", "a")`, 0, 17},
		// b = "<" + a + ">": 4 + 2; 12 + 1 + 6.
		{`label_replace(m, "b", "<$1>", "a", "(.*)")`, 0, 19},
		// 17, then a = 2 values of 4: 17 + 1 + 8 = 26; 17 + 26.
		{`label_join(label_join(m, "a", "", "a", "a"), "a", "", "a", "a")`, 0, 43},
		// A separator: 2 + 3 + 2; 12 + 1 + 7.
		{`label_join(m, "a", "---", "a", "a")`, 0, 20},
		// count_values: a series per value at each of 3 steps, v up to
		// 327 bytes: 12 + 1 + 327 = 340; label_join copies v: 340 + 1 +
		// 327 = 668, for 3 series.
		{`label_join(count_values("v", m), "w", "", "v")`, 3, 3 * 668},
		// group_left(a): 1 series of m times 1 of the other side, 12 +
		// 12 bytes; label_join adds 1 + 2.
		{`label_join(m * on() group_left(a) m, "b", "", "a")`, 0, 27},
	} {
		for _, limit := range []int{c.bound, c.bound - 1} {
			srv := server(t, Options{Queryable: st, MaxLabelBytes: limit, Now: func() time.Time { return end }})
			path, form := "/api/v1/query", url.Values{"query": {c.query}, "time": {unix(end)}}
			if c.points > 0 {
				path = "/api/v1/query_range"
				form = url.Values{"query": {c.query}, "start": {unix(end.Add(-time.Duration(c.points-1) * 15 * time.Second))}, "end": {unix(end)}, "step": {"15"}}
			}
			code, r := call(t, srv, http.MethodGet, path, form)
			want := 200
			if limit < c.bound {
				want = 422
			}
			if code != want {
				t.Errorf("%s with MaxLabelBytes %d = %d %q, want %d", c.query, limit, code, r.Error, want)
			}
		}
	}
}

func TestNesting(t *testing.T) {
	for _, c := range []struct {
		expr string
		want int
	}{
		{`a`, 1},
		{`a + b`, 2},
		{`a + b * c`, 3},
		{`(a + b) + c`, 4},
		{`-a`, 2},
		{`a{b!="c", d=~"e"}`, 1},
		{`sum by (x) (rate(a{b!="c"}[5m]))`, 5},
		{`max_over_time(a[5m:1m] offset 1m)`, 4},
		{strings.Repeat("(", 1600) + "a" + strings.Repeat(")", 1600), 1601},
		{`sum(rate(a[5m]`, 5}, // unclosed: the parser's to report
	} {
		if got := nesting(c.expr); got != c.want {
			t.Errorf("nesting(%s) = %d, want %d", c.expr, got, c.want)
		}
	}
}

// nesting bounds the depth of the parsed expression from above, and
// kvwatch's own rules and dashboards are within MaxNesting.
func TestNestingBoundsDepth(t *testing.T) {
	var exprs []string
	for _, g := range append(stack.RecordingRules(stack.Options{}).Groups, stack.AlertRules(stack.Options{}).Groups...) {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "5m", "$__range", "1h")
	for _, d := range stack.Dashboards(stack.Options{}) {
		for _, q := range d.Queries() {
			exprs = append(exprs, grafana.Replace(q.Expr))
		}
	}
	exprs = append(exprs, `a ^ b ^ c ^ d`, `a * b + c * d - e / f`, `-(-a)`, `(a or b) * on(x) group_left(y) c`,
		`sum without (x) (a) > bool 0`, `max_over_time(rate(a[5m])[1h:] @ 100)`, `label_join(a, "b", "-", "c", "d")`)
	p := parser.NewParser(parser.Options{})
	var depth func(parser.Node) int
	depth = func(n parser.Node) int {
		d := 0
		for c := range parser.ChildrenIter(n) {
			d = max(d, depth(c))
		}
		return d + 1
	}
	for _, e := range exprs {
		expr, err := p.ParseExpr(e)
		if err != nil {
			t.Errorf("%s: %v", e, err)
			continue
		}
		if d, n := depth(expr), nesting(e); n < d || n > MaxNesting {
			t.Errorf("nesting(%s) = %d; the parsed depth is %d, the limit %d", e, n, d, MaxNesting)
		}
	}
}

// format_query is bounded as queries are: the length and nesting limits,
// the query slots and the timeout.
func TestFormatQueryBounds(t *testing.T) {
	st, end := fixture(t)
	srv := server(t, Options{Queryable: st, Now: func() time.Time { return end }})
	for _, c := range []struct {
		name, query string
		code        int
		msg         string
	}{
		// The issue's: 1,600 nested parentheses took 17 s.
		{"1,600 parentheses", strings.Repeat("(", 1600) + "a" + strings.Repeat(")", 1600), 400, "nests 1601 levels deep, over the limit of 64"},
		{"64 levels", strings.Repeat("(", 63) + "a" + strings.Repeat(")", 63), 200, ""},
		{"65 levels", strings.Repeat("(", 64) + "a" + strings.Repeat(")", 64), 400, "nests 65 levels"},
		{"a chain of 100", "a" + strings.Repeat(" + a", 99), 400, "nests 100 levels"},
		{"17 KiB", "a" + strings.Repeat(" ", 17<<10), 400, "over the 16384-byte limit"},
		{"a rule", `sum by (pool) (kvwatch_kv_used_tokens) / sum by (pool) (kvwatch_kv_capacity_tokens)`, 200, ""},
	} {
		code, r := call(t, srv, http.MethodPost, "/api/v1/format_query", url.Values{"query": {c.query}})
		if code != c.code || !strings.Contains(r.Error, c.msg) {
			t.Errorf("format_query %s = %d %q, want %d %q", c.name, code, r.Error, c.code, c.msg)
		}
	}
	// Nesting bounds the queries too.
	deep := strings.Repeat("(", 100) + "kvwatch_kv_used_tokens" + strings.Repeat(")", 100)
	for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
		form := url.Values{"query": {deep}, "start": {unix(end.Add(-time.Minute))}, "end": {unix(end)}, "step": {"15"}}
		if code, r := call(t, srv, http.MethodGet, path, form); code != 400 || !strings.Contains(r.Error, "nests 101 levels") {
			t.Errorf("%s nested 101 levels = %d %q, want 400", path, code, r.Error)
		}
	}
}

// format_query takes a query slot: with the only slot taken it is refused
// (no queue) or waits and gives up at its timeout or when its client goes.
func TestFormatQuerySlots(t *testing.T) {
	st, end := fixture(t)
	g := &gate{Queryable: st, open: make(chan struct{}), entered: make(chan struct{}, 8)}
	held := make(chan int, 2)
	hold := func(srv *httptest.Server) {
		// A query that holds the only slot until the gate opens.
		go func() {
			code, _ := call(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"kvwatch_kv_used_tokens"}})
			held <- code
		}()
		<-g.entered
	}
	const format = "/api/v1/format_query"
	form := url.Values{"query": {"sum(kvwatch_kv_used_tokens)"}}

	noQueue := server(t, Options{Queryable: g, MaxConcurrency: 1, MaxQueued: -1, Now: func() time.Time { return end }})
	hold(noQueue)
	if code, r := call(t, noQueue, http.MethodGet, format, form); code != 503 || !strings.Contains(r.Error, "too many concurrent queries") {
		t.Errorf("format_query with the slot taken and no queue = %d %q, want 503", code, r.Error)
	}

	queue := server(t, Options{Queryable: g, MaxConcurrency: 1, MaxQueued: 1, Now: func() time.Time { return end }})
	hold(queue)
	timeout := url.Values{"query": form["query"], "timeout": {"0.2"}}
	if code, r := call(t, queue, http.MethodGet, format, timeout); code != 503 || !strings.Contains(r.Error, "no query slot freed") {
		t.Errorf("format_query waiting past its timeout = %d %q, want 503", code, r.Error)
	}
	// A client that leaves while it waits: the request ends, the queue
	// empties.
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, queue.URL+format+"?"+form.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := queue.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	a := sapi(t, queue)
	waitFor(t, "format_query to queue", func() bool { return a.queued.Load() == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Error("a canceled request got an answer")
	}
	waitFor(t, "the queue to empty", func() bool { return a.queued.Load() == 0 })

	close(g.open)
	for range 2 {
		if code := <-held; code != 200 {
			t.Errorf("the query holding the slot = %d, want 200", code)
		}
	}
	if code, r := call(t, queue, http.MethodGet, format, form); code != 200 || string(r.Data) != `"sum(kvwatch_kv_used_tokens)"` {
		t.Errorf("format_query with a free slot = %d %s %q", code, r.Data, r.Error)
	}
}

// waitFor polls cond until it holds; the deadline only keeps a broken
// test from hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}
