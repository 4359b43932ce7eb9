package forecast

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"

	kvhistory "github.com/kvwatch/kvwatch/internal/history"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// synth is a pool of the history written into serve's store: servers of
// size tokens whose daily peak of used KV is base + growth·d of their
// capacity on day d (from the start), with a daily cycle down to 60 % of
// the peak at night, ±2 % noise on every sample, from day startAt on.
type synth struct {
	cluster      string
	servers      int
	size         float64
	base, growth float64
	startAt      float64
}

func (p synth) name() string { return "decode{cluster=" + p.cluster + "}" }

// fill writes days of 5-minute samples ending at end into s.
func (p synth) fill(s *kvhistory.Store, end time.Time, days int, rng *rand.Rand) {
	start := end.Add(-time.Duration(days) * day)
	for i := range p.servers {
		id := []string{signal.LabelServer, p.cluster + "-" + string(rune('a'+i)), signal.LabelRole, "decode", signal.LabelCluster, p.cluster}
		used := labels.FromStrings(append([]string{"__name__", signal.KVUsedTokens.Name}, id...)...)
		capacity := labels.FromStrings(append([]string{"__name__", signal.KVCapacityTokens.Name}, id...)...)
		for t := start; !t.After(end); t = t.Add(5 * time.Minute) {
			d := float64(t.Sub(start)) / float64(day)
			if d < p.startAt {
				continue
			}
			// The cycle peaks at 14:00 UTC.
			cycle := 0.8 + 0.2*math.Cos(2*math.Pi*(float64(t.UTC().Hour()*60+t.UTC().Minute())/1440-14.0/24))
			v := p.size * (p.base + p.growth*d) * cycle * (1 + 0.02*(2*rng.Float64()-1))
			s.Append(used, t.UnixMilli(), min(v, p.size))
			s.Append(capacity, t.UnixMilli(), p.size)
		}
	}
}

// TestProjectorHistory writes 21 days of a growing, a flat and a young
// pool into serve's history and projects them as serve does: the growing
// pool's warning and full dates within 10 % of the truth, exported with
// their band; the flat pool without dates; the young pool not planned and
// absent, saying why; a history kept for less than 5 days, no projection
// at all and the reason.
func TestProjectorHistory(t *testing.T) {
	const days = 21
	end := time.Date(2026, 3, 15, 17, 55, 0, 0, time.UTC)
	grow := synth{cluster: "grow", servers: 4, size: 1 << 20, base: 0.45, growth: 0.012}
	flat := synth{cluster: "flat", servers: 2, size: 1 << 19, base: 0.55}
	young := synth{cluster: "young", servers: 2, size: 1 << 19, base: 0.5, growth: 0.01, startAt: 19.8}
	store := kvhistory.New(kvhistory.Options{Retention: days * day, Now: func() time.Time { return end }})
	defer store.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []synth{grow, flat, young} {
		p.fill(store, end, days, rng)
	}
	src := NewLocal("serve's history", store, nil)
	settings := ProjectorSettings{History: days * day, Warning: 0.9, Hold: 10 * time.Minute}
	pr := NewProjector(src, settings, nil, func() time.Time { return end })
	pr.Refresh(context.Background())
	got := pr.Projection()
	if !got.Available || got.Report == nil {
		t.Fatalf("no projection: %q", got.Reason)
	}
	series := gather(t, pr)

	g := poolByName(t, got.Report, grow.name())
	for _, c := range []struct {
		name  string
		ratio float64
		cross *Crossing
		m     signal.Metric
	}{
		{"warning", 0.9, g.Warning, signal.PoolProjectedWarningTimestamp},
		{"full", 1, g.Full, signal.PoolProjectedFullTimestamp},
	} {
		truth := (c.ratio-grow.base)/grow.growth - days
		if c.cross == nil || c.cross.Date == nil {
			t.Fatalf("%s: %s: no date; want one %.1f days on", g.Name, c.name, truth)
		}
		got := c.cross.Date.Sub(end).Hours() / 24
		t.Logf("%s reaches %s in %.2f days (%v – %v); truth %.2f", g.Name, c.name, got, c.cross.Earliest, c.cross.Latest, truth)
		if e := math.Abs(got-truth) / truth; g.State != Planned || e > 0.10 {
			t.Errorf("%s: %s: state %s, in %.2f days: %.1f%% off the truth (%.2f days); want planned, within 10%%", g.Name, c.name, g.State, got, e*100, truth)
		}
		for bound, at := range map[string]*time.Time{signal.BoundExpected: c.cross.Date, signal.BoundEarliest: c.cross.Earliest, signal.BoundLatest: c.cross.Latest} {
			key := c.m.Name + "{decode,grow," + bound + "}"
			v, ok := series[key]
			switch {
			case at == nil && ok:
				t.Errorf("%s = %v; want absent, the plan has no %s date", key, v, bound)
			case at != nil && (!ok || v != float64(at.UnixMilli())/1000):
				t.Errorf("%s = %v (exported: %v); want the plan's %s, %v", key, v, ok, bound, at)
			}
		}
		if c.cross.Earliest == nil || c.cross.Latest != nil && (c.cross.Earliest.After(*c.cross.Date) || c.cross.Latest.Before(*c.cross.Date)) {
			t.Errorf("%s: %s: band %v – %v around %v; want the date within it", g.Name, c.name, c.cross.Earliest, c.cross.Latest, c.cross.Date)
		}
	}
	if v, ok := series[signal.PoolProjectedServersToAdd.Name+"{decode,grow,expected}"]; !ok || g.ServersToAdd == nil || v != float64(*g.ServersToAdd) || v < 1 {
		t.Errorf("servers to add of %s: exported %v (%v), plan %v; want the plan's, at least 1", g.Name, v, ok, g.ServersToAdd)
	}
	if n := len(g.Line); n < 3 || !g.Line[n-1].At.Equal(end.Add(DefaultHorizon)) || g.Line[n-1].HighTokens <= g.Line[n-1].Tokens {
		t.Errorf("%s: line %+v; want at least its start, now and the horizon, with a band", g.Name, g.Line)
	}

	f := poolByName(t, got.Report, flat.name())
	if f.State != Planned || f.Trend == Growing || f.Warning.Date != nil {
		t.Errorf("%s: state %s, trend %s, warning %+v; want planned without a date", f.Name, f.State, f.Trend, f.Warning)
	}
	if v, ok := series[signal.PoolProjectedWarningTimestamp.Name+"{decode,flat,expected}"]; ok {
		t.Errorf("%s: warning date exported, %v; want absent", f.Name, v)
	}
	if v, ok := series[signal.PoolProjectedPeakRatio.Name+"{decode,flat}"]; !ok || math.Abs(v-flat.base) > 0.03 {
		t.Errorf("%s: peak ratio %v (%v); want about %.2f", f.Name, v, ok, flat.base)
	}

	y := poolByName(t, got.Report, young.name())
	if y.State != TooShort || !strings.Contains(y.Reason, "a trend needs 5") {
		t.Errorf("%s: state %s, reason %q; want too_short: a trend needs 5", y.Name, y.State, y.Reason)
	}
	for k := range series {
		if strings.Contains(k, ",young") {
			t.Errorf("%s exported; a pool without a trend has no series", k)
		}
	}

	// A history of 2 days: no projection, the reason, no series.
	pr.Apply(ProjectorSettings{History: 2 * day, Warning: 0.9, Hold: 10 * time.Minute})
	pr.Refresh(context.Background())
	short := pr.Projection()
	if want := "needs 5 days of history, has 2d: set history.retention (or --history) to 5d or more"; short.Available || short.Reason != want {
		t.Errorf("with 2 days: available %v, reason %q; want %q", short.Available, short.Reason, want)
	}
	if s := gather(t, pr); len(s) != 0 {
		t.Errorf("with 2 days: %d series exported; want none", len(s))
	}
}

// TestProjectorWithoutHistory: serve without history says so.
func TestProjectorWithoutHistory(t *testing.T) {
	pr := NewProjector(nil, ProjectorSettings{Warning: 0.9, Hold: 10 * time.Minute}, nil, nil)
	pr.Refresh(context.Background())
	want := "needs 5 days of history, has none: serve keeps no history; run it with --history 5d or more"
	if got := pr.Projection(); got.Available || got.Reason != want {
		t.Errorf("got %+v; want unavailable: %q", got, want)
	}
}

func poolByName(t *testing.T, rep *Report, name string) PoolPlan {
	t.Helper()
	for _, p := range rep.Pools {
		if p.Name == name {
			return p
		}
	}
	var names []string
	for _, p := range rep.Pools {
		names = append(names, p.Name)
	}
	t.Fatalf("no pool %s in the projection; pools: %q", name, names)
	return PoolPlan{}
}

// gather returns the projector's series as "name{role,cluster[,bound]}".
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			key := []string{l[signal.LabelRole], l[signal.LabelCluster]}
			if b, ok := l[signal.LabelBound]; ok {
				key = append(key, b)
			}
			out[mf.GetName()+"{"+strings.Join(key, ",")+"}"] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 { return m.GetGauge().GetValue() }
