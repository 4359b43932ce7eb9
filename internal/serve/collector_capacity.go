package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// addPlanning registers the planning families: the per-server ones with
// the server's identity labels, the per-pool ones with the pool's.
func (c *collector) addPlanning() {
	for _, m := range signal.Planning() {
		c.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, append(signal.ServerLabels(), m.Labels...), nil)
	}
	for _, m := range signal.PoolPlanning() {
		c.descs[m.Name] = prometheus.NewDesc(m.Name, m.Help, append(signal.PoolLabels(), m.Labels...), nil)
	}
}

// planOptions are the planning settings of the running config.
func (d *Daemon) planOptions() report.PlanOptions { return d.setup.Load().PlanOptions() }

// collectPlanning exports the planning families of the entries: each
// server's plan (computed with its row) and each pool's, the pool being
// the servers of one role label and one cluster and pool label. Partial
// and implausible values are left out, like every other family.
func (c *collector) collectPlanning(es []entry, em *emitter) {
	var o report.PlanOptions
	if c.planOptions != nil {
		o = c.planOptions()
	}
	members := make([]kv.PlanMember, 0, len(es))
	for i := range es {
		e := &es[i]
		m := kv.PlanMember{Key: kv.PoolKey{Role: e.role, Cluster: e.target.Labels[config.TargetLabelCluster],
			Pool: e.target.Labels[config.TargetLabelPool]}, Name: e.target.Name}
		if e.scraped && e.res.OK() {
			m.Server, m.Plan = e.res.Server, e.row.Plan
		}
		members = append(members, m)
	}
	pools := kv.PlanPools(members, o.Threshold(), o.Target())
	drains := make(map[string]*kv.DrainCase, len(es))
	for _, p := range pools {
		if p.Servers > 1 {
			for i := range p.DrainEach {
				drains[p.DrainEach[i].Server] = &p.DrainEach[i]
			}
		}
	}
	for i := range es {
		e := &es[i]
		p := e.row.Plan
		if !e.scraped || !e.res.OK() || p == nil {
			continue
		}
		id := [...]string{e.target.Name, string(e.role), e.target.Labels[config.TargetLabelCluster], e.target.Labels[config.TargetLabelPool]}
		known := func(m signal.Metric, v kv.Value) {
			if v.Trusted() {
				em.emit(m, v.V, c.serverLabels, id[:])
			}
		}
		known(signal.KVPerRunningRequestTokens, p.KVPerRequest)
		known(signal.KVWorkloadHeadroomRequests, p.WorkloadHeadroom)
		known(signal.FinishedRequestTokens, p.FinishedRequestTokens)
		known(signal.FinishedHeadroomRequests, p.FinishedHeadroom)
		known(signal.MaxRunningRequests, p.MaxRunning)
		known(signal.SaturationRatio, p.Saturation)
		if p.Limit != kv.FactorUnknown {
			oneHot(em, signal.LimitingFactor, c.serverLabels, id[:], p.Limit, kv.Factors())
		}
		oneHot(em, signal.ServerState, c.serverLabels, id[:], p.State, kv.States())
		collectHybrid(em, c.serverLabels, id[:], p)
		if d, ok := drains[e.target.Name]; ok {
			known(signal.DrainMarginTokens, d.MarginTokens)
			known(signal.DrainMarginRatio, d.MarginRatio)
		}
	}
	for _, p := range pools {
		id := [...]string{string(p.Role), p.Cluster, p.Pool}
		known := func(m signal.Metric, v kv.Value) {
			if v.Trusted() {
				em.emit(m, v.V, c.poolLabels, id[:])
			}
		}
		em.emit(signal.PoolServers, float64(p.Servers), c.poolLabels, id[:])
		oneHot(em, signal.PoolState, c.poolLabels, id[:], p.State, kv.States())
		known(signal.PoolWorkloadHeadroomRequests, p.WorkloadHeadroom)
		known(signal.PoolFinishedHeadroomRequests, p.FinishedHeadroom)
		known(signal.PoolSaturationRatio, p.Saturation)
		if p.Servers > 1 && p.Drain != nil {
			known(signal.PoolDrainMarginTokens, p.Drain.MarginTokens)
			known(signal.PoolDrainMarginRatio, p.Drain.MarginRatio)
		}
		known(signal.PoolDesiredServers, p.DesiredServers)
	}
}

// oneHot emits m at 1 for the value it has and 0 for every other of all
// (the limiting factor, the state); nothing when the value is "" (unknown).
func oneHot[T ~string](em *emitter, m signal.Metric, names, id []string, value T, all []T) {
	if value == "" {
		return
	}
	for _, x := range all {
		v := 0.0
		if x == value {
			v = 1
		}
		em.emit(m, v, names, id, string(x))
	}
}
