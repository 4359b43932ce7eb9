package alerting

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// benchHistory holds 20 minutes at 5s of n servers' five rate counters and
// usage ratio (10 servers a pool, 100 a cluster), and returns its end.
func benchHistory(b *testing.B, n int) (*history.Store, time.Time) {
	b.Helper()
	st := history.New(history.Options{Retention: time.Hour, Interval: 5 * time.Second})
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	type series struct {
		lset    labels.Labels
		counter bool
	}
	var all []series
	for i := range n {
		id := []string{signal.LabelServer, "s" + strconv.Itoa(i), signal.LabelRole, "decode",
			signal.LabelPool, "p" + strconv.Itoa(i/10), signal.LabelCluster, "c" + strconv.Itoa(i/100)}
		for _, m := range equivCounters {
			all = append(all, series{labels.FromStrings(append([]string{model.MetricNameLabel, m.Name}, id...)...), true})
		}
		all = append(all, series{labels.FromStrings(append([]string{model.MetricNameLabel, signal.KVUsageRatio.Name}, id...)...), false})
	}
	var end time.Time
	for k := 0; k <= 240; k++ {
		end = start.Add(time.Duration(k) * 5 * time.Second)
		for i, s := range all {
			v := float64(k * (100 + i%7*13))
			if !s.counter {
				v = float64((k+i)%100) / 128
			}
			st.Append(s.lset, end.UnixMilli(), v)
		}
	}
	return st, end
}

// BenchmarkEvalStackRules is one evaluation of every generated rule group
// (recording and alert) over 1,000 servers: with the server rules stored
// (each rate computed once, read back by the aggregates and alerts) and on
// demand (the aggregates and alerts compute the rates themselves).
func BenchmarkEvalStackRules(b *testing.B) {
	for _, mode := range []struct {
		name  string
		store bool
	}{{"stored", true}, {"on-demand", false}} {
		b.Run(mode.name, func(b *testing.B) {
			st, end := benchHistory(b, 1000)
			m, err := New(Options{Groups: stackRules(), Storage: st, StoreAllRules: mode.store})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				m.EvalAt(ctx, end)
			}
		})
	}
}

// BenchmarkQueryRangeOnDemand is the query-time cost of an on-demand rule:
// a 15-minute range query (61 steps) of one server rate over 1,000
// servers, expanded to rate(counter[5m]).
func BenchmarkQueryRangeOnDemand(b *testing.B) {
	st, end := benchHistory(b, 1000)
	m, err := New(Options{Groups: stackRules(), Storage: st})
	if err != nil {
		b.Fatal(err)
	}
	q, err := m.Expand("server:kvwatch_prompt_tokens:rate5m")
	if err != nil {
		b.Fatal(err)
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	for b.Loop() {
		qry, err := engine.NewRangeQuery(ctx, st, nil, q, end.Add(-15*time.Minute), end, 15*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if res := qry.Exec(ctx); res.Err != nil {
			b.Fatal(res.Err)
		}
		qry.Close()
	}
}
