package stack

import (
	"fmt"
	"time"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// planningPanels are the fleet dashboard's capacity-planning row
// (docs/planning.md): how many more of today's requests fit, when each pool
// is full, whether it can lose a server, and what limits each server.
func planningPanels(o Options) []panelSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio, one := f(-1), f(1)
	within := time.Duration(a.KVFullWithin).Seconds()
	return []panelSpec{
		{kind: kindBarGauge, title: "Planning: requests of today's mix that still fit", unit: "short", w: 8, h: 8,
			description: "Per pool: free KV over the KV held per running request now (per DP rank, summed). Absent for idle pools: there is no mix to measure.",
			emptyOK:     "every selected pool is idle",
			queries:     []query{{expr: signal.PoolWorkloadHeadroomRequests.Name + poolSel(), legend: "{{cluster}}/{{pool}} {{role}}", instant: true}},
			steps:       []step{{nil, red}, {f(1), orange}, {f(10), green}}},
		{kind: kindTable, title: "Planning: pool time to full (trend + queued demand)", unit: "s", w: 8, h: 8,
			description: fmt.Sprintf("Seconds until each pool's free KV, less what its queued requests need, is gone at the fill trend of the last 15m. "+
				"Pools filling more slowly than %g%% of capacity per 15m are not filling and absent here (see the filling state).", FillFloorPer15m*100),
			emptyOK: "no selected pool is filling",
			queries: []query{{expr: RecPoolTimeToFull + poolSel(), legend: "{{cluster}}/{{pool}} {{role}}", instant: true}},
			steps:   []step{{nil, red}, {f(within), orange}, {f(4 * within), green}}},
		{kind: kindTimeseries, title: "Planning: N−1 drain margin", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: fmt.Sprintf("Per pool of more than one server: %s minus the usage the rest would have with its largest server drained "+
				"(used plus queued demand of the whole pool). Below 0: draining it is unsafe.", pct(a.KVUsageWarning)),
			emptyOK: "every selected pool has a single server (never N−1 safe)",
			queries: []query{{expr: signal.PoolDrainMarginRatio.Name + poolSel(), legend: "{{cluster}}/{{pool}} {{role}}"}},
			steps:   []step{{nil, red}, {f(0), orange}, {f(0.1), green}}},
		{kind: kindTimeseries, title: "Planning: pool saturation", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Capacity-weighted saturation of each pool: the fuller of KV and the batch per server, weighted by KV capacity.",
			queries:     []query{{expr: signal.PoolSaturationRatio.Name + poolSel(), legend: "{{cluster}}/{{pool}} {{role}}"}},
			steps:       usageSteps(o)},
		{kind: kindTable, title: "Planning: what limits each server", unit: "short", w: 12, h: 8,
			description: "The limiting factor of each server now: kv (usage over the warning, demand beyond free KV, or preemptions), batch (running-request limit reached), queue (requests wait while KV and batch have room).",
			emptyOK:     "no selected server is limited",
			queries:     []query{{expr: fmt.Sprintf(`%s%s == 1`, signal.LimitingFactor.Name, poolSel(signal.LabelFactor+`!="none"`)), legend: "{{server}} {{factor}}", instant: true}},
			steps:       []step{{nil, orange}}},
	}
}
