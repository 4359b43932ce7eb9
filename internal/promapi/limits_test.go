package promapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/stack"
)

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
