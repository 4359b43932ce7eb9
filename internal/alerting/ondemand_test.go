package alerting

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// testExpander classifies a rule set that has every kind of rule: the
// kvwatch-server rules' shapes (on demand), an aggregation over them
// (stored), and rules that must stay stored for each reason.
func testExpander(t testing.TB) *Expander {
	t.Helper()
	p := parser.NewParser(parser.Options{})
	rule := func(name, expr string, interval time.Duration, lbls ...string) RecordingRule {
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Fatalf("parse %s: %v", expr, err)
		}
		return RecordingRule{Name: name, Expr: e, Labels: labels.FromStrings(lbls...), Interval: interval}
	}
	s15, s30 := 15*time.Second, 30*time.Second
	return NewExpander([]RecordingRule{
		rule("server:hit:rate5m", "rate(hit_total[5m])", s15),
		rule("server:query:rate5m", "rate(query_total[5m])", s15),
		// References a rule defined after it.
		rule("server:hit:ratio", "server:hit:rate5m / (server:query:rate5m > 0)", s15),
		rule("server:full:deriv15m", "(1 - usage) / (deriv(usage[15m]) > 0)", s30),
		rule("server:neg", "-server:hit:rate5m", s15),
		rule("server:high", "usage > bool 0.5", s15),
		rule("server:p90", "quantile_over_time(0.9, usage[5m]) * 100", s15),
		// The stack's counter rates: no rate over a window with a reset.
		rule("server:steady:rate5m", "rate(hit_total[5m]) unless resets(hit_total[5m]) > 0", s15),
		// Stored: aggregation, labels added, name recorded twice, cycles,
		// depends on a stored rule, label functions, matching modifiers,
		// set operators, subqueries, no selector.
		rule("pool:hit:rate5m", "sum by (pool) (server:hit:rate5m)", s15),
		rule("labelled:rate5m", "rate(hit_total[5m])", s15, "level", "server"),
		rule("twice", "usage", s15),
		rule("twice", "usage * 2", s15),
		rule("cycle:a", "cycle:b + 1", s15),
		rule("cycle:b", "cycle:a * 2", s15),
		rule("self", "rate(self[5m])", s15),
		rule("on:stored", "pool:hit:rate5m * 2", s15),
		rule("relabelled", `label_replace(usage, "a", "b", "", "")`, s15),
		rule("matched", "usage / on (server) capacity", s15),
		rule("grouped", "usage / ignoring (dp) group_left capacity", s15),
		rule("setop", "usage and capacity", s15),
		rule("union", "usage or capacity", s15),
		rule("unless:on", "usage unless on (server) capacity", s15),
		rule("unless:ignoring", "usage unless ignoring (dp) capacity", s15),
		rule("subquery", "max_over_time(usage[5m:1m])", s15),
		rule("constant", "vector(1)", s15),
		rule("clock", "time() - usage", s15),
	})
}

func TestExpanderClassifies(t *testing.T) {
	e := testExpander(t)
	want := []string{"server:full:deriv15m", "server:high", "server:hit:rate5m", "server:hit:ratio",
		"server:neg", "server:p90", "server:query:rate5m", "server:steady:rate5m"}
	if diff := cmp.Diff(want, e.Names()); diff != "" {
		t.Errorf("on-demand rules (-want +got):\n%s", diff)
	}
	for _, n := range []string{"pool:hit:rate5m", "labelled:rate5m", "twice", "cycle:a", "cycle:b", "self",
		"on:stored", "relabelled", "matched", "grouped", "setop", "union", "unless:on", "unless:ignoring", "subquery", "constant", "clock"} {
		if e.OnDemand(n) {
			t.Errorf("OnDemand(%s) = true, want false (stored)", n)
		}
	}
}

func TestExpand(t *testing.T) {
	e := testExpander(t)
	const (
		hitName = `"__name__", "server:hit:rate5m", "", ""`
		qName   = `"__name__", "server:query:rate5m", "", ""`
	)
	tests := []struct{ in, want string }{
		{`server:hit:rate5m`,
			`label_replace(rate(hit_total[5m]), ` + hitName + `)`},
		{`{__name__="server:hit:rate5m"}`,
			`label_replace(rate(hit_total[5m]), ` + hitName + `)`},
		// Matchers are added to every selector inside.
		{`server:hit:rate5m{server="s1", role=~"d.*"}`,
			`label_replace(rate(hit_total{role=~"d.*",server="s1"}[5m]), ` + hitName + `)`},
		// Offset and @ go to every selector.
		{`server:full:deriv15m{server="s1"} offset 5m`,
			`label_replace((1 - usage{server="s1"} offset 5m) / (deriv(usage{server="s1"}[15m] offset 5m) > 0), "__name__", "server:full:deriv15m", "", "")`},
		{`server:full:deriv15m @ 1800`,
			`label_replace((1 - usage @ 1800.000) / (deriv(usage[15m] @ 1800.000) > 0), "__name__", "server:full:deriv15m", "", "")`},
		// Nested rules expand recursively, matchers reaching the bottom.
		{`server:hit:ratio{pool="p1"}`,
			`label_replace(label_replace(rate(hit_total{pool="p1"}[5m]), ` + hitName + `) / (label_replace(rate(query_total{pool="p1"}[5m]), ` + qName + `) > 0), "__name__", "server:hit:ratio", "", "")`},
		// A range selector becomes a subquery at the group's interval,
		// with the offset on the subquery.
		{`max_over_time(server:hit:rate5m{server="s1"}[1h] offset 10m)`,
			`max_over_time(label_replace(rate(hit_total{server="s1"}[5m]), ` + hitName + `)[1h:15s] offset 10m)`},
		{`avg_over_time(server:full:deriv15m[30m])`,
			`avg_over_time(label_replace((1 - usage) / (deriv(usage[15m]) > 0), "__name__", "server:full:deriv15m", "", "")[30m:30s])`},
		// Inside aggregations, functions, binary operators and subqueries.
		{`sum by (pool) (server:hit:rate5m) / 2`,
			`sum by (pool) (label_replace(rate(hit_total[5m]), ` + hitName + `)) / 2`},
		{`topk(3, server:p90)`,
			`topk(3, label_replace(quantile_over_time(0.9, usage[5m]) * 100, "__name__", "server:p90", "", ""))`},
		{`max_over_time(server:neg[10m:1m])`,
			`max_over_time(label_replace(-label_replace(rate(hit_total[5m]), ` + hitName + `), "__name__", "server:neg", "", "")[10m:1m])`},
		// unless: the matchers reach both sides, which match on every
		// label.
		{`server:steady:rate5m{server="s1"}`,
			`label_replace(rate(hit_total{server="s1"}[5m]) unless resets(hit_total{server="s1"}[5m]) > 0, "__name__", "server:steady:rate5m", "", "")`},
		{`server:high == 1 and on (server) up`,
			`label_replace(usage > bool 0.5, "__name__", "server:high", "", "") == 1 and on (server) up`},
		// Not expanded: stored rules, other metrics, a name matched by
		// regexp only.
		{`pool:hit:rate5m{pool="p1"}`, `pool:hit:rate5m{pool="p1"}`},
		{`rate(hit_total[5m])`, `rate(hit_total[5m])`},
		{`{__name__=~"server:hit:rate5m"}`, `{__name__=~"server:hit:rate5m"}`},
		{`{__name__="server:hit:rate5m", __name__!="server:hit:rate5m"}`, `{__name__="server:hit:rate5m", __name__!="server:hit:rate5m"}`},
	}
	for _, tt := range tests {
		got, err := e.ExpandString(tt.in)
		if err != nil {
			t.Errorf("ExpandString(%s): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ExpandString(%s)\n got %s\nwant %s", tt.in, got, tt.want)
		}
		// The expansion is valid PromQL.
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(got); err != nil {
			t.Errorf("expansion of %s does not parse: %v", tt.in, err)
		}
	}
	if _, err := e.ExpandString("sum("); err == nil {
		t.Error("ExpandString(sum() = nil error, want the parse error")
	}
}

// FuzzExpandString: any query that parses expands without panicking into
// a query that parses, and one naming no on-demand rule stays as it was.
func FuzzExpandString(f *testing.F) {
	for _, s := range []string{`server:hit:ratio{pool="p1"} offset 5m`, `max_over_time(server:neg[10m:1m])`,
		`avg_over_time(server:full:deriv15m[30m] @ end())`, `sum(rate(x[5m]))`, `server:p90 / on(a) group_left server:high`} {
		f.Add(s)
	}
	e := testExpander(f)
	p := parser.NewParser(parser.Options{})
	f.Fuzz(func(t *testing.T, q string) {
		expr, err := p.ParseExpr(q)
		if err != nil {
			return
		}
		got, err := e.ExpandString(q)
		if err != nil {
			t.Fatalf("ExpandString(%q): %v", q, err)
		}
		if _, err := p.ParseExpr(got); err != nil {
			t.Fatalf("ExpandString(%q) = %q does not parse: %v", q, got, err)
		}
		if !e.references(expr) && got != q {
			t.Fatalf("ExpandString(%q) = %q, want it unchanged", q, got)
		}
	})
}

// TestOnDemandRuleInAlert drives KVPreemptionsSustained, whose expression
// names the on-demand server:kvwatch_preemptions:rate5m: a counter growing
// 1/s for 20 minutes, then flat. The alert fires and resolves although the
// rate is never stored, and the rules API still lists the rule.
func TestOnDemandRuleInAlert(t *testing.T) {
	st := history.New(history.Options{Retention: 2 * time.Hour})
	m, err := New(Options{Groups: stackRules(), Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	rate := "server:" + strings.TrimSuffix(signal.Preemptions.Name, "_total") + ":rate5m"
	lset := labels.FromStrings(model.MetricNameLabel, signal.Preemptions.Name, signal.LabelServer, "127.0.0.1:30002",
		signal.LabelRole, "decode", signal.LabelPool, "p1", signal.LabelCluster, "c1")
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var firing, resolved time.Time
	for el := time.Duration(0); el <= 30*time.Minute; el += 15 * time.Second {
		ts := start.Add(el)
		st.Append(lset, ts.UnixMilli(), min(el.Seconds(), 1200))
		m.EvalAt(context.Background(), ts)
		active := false
		for _, a := range m.Alerts() {
			if a.Labels.Get(labels.AlertName) == stack.AlertPreemptions {
				active = true
				if a.State == StateFiring && firing.IsZero() {
					firing = ts
				}
			}
		}
		if !firing.IsZero() && !active && resolved.IsZero() {
			resolved = ts
		}
	}
	// In the first 5 minutes rate[5m] is the counter's value over 300s
	// (it starts at 0 at the first sample: no extrapolation before it):
	// 0.05 at 15s, 0.1 at 30s (not above 0.1), 0.15 at 45s. Pending from
	// 45s, firing after for: 10m.
	if want := start.Add(10*time.Minute + 45*time.Second); !firing.Equal(want) {
		t.Errorf("%s firing at %v, want %v", stack.AlertPreemptions, firing, want)
	}
	// The counter stops at 20m; rate[5m] falls under 0.1/s before 25m.
	if resolved.Before(start.Add(20*time.Minute)) || resolved.After(start.Add(25*time.Minute)) {
		t.Errorf("%s resolved at %v, want between 20m and 25m after %v", stack.AlertPreemptions, resolved, start)
	}
	var rule *Rule
	for _, g := range m.Groups() {
		for _, r := range g.Rules {
			if r.Name == rate {
				rule = r
			}
		}
	}
	if rule == nil || !rule.OnDemand || rule.Health != "ok" || !rule.LastEval.IsZero() || rule.Type != "recording" {
		t.Fatalf("Groups() rule %s = %+v, want an on-demand recording rule with health ok, never evaluated", rate, rule)
	}
	b, err := json.Marshal(rule)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"onDemand":true`, `"health":"ok"`, `"lastEvaluation":"0001-01-01T00:00:00Z"`,
		`"evaluationTime":0`, `"query":"(rate(kvwatch_preemptions_total[5m]) unless resets(kvwatch_preemptions_total[5m]) \u003e 0)"`, `"labels":{}`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("rule JSON %s lacks %s", b, field)
		}
	}
	q, _ := st.Querier(0, start.Add(time.Hour).UnixMilli())
	defer q.Close()
	for name, want := range map[string]bool{rate: false, "pool:kvwatch_preemptions:rate5m": true} {
		ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name))
		if got := ss.Next(); got != want {
			t.Errorf("history holds %s: %v, want %v", name, got, want)
		}
	}
}
