package serve

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// reasons are the failure classes counted per target, in a fixed order.
var reasons = signal.Reasons

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
	// changes counts the changes of the target's page by what changed
	// (signal.Changes order).
	changes [len(signal.Changes)]uint64
}

// source returns the entries to export.
type source func() []entry

// collector exports the normalized kvwatch_* families and per-target scrape
// health from the latest scrape of each target. It reads state at scrape
// time and keeps none itself.
type collector struct {
	src   source
	descs map[string]*prometheus.Desc
	// serverLabels and poolLabels are the identity label names of the
	// per-server (and per-target) families and of the per-pool ones. A
	// family's label names are its identity labels, then its own
	// (signal.Metric.Labels), in the order of its values.
	serverLabels, poolLabels []string
	// planOptions returns the settings of the planning families (the
	// warning threshold, alerts.kv_usage_warning, and the autoscaling
	// target, autoscaling.target_kv_usage); nil: the defaults.
	planOptions func() report.PlanOptions
}

func newCollector(src source) *collector {
	c := &collector{src: src, descs: map[string]*prometheus.Desc{},
		serverLabels: signal.ServerLabels(), poolLabels: signal.PoolLabels()}
	for _, m := range append(append(signal.Server(), signal.Pools()...), signal.Target()...) {
		c.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, append(signal.ServerLabels(), m.Labels...), nil)
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
	c.collect(func(m signal.Metric, v float64, _, values []string) {
		ch <- prometheus.MustNewConstMetric(c.descs[m.Name], valueType(m), v, values...)
	})
}

// walk passes every sample Collect would export to fn, with its label
// pairs (name, value, ...), without building metrics: the history records
// a gather this way.
func (c *collector) walk(fn func(name string, counter bool, v float64, pairs ...string)) {
	var pairs []string
	c.collect(func(m signal.Metric, v float64, ident, values []string) {
		pairs = pairs[:0]
		for i, n := range ident {
			pairs = append(pairs, n, values[i])
		}
		for i, n := range m.Labels {
			pairs = append(pairs, n, values[len(ident)+i])
		}
		fn(m.Name, m.Type == signal.Counter, v, pairs...)
	})
}

// collect passes every sample of the entries to out.
func (c *collector) collect(out sampleFunc) {
	em := &emitter{out: out, buf: make([]string, 0, 8)}
	es := c.src()
	for i := range es {
		c.collectEntry(&es[i], em)
	}
	c.collectPlanning(es, em)
}

// sampleFunc receives one sample of family m: its value, the family's
// identity label names (collector.serverLabels or poolLabels) and its
// label values, those of the identity labels and then those of m.Labels.
// values is reused once it returns: it copies what it keeps.
type sampleFunc func(m signal.Metric, v float64, ident, values []string)

// emitter passes samples to out, their label values in one buffer: a
// gather allocates no label values per sample.
type emitter struct {
	out sampleFunc
	buf []string
	// sizes are the headroom sizes' label values seen so far (every
	// server has the same few).
	sizes []sizeLabel
}

type sizeLabel struct {
	tokens int
	label  string
}

// tokensLabel returns strconv.Itoa(tokens), without allocating it again
// for every server.
func (em *emitter) tokensLabel(tokens int) string {
	for _, s := range em.sizes {
		if s.tokens == tokens {
			return s.label
		}
	}
	l := strconv.Itoa(tokens)
	if len(em.sizes) < 16 {
		em.sizes = append(em.sizes, sizeLabel{tokens, l})
	}
	return l
}

// emit passes a sample of m with the label values id (those of the
// identity labels ident), then extra, to out.
func (em *emitter) emit(m signal.Metric, v float64, ident, id []string, extra ...string) {
	em.buf = append(append(em.buf[:0], id...), extra...)
	em.out(m, v, ident, em.buf)
}

func valueType(m signal.Metric) prometheus.ValueType {
	if m.Type == signal.Counter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// collectEntry passes e's samples to em.
func (c *collector) collectEntry(e *entry, em *emitter) {
	id := [...]string{e.target.Name, string(e.role), e.target.Labels[config.TargetLabelCluster], e.target.Labels[config.TargetLabelPool]}
	emit := func(m signal.Metric, v float64, extra ...string) {
		em.emit(m, v, c.serverLabels, id[:], extra...)
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
		// From 0: the first change is an increase a rate sees.
		for i, n := range e.changes {
			emit(signal.TargetChanges, float64(n), signal.Changes[i])
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
	d := &e.res.Dialect
	emit(signal.TargetInfo, 1, d.Engine, d.Version, d.Fingerprint, d.Format, d.Escaping)
	known(signal.KVCapacityTokens, s.Capacity)
	known(signal.KVUsedTokens, s.Used)
	known(signal.KVAvailableTokens, s.Available())
	known(signal.KVEvictableTokens, s.Evictable)
	known(signal.KVUsageRatio, s.UsageRatio)
	known(signal.KVReservedRatio, s.ReservedRatio)
	known(signal.KVDemandTokens, s.Demand)
	known(signal.KVDemandRatio, s.DemandRatio)
	for _, h := range e.row.Headroom {
		known(signal.KVHeadroomRequests, h.Requests, em.tokensLabel(h.Tokens))
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
	c.collectCachePools(s, em, id[:])
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

// signalProvenances says where each signal of s comes from (an array: no
// allocation per server and gather).
func signalProvenances(s *kv.Server) [12]provenanceOf {
	hit := kv.Unavailable
	if s.Counters.PrefixHitTokens.OK() && s.Counters.PrefixQueryTokens.OK() {
		hit = kv.Derived // a ratio of two counters' rates
	}
	return [...]provenanceOf{
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
