package alerting

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/kvwatch/kvwatch/internal/history"
)

// TestRunEvaluatesGroupsInOrderAtOneTimestamp: under Run, groups of one
// interval are evaluated one after the other at one timestamp, so a rule
// reading what an earlier group recorded reads this evaluation's value
// (serve's KVPoolFullSoon reads the aggregates group's forecast), never
// the one before; a group of another interval keeps its own schedule.
func TestRunEvaluatesGroupsInOrderAtOneTimestamp(t *testing.T) {
	st := history.New(history.Options{Retention: time.Hour})
	iv := model.Duration(40 * time.Millisecond)
	groups := []rulefmt.RuleGroup{
		{Name: "first", Interval: iv, Rules: []rulefmt.Rule{{Record: "first:eval_time", Expr: "vector(time())"}}},
		{Name: "other", Interval: model.Duration(70 * time.Millisecond), Rules: []rulefmt.Rule{{Record: "other:eval_time", Expr: "vector(time())"}}},
		{Name: "second", Interval: iv, Rules: []rulefmt.Rule{{Record: "second:first_eval_time", Expr: "sum(first:eval_time)"}}},
	}
	m, err := New(Options{Groups: groups, Storage: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	samples := func(name string) (ts []int64, vs []float64) {
		q, err := st.Querier(0, time.Now().Add(time.Hour).UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name))
		for ss.Next() {
			it := ss.At().Iterator(nil)
			for it.Next() == chunkenc.ValFloat {
				t, v := it.At()
				ts, vs = append(ts, t), append(vs, v)
			}
		}
		return ts, vs
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ts, _ := samples("second:first_eval_time"); len(ts) >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 10 evaluations of the second group in 30 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ts, vs := samples("second:first_eval_time")
	for i := range ts {
		if want := float64(ts[i]) / 1000; vs[i] != want {
			t.Errorf("evaluation at %d read the first group's %v, want its value of the same evaluation, %v", ts[i], vs[i], want)
		}
	}
	if ots, _ := samples("other:eval_time"); len(ots) < 2 {
		t.Errorf("the group of another interval was evaluated %d times, want at least 2", len(ots))
	}
}
