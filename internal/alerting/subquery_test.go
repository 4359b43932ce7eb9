package alerting

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// A subquery without a step (`x[5m:]`) in a rule or in an alert
// template's query runs at the evaluation interval, as Prometheus runs it
// (its global evaluation_interval). Before, the engine had no default
// step: the rule's query dereferenced nil and the panic ended serve. And a
// template's query waited forever for the manager's lock, which the
// evaluation held.
func TestSubqueryWithoutStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		// want is count_over_time(x[5m:]) for a series sampled every
		// 15s for 10m: the steps of the subquery in (t-5m, t], each
		// finding a sample.
		want string
	}{
		{"15s evaluation interval: 300s / 15s steps", 15 * time.Second, "20"},
		{"1m evaluation interval: 300s / 60s steps", time.Minute, "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := history.New(history.Options{Retention: time.Hour})
			groups := []rulefmt.RuleGroup{{Name: "subqueries", Rules: []rulefmt.Rule{{
				Alert: "SubqueryCount",
				Expr:  "count_over_time(" + signal.KVUsageRatio.Name + "[5m:]) > 0",
				Annotations: map[string]string{"count": `{{ with query "count_over_time(` + signal.KVUsageRatio.Name +
					`[5m:])" }}{{ . | first | value }}{{ end }}`},
			}}}}
			m, err := New(Options{Groups: groups, Interval: tc.interval, Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			lset := labels.FromStrings(model.MetricNameLabel, signal.KVUsageRatio.Name, signal.LabelServer, "a", signal.LabelRole, "decode")
			start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			end := start.Add(10 * time.Minute)
			for ts := start; !ts.After(end); ts = ts.Add(15 * time.Second) {
				st.Append(lset, ts.UnixMilli(), 0.6)
			}
			done := make(chan struct{})
			go func() { m.EvalAt(context.Background(), end); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the evaluation did not return within 30s: the template's query waits for the manager's lock")
			}
			alerts := m.Alerts()
			if len(alerts) != 1 {
				t.Fatalf("alerts = %+v, want one SubqueryCount (rule health: %+v)", alerts, m.Groups()[0].Rules[0])
			}
			a := alerts[0]
			if a.Value != tc.want || a.Annotations.Get("count") != tc.want {
				t.Errorf("value %s, annotation count %q; want %s for both", a.Value, a.Annotations.Get("count"), tc.want)
			}
		})
	}
}
