package report

import "github.com/kvwatch/kvwatch/internal/kv"

// ApplyTrend records each server's used tokens in t, at its scrape time,
// and sets each pool's demand-aware time to full from the trend
// (kv.PoolFill, docs/planning.md) at r.Time: top and status --trend keep
// the history that a one-shot report does not have. Targets no longer in r
// are forgotten; a failed target keeps its samples but leaves its pool
// without a forecast.
func (r *Report) ApplyTrend(t *kv.UsedTrend, min kv.FillTrend) {
	keep := make(map[string]bool, len(r.Servers))
	members := make([]kv.PlanMember, 0, len(r.Servers))
	for i := range r.Servers {
		row := &r.Servers[i]
		if !row.Role.HoldsKV() {
			continue
		}
		keep[row.Name] = true
		if row.OK && row.Server != nil {
			t.Add(row.Name, row.ScrapedAt, row.Server.Used)
		}
		members = append(members, kv.PlanMember{Key: PoolKeyOf(row), Name: row.Name, Server: row.Server, Plan: row.Plan})
	}
	t.Forget(keep)
	kv.WithFill(r.Planning, members, t, r.Time, min)
}
