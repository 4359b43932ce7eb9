package report

import (
	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// PlanOptions are the settings of the capacity-planning view.
type PlanOptions struct {
	// Warning is the usage ratio at which KV is the limiting factor and
	// that a drained pool must stay below (alerts.kv_usage_warning); 0:
	// the config's default.
	Warning float64
	// Critical and LeakUsage are the diagnosis' thresholds
	// (alerts.kv_usage_critical, alerts.leak_usage); 0: the config's
	// defaults.
	Critical, LeakUsage float64
	// TargetKVUsage is the usage ratio the desired servers keep a pool at
	// or under with one server drained (autoscaling.target_kv_usage); 0:
	// the config's default.
	TargetKVUsage float64
}

// PlanOptionsOf returns the planning settings of a config.
func PlanOptionsOf(c *config.Config) PlanOptions {
	return PlanOptions{Warning: c.Alerts.KVUsageWarning, Critical: c.Alerts.KVUsageCritical, LeakUsage: c.Alerts.LeakUsage,
		TargetKVUsage: c.Autoscaling.TargetKVUsage}
}

// Diagnosis is the thresholds of kv.Diagnose in effect: o's, else the
// config's defaults.
func (o PlanOptions) Diagnosis() kv.DiagnoseOptions {
	d := config.Default().Alerts
	out := kv.DiagnoseOptions{Warning: o.Threshold(), Critical: d.KVUsageCritical, LeakUsage: d.LeakUsage}
	if o.Critical > 0 {
		out.Critical = o.Critical
	}
	if o.LeakUsage > 0 {
		out.LeakUsage = o.LeakUsage
	}
	return out
}

// Threshold is the warning ratio in effect: o.Warning, else the default.
func (o PlanOptions) Threshold() float64 {
	if o.Warning > 0 {
		return o.Warning
	}
	return config.Default().Alerts.KVUsageWarning
}

// Target is the target usage in effect: o.TargetKVUsage, else the default.
func (o PlanOptions) Target() float64 {
	if o.TargetKVUsage > 0 {
		return o.TargetKVUsage
	}
	return config.Default().Autoscaling.TargetKVUsage
}

// SetPlanning sets the planning settings of the reports t builds.
func (t *Tracker) SetPlanning(o PlanOptions) { t.plan = o }

// planServer is the planning view of a successful scrape, nil otherwise
// and for routers; the finished-request size is over the window since the
// target's previous scrape.
func (t *Tracker) planServer(res *scrape.Result, rates *kv.Rates) *kv.ServerPlan {
	o := t.plan
	if res.Server == nil || !res.Server.Role.HoldsKV() {
		return nil
	}
	var preempt kv.Value
	if rates != nil {
		preempt = rates.PreemptionsPerSec
	}
	p := kv.PlanServer(res.Server, res.Target.MaxRunning, preempt, o.Threshold())
	var prev *kv.RequestSizes
	if pr, ok := t.prev[res.Target.Name]; ok && pr.Server != nil && res.Time.After(pr.Time) {
		prev = &pr.Server.Finished
	}
	p.WithFinished(res.Server, prev)
	p.State, p.Evidence = kv.Diagnose(res.Server, rates, o.Diagnosis())
	return &p
}

// PlanPools computes r.Planning from r.Servers (their Plan included).
func (r *Report) PlanPools(o PlanOptions) {
	members := make([]kv.PlanMember, 0, len(r.Servers))
	for i := range r.Servers {
		row := &r.Servers[i]
		if !row.Role.HoldsKV() {
			continue
		}
		members = append(members, kv.PlanMember{Key: PoolKeyOf(row), Name: row.Name, Server: row.Server, Plan: row.Plan})
	}
	r.Planning = kv.PlanPools(members, o.Threshold(), o.Target())
	for i := range r.Pools {
		p := &r.Pools[i]
		for _, pp := range r.Planning {
			if pp.PoolKey == p.PoolKey && p.Text != nil {
				p.Text.State, p.Text.StateEvidence = textfmt.State(pp.State), pp.Evidence
			}
		}
	}
}
