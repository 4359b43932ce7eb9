package serve

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// reasons are the failure classes counted per target, in a fixed order.
var reasons = [...]string{signal.ReasonRefused, signal.ReasonTimeout, signal.ReasonHTTP404, signal.ReasonHTTP501,
	signal.ReasonHTTPError, signal.ReasonNotMetrics, signal.ReasonParse, signal.ReasonTooLarge,
	signal.ReasonTruncated, signal.ReasonUnknownEngine, signal.ReasonLimit, signal.ReasonRedirect,
	signal.ReasonTLS, signal.ReasonClosed, signal.ReasonOther}

// reasonIndex returns the index of r in reasons; unknown reasons count as other.
func reasonIndex(r string) int {
	for i, x := range reasons {
		if x == r {
			return i
		}
	}
	return len(reasons) - 1
}

// entry is an immutable snapshot of one target's latest state, read by the
// collector at scrape time.
type entry struct {
	target *scrape.Target
	// scraped is false until the first scrape of the target finished.
	scraped bool
	res     scrape.Result
	row     report.Server
	// role is the role label: the configured role, else the last role the
	// engine reported, else unified (stable while the target is down).
	role        kv.Role
	scrapes     uint64
	failures    [len(reasons)]uint64
	lastSuccess time.Time
}

// source returns the entries to export.
type source func() []entry

// collector exports the normalized kvwatch_* families and per-target scrape
// health from the latest scrape of each target. It reads state at scrape
// time and keeps none itself.
type collector struct {
	src   source
	descs map[string]*prometheus.Desc
	// labels are each family's label names, in the order of its values.
	labels map[string][]string
	// planWarning returns the warning threshold of the planning families
	// (alerts.kv_usage_warning); nil: the default.
	planWarning func() float64
}

func newCollector(src source) *collector {
	c := &collector{src: src, descs: map[string]*prometheus.Desc{}, labels: map[string][]string{}}
	for _, m := range append(append(signal.Server(), signal.Pools()...), signal.Target()...) {
		labels := append(signal.ServerLabels(), m.Labels...)
		c.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, labels, nil)
		c.labels[m.Name] = labels
	}
	c.addPlanning()
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	emit := func(m signal.Metric, v float64, values []string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m.Name], valueType(m), v, values...)
	}
	es := c.src()
	for _, e := range es {
		c.collectEntry(&e, emit)
	}
	c.collectPlanning(es, emit)
}

// walk passes every sample Collect would export to fn, with its label
// pairs (name, value, ...), without building metrics: the history records
// a gather this way.
func (c *collector) walk(fn func(name string, counter bool, v float64, pairs ...string)) {
	var pairs []string
	emit := func(m signal.Metric, v float64, values []string) {
		pairs = pairs[:0]
		for i, n := range c.labels[m.Name] {
			pairs = append(pairs, n, values[i])
		}
		fn(m.Name, m.Type == signal.Counter, v, pairs...)
	}
	es := c.src()
	for _, e := range es {
		c.collectEntry(&e, emit)
	}
	c.collectPlanning(es, emit)
}

func valueType(m signal.Metric) prometheus.ValueType {
	if m.Type == signal.Counter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// collectEntry passes e's samples to out with their label values, in the
// order of the family's labels.
func (c *collector) collectEntry(e *entry, out func(m signal.Metric, v float64, values []string)) {
	id := []string{e.target.Name, string(e.role), e.target.Labels[signal.LabelCluster], e.target.Labels[signal.LabelPool]}
	buf := make([]string, 0, len(id)+4) // out copies what it keeps
	emit := func(m signal.Metric, v float64, extra ...string) {
		out(m, v, append(append(buf[:0], id...), extra...))
	}
	// Partial sums and implausible values are not exported: a sum with a
	// missing part is not a total (kvwatch_signal_info says which).
	known := func(m signal.Metric, v kv.Value, extra ...string) {
		if v.Trusted() {
			emit(m, v.V, extra...)
		}
	}

	// Scrape health, from the first finished scrape on.
	if e.scraped {
		up := 0.0
		if e.res.OK() {
			up = 1
		}
		emit(signal.TargetUp, up)
		emit(signal.TargetScrapeDuration, e.res.Duration.Seconds())
		emit(signal.TargetScrapeBytes, float64(e.res.BodyBytes))
		if !e.res.OK() {
			emit(signal.TargetScrapeError, 1, reasons[reasonIndex(e.res.Reason)])
		}
		emit(signal.TargetScrapes, float64(e.scrapes))
		for i, n := range e.failures {
			if n > 0 {
				emit(signal.TargetScrapeFailures, float64(n), reasons[i])
			}
		}
	}
	if !e.lastSuccess.IsZero() {
		emit(signal.TargetLastSuccess, float64(e.lastSuccess.UnixNano())/1e9)
	}
	if !e.scraped || !e.res.OK() {
		return // a down target exports no signals: absent, never 0
	}

	s := e.res.Server
	for _, r := range kv.WarningReasons() {
		n := 0
		for _, w := range s.Warnings {
			if w.Reason == r {
				n++
			}
		}
		emit(signal.TargetWarnings, float64(n), r)
	}
	emit(signal.ServerInfo, 1, s.Engine, s.Generation, s.Model)
	known(signal.KVCapacityTokens, s.Capacity)
	known(signal.KVUsedTokens, s.Used)
	known(signal.KVAvailableTokens, s.Available())
	known(signal.KVEvictableTokens, s.Evictable)
	known(signal.KVUsageRatio, s.UsageRatio)
	known(signal.KVReservedRatio, s.ReservedRatio)
	known(signal.KVDemandTokens, s.Demand)
	known(signal.KVDemandRatio, s.DemandRatio)
	for _, h := range e.row.Headroom {
		known(signal.KVHeadroomRequests, h.Requests, strconv.Itoa(h.Tokens))
	}
	known(signal.ContextLengthTokens, s.ContextLength)
	known(signal.RequestsRunning, s.Running)
	q := s.Queued
	for i, v := range []kv.Value{q.Waiting, q.Prealloc, q.Bootstrap, q.Transfer, q.Inflight} {
		known(signal.RequestsQueued, v, signal.Queues()[i])
	}
	k := s.Counters
	known(signal.PrefixCacheHitTokens, k.PrefixHitTokens)
	known(signal.PrefixCacheQueryTokens, k.PrefixQueryTokens)
	known(signal.Preemptions, k.Preemptions)
	known(signal.PromptTokens, k.PromptTokens)
	known(signal.GenerationTokens, k.GenerationTokens)
	known(signal.RankSpreadRatio, s.Spread)
	// Per DP rank, and only with more than one: TP and PP ranks of a DP
	// rank hold the same KV, and one DP rank would repeat the server series.
	if s.MultiDP() {
		groups := s.DPGroups()
		for i, dp := range dpRanks(s) {
			g := &groups[i]
			known(signal.RankKVUsageRatio, g.UsageRatio, dp)
			known(signal.RankKVUsedTokens, g.Used, dp)
			known(signal.RankKVCapacityTokens, g.Capacity, dp)
		}
	}
	collectCachePools(s, known)
	if s.Router != nil {
		known(signal.RouterWorkers, s.Router.WorkersHealthy, "healthy")
		known(signal.RouterWorkers, s.Router.WorkersTotal, "total")
	}
	for _, si := range signalProvenances(s) {
		emit(signal.SignalInfo, 1, si.name, si.prov.String())
	}
}

// dpRanks returns the DP label values of s's ranks in first-seen order: the
// order of the groups kv.Server.DPGroups returns.
func dpRanks(s *kv.Server) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range s.Ranks {
		if !seen[r.DP] {
			seen[r.DP] = true
			out = append(out, r.DP)
		}
	}
	return out
}

type provenanceOf struct {
	name string
	prov kv.Provenance
}

// signalProvenances says where each signal of s comes from.
func signalProvenances(s *kv.Server) []provenanceOf {
	hit := kv.Unavailable
	if s.Counters.PrefixHitTokens.OK() && s.Counters.PrefixQueryTokens.OK() {
		hit = kv.Derived // a ratio of two counters' rates
	}
	return []provenanceOf{
		{signal.SigCapacity, s.Capacity.Prov},
		{signal.SigUsed, s.Used.Prov},
		{signal.SigEvictable, s.Evictable.Prov},
		{signal.SigUsageRatio, s.UsageRatio.Prov},
		{signal.SigReservedRatio, s.ReservedRatio.Prov},
		{signal.SigDemandRatio, s.DemandRatio.Prov},
		{signal.SigRunning, s.Running.Prov},
		{signal.SigQueued, s.Queued.QueuedTotal().Prov},
		{signal.SigPrefixHit, hit},
		{signal.SigPreemptions, s.Counters.Preemptions.Prov},
		{signal.SigPromptTokens, s.Counters.PromptTokens.Prov},
		{signal.SigGenTokens, s.Counters.GenerationTokens.Prov},
	}
}
