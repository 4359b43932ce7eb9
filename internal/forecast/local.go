package forecast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// Local is a Source over series held in this process (serve's history):
// the queries a Store sends to a remote API, evaluated by Prometheus'
// PromQL engine over a storage.Queryable.
type Local struct {
	name      string
	queryable storage.Queryable
	engine    *promql.Engine
}

// Bounds of a Local's engine: a plan's queries over 14 days of a few
// hundred pools' series stay far below them.
const (
	localMaxSamples = 50_000_000
	localTimeout    = 2 * time.Minute
)

// NewLocal evaluates queries over q; name describes it in output
// ("serve's history").
func NewLocal(name string, q storage.Queryable, log *slog.Logger) *Local {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Local{name: name, queryable: q, engine: promql.NewEngine(promql.EngineOpts{
		MaxSamples: localMaxSamples, Timeout: localTimeout, LookbackDelta: 5 * time.Minute, Logger: log,
		// The plan's subqueries name their step; without a function the
		// engine dereferences nil on one that does not.
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
	})}
}

// Describe names the source.
func (l *Local) Describe() string { return l.name }

// QueryRange evaluates q from start to end at each step.
func (l *Local) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	qry, err := l.engine.NewRangeQuery(ctx, l.queryable, nil, q, start, end, step)
	var out model.Matrix
	err = l.run(ctx, qry, err, func(res *promql.Result) error {
		m, err := res.Matrix()
		if err != nil {
			return err
		}
		out = make(model.Matrix, 0, len(m))
		for _, s := range m {
			ss := &model.SampleStream{Metric: metricOf(s.Metric), Values: make([]model.SamplePair, len(s.Floats))}
			for i, f := range s.Floats {
				ss.Values[i] = model.SamplePair{Timestamp: model.Time(f.T), Value: model.SampleValue(f.F)}
			}
			out = append(out, ss)
		}
		return nil
	})
	return out, err
}

// Query evaluates q at one instant.
func (l *Local) Query(ctx context.Context, q string, at time.Time) (model.Vector, error) {
	qry, err := l.engine.NewInstantQuery(ctx, l.queryable, nil, q, at)
	var out model.Vector
	err = l.run(ctx, qry, err, func(res *promql.Result) error {
		v, err := res.Vector()
		if err != nil {
			return err
		}
		out = make(model.Vector, 0, len(v))
		for _, s := range v {
			out = append(out, &model.Sample{Metric: metricOf(s.Metric), Timestamp: model.Time(s.T), Value: model.SampleValue(s.F)})
		}
		return nil
	})
	return out, err
}

// run executes qry (made by the engine, or err saying why it could not)
// and hands its result to read before the query is closed (Close recovers
// the result's memory), with this package's errors.
func (l *Local) run(ctx context.Context, qry promql.Query, err error, read func(*promql.Result) error) error {
	if err != nil {
		return fmt.Errorf("query %s: %w: %w", l.name, ErrQuery, err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return l.queryError(ctx, res.Err)
	}
	if err := read(res); err != nil {
		return fmt.Errorf("query %s: %w: %w", l.name, ErrQuery, err)
	}
	return nil
}

// queryError maps the engine's errors onto this package's.
func (l *Local) queryError(ctx context.Context, err error) error {
	var timeout promql.ErrQueryTimeout
	switch {
	case errors.As(err, &timeout), errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("query %s: %w", l.name, ErrTimeout)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("query %s: %w: %w", l.name, ErrQuery, err)
}

func metricOf(ls labels.Labels) model.Metric {
	m := make(model.Metric, ls.Len())
	ls.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return m
}
