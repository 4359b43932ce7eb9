package forecast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// RefreshInterval is how often serve projects again: the daily peaks
// change little within an hour.
const RefreshInterval = time.Hour

// Projector is serve's projection: `kvwatch plan` over serve's own
// history, again every RefreshInterval (and on a config change), exported
// as the signal.Projection families and answered as a Projection. While
// the history is too short for a trend, the families are absent and the
// Projection says why.
type Projector struct {
	src Source
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	settings ProjectorSettings
	last     Projection
	changed  chan struct{}

	descs map[string]*prometheus.Desc
}

// ProjectorSettings follow the config in effect.
type ProjectorSettings struct {
	// History is how far back the source holds series: the history's
	// retention (0: serve keeps no history).
	History time.Duration
	// Warning is alerts.kv_usage_warning, Hold alerts.kv_usage_warning_for
	// (the peaks' resolution, as `kvwatch plan` reads them by default).
	Warning float64
	Hold    time.Duration
}

// Projection is the projection in effect: serve's answer at
// /api/kvwatch/v1/projection.
type Projection struct {
	// Available is true when Report holds a plan of serve's history.
	Available bool `json:"available"`
	// Reason says why there is no plan, and what would make one.
	Reason string `json:"reason,omitempty"`
	// NeedsDays is how many days of history a trend needs, HistoryDays
	// how many the history keeps (its retention).
	NeedsDays   int     `json:"needs_days"`
	HistoryDays float64 `json:"history_days"`
	// Report is the plan, as `kvwatch plan -o json` writes it.
	Report *Report `json:"report,omitempty"`
}

// NewProjector projects from src (nil: serve keeps no history); now is
// the clock (nil: time.Now).
func NewProjector(src Source, s ProjectorSettings, log *slog.Logger, now func() time.Time) *Projector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	p := &Projector{src: src, log: log, now: now, settings: s, changed: make(chan struct{}, 1), descs: map[string]*prometheus.Desc{}}
	p.last = p.unavailable(s)
	for _, m := range signal.Projection() {
		p.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, append(signal.PoolLabels(), m.Labels...), nil)
	}
	return p
}

// Apply takes the settings of a new config; Run projects again at once.
func (p *Projector) Apply(s ProjectorSettings) {
	p.mu.Lock()
	p.settings = s
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// Settings returns the settings in effect.
func (p *Projector) Settings() ProjectorSettings {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings
}

// Projection returns the projection in effect.
func (p *Projector) Projection() Projection {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Run projects at once, then every RefreshInterval and after every Apply,
// until ctx ends.
func (p *Projector) Run(ctx context.Context) error {
	t := time.NewTicker(RefreshInterval)
	defer t.Stop()
	for {
		p.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.changed:
		}
	}
}

// request is the plan's request and options under s at at: the default
// window, shortened to the whole days the history keeps.
func request(s ProjectorSettings, at time.Time) (Request, Options) {
	window := min(DefaultWindow, s.History.Truncate(DefaultPeriod))
	r := Request{At: at, Window: window, Period: DefaultPeriod, Resolution: HoldResolution(DefaultPeriod, s.Hold)}
	return r, Options{At: at, Period: DefaultPeriod, Horizon: DefaultHorizon, Warning: s.Warning}
}

// unavailable is the projection when the history is too short for any
// trend (or there is none): no report, the reason.
func (p *Projector) unavailable(s ProjectorSettings) Projection {
	pr := Projection{NeedsDays: MinPeriods, HistoryDays: s.History.Hours() / 24}
	need := time.Duration(MinPeriods) * DefaultPeriod
	switch {
	case p.src == nil || s.History <= 0:
		pr.Reason = fmt.Sprintf("needs %d days of history, has none: serve keeps no history; run it with --history %s or more", MinPeriods, FormatDuration(need))
	case s.History < need:
		pr.Reason = fmt.Sprintf("needs %d days of history, has %s: set history.retention (or --history) to %s or more", MinPeriods, FormatDuration(s.History), FormatDuration(need))
	default:
		return Projection{}
	}
	return pr
}

// Refresh projects from the history now.
func (p *Projector) Refresh(ctx context.Context) {
	p.mu.Lock()
	s := p.settings
	p.mu.Unlock()
	pr := p.unavailable(s)
	if pr.Reason == "" {
		pr = p.project(ctx, s)
	}
	p.mu.Lock()
	p.last = pr
	p.mu.Unlock()
}

func (p *Projector) project(ctx context.Context, s ProjectorSettings) Projection {
	pr := Projection{NeedsDays: MinPeriods, HistoryDays: s.History.Hours() / 24}
	r, o := request(s, p.now())
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	hs, err := Read(ctx, p.src, r)
	switch {
	case errors.Is(err, ErrNoSeries):
		pr.Reason = fmt.Sprintf("needs %d days of history, has none yet: %v", MinPeriods, err)
		return pr
	case err != nil:
		p.log.Warn("projection: the history could not be read; the projection is absent until it can", "err", err)
		pr.Reason = fmt.Sprintf("the history could not be read: %v", err)
		return pr
	}
	pr.Available, pr.Report = true, NewReport(p.src.Describe(), r, hs, o)
	return pr
}

// Describe implements prometheus.Collector.
func (p *Projector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d
	}
}

// Collect exports the planned pools of the projection in effect; a pool
// not planned (too short a history) has no series.
func (p *Projector) Collect(ch chan<- prometheus.Metric) {
	pr := p.Projection()
	if pr.Report == nil {
		return
	}
	emit := func(m signal.Metric, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(p.descs[m.Name], prometheus.GaugeValue, v, labels...)
	}
	for _, pl := range pr.Report.Pools {
		if pl.State != Planned {
			continue
		}
		id := []string{string(pl.Role), pl.Cluster, pl.Pool}
		if pl.PeakNowRatio != nil {
			emit(signal.PoolProjectedPeakRatio, *pl.PeakNowRatio, id...)
		}
		for _, c := range []struct {
			m signal.Metric
			x *Crossing
		}{{signal.PoolProjectedWarningTimestamp, pl.Warning}, {signal.PoolProjectedFullTimestamp, pl.Full}} {
			if c.x == nil {
				continue
			}
			for _, b := range []struct {
				bound string
				at    *time.Time
			}{{signal.BoundExpected, c.x.Date}, {signal.BoundEarliest, c.x.Earliest}, {signal.BoundLatest, c.x.Latest}} {
				if b.at != nil {
					emit(c.m, float64(b.at.UnixMilli())/1000, append(id, b.bound)...)
				}
			}
		}
		for _, b := range []struct {
			bound string
			n     *int
		}{{signal.BoundExpected, pl.ServersToAdd}, {signal.BoundHigh, pl.ServersToAddHigh}} {
			if b.n != nil {
				emit(signal.PoolProjectedServersToAdd, float64(*b.n), append(id, b.bound)...)
			}
		}
	}
}
