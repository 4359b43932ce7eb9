package history

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Collector exports the store's size (signal.History): series, samples
// and encoded bytes per tier, memory outside the Go heap, refused samples,
// and the series its series limits dropped and refused.
func (s *Store) Collector() prometheus.Collector {
	c := &collector{s: s, descs: map[string]*prometheus.Desc{}}
	for _, m := range signal.History() {
		c.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
	}
	return c
}

type collector struct {
	s     *Store
	descs map[string]*prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	emit := func(m signal.Metric, v float64, labels ...string) {
		t := prometheus.GaugeValue
		if m.Type == signal.Counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[m.Name], t, v, labels...)
	}
	emit(signal.HistorySeries, float64(st.Series))
	emit(signal.HistorySamples, float64(st.RawSamples), signal.TierFull)
	emit(signal.HistorySamples, float64(st.CoarseSamples), signal.TierDownsampled)
	emit(signal.HistoryChunkBytes, float64(st.RawChunkBytes), signal.TierFull)
	emit(signal.HistoryChunkBytes, float64(st.CoarseChunkBytes), signal.TierDownsampled)
	emit(signal.HistoryOffHeapBytes, float64(st.OffHeapBytes))
	emit(signal.HistoryDropped, float64(st.Dropped))
	for _, c := range []struct {
		m      signal.Metric
		counts LimitCounts
	}{{signal.HistorySeriesEvicted, st.SeriesEvicted}, {signal.HistorySeriesRefused, st.SeriesRefused}} {
		emit(c.m, float64(c.counts.MaxSeries), signal.LimitMaxSeries)
		emit(c.m, float64(c.counts.MaxSeriesPerTarget), signal.LimitMaxSeriesPerTarget)
	}
}
