package stack

import (
	"fmt"
	"strings"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// tierEmpty is why a cache-pool panel may show no data: many servers have
// no pool beyond the primary one.
const tierEmpty = "no selected server reports further KV pools or cache tiers (SGLang without HiCache or a hybrid model, vLLM without offloading, no LMCache)"

// tierLegend names one pool of one server in a legend.
const tierLegend = "{{server}} {{tier}} {{pool_type}} {{pool_name}}"

// tierPanels are the server dashboard's "Cache tiers and pools" row
// (issue 13): each further pool's and cache tier's fill, used and
// capacity, and each tier's share of the server's prefix hits. Every value
// is a kvwatch_kv_pool_* series as exported: a value the engine does not
// report has no series, so the panels show no data for it, never 0.
func tierPanels(o Options) []panelSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio, one := f(0), f(1)
	sel := serverSel()
	return []panelSpec{
		{kind: kindTimeseries, title: "Cache tiers and pools: usage", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Used over capacity of each further KV pool (sliding-window and Mamba pools on the GPU) and cache tier below the GPU (host, disk, remote, LMCache L1/L2). " +
				"No series where the engine reports no fill: vLLM's CPU offload (its usage gauge counts blocks pinned by transfers, not fill, and no capacity is exported), " +
				"SGLang HiCache's storage tier, LMCache L2, Dynamo KVBM. No data is unknown, not empty. " +
				fmt.Sprintf("The line at %s is tier_full_usage: a lower tier above it whose share of hits halves alerts (%s).", pct(a.TierFullUsage), AlertTierFull),
			emptyOK: tierEmpty,
			queries: []query{{expr: signal.KVPoolUsageRatio.Name + sel, legend: tierLegend}},
			steps:   []step{{nil, green}, {f(a.TierFullUsage), orange}}},
		{kind: kindTimeseries, title: "Cache tiers and pools: used and capacity (tokens)", unit: "short", w: 12, h: 8,
			description: "What each pool or tier measured in tokens holds and can hold (SGLang HiCache host, vLLM V0 swap space). " +
				"A tier without a capacity line does not report one (vLLM CPU offload: the capacity gauges are still open upstream, so it has neither line here); no line is unknown, not 0.",
			emptyOK: tierEmpty,
			queries: []query{
				{expr: signal.KVPoolUsedTokens.Name + sel, legend: "used " + tierLegend},
				{expr: signal.KVPoolCapacityTokens.Name + sel, legend: "capacity " + tierLegend},
			},
			steps: []step{{nil, green}}},
		{kind: kindTimeseries, title: "Cache tiers and pools: used and capacity (bytes)", unit: "bytes", w: 8, h: 8,
			description: "What each tier measured in bytes holds and can hold (LMCache L1 and L2). LMCache exports no L2 capacity: used only.",
			emptyOK:     "no selected server has a cache tier measured in bytes (LMCache)",
			queries: []query{
				{expr: signal.KVPoolUsedBytes.Name + sel, legend: "used " + tierLegend},
				{expr: signal.KVPoolCapacityBytes.Name + sel, legend: "capacity " + tierLegend},
			},
			steps: []step{{nil, green}}},
		{kind: kindTimeseries, title: "Cache tiers: share of prefix hits", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "Each cache tier's prefix-hit tokens over all of the server's prefix-hit tokens (every tier, the GPU included): the rest came from tiers above it. " +
				"No series for a tier that does not report its hits (LMCache inside vLLM, vLLM V0 swap space) or while the server has no hits.",
			emptyOK: "no selected server reports prefix hits by cache tier (SGLang HiCache, LMCache, trtllm-serve, vLLM offload do)",
			queries: []query{{expr: fmt.Sprintf("rate(%s%s[$__rate_interval]) / ignoring (%s) group_left () (rate(%s%s[$__rate_interval]) > 0)",
				signal.KVPoolHitTokens.Name, sel, strings.Join(signal.CachePoolLabels(), ", "), signal.PrefixCacheHitTokens.Name, sel),
				legend: "{{server}} {{tier}} {{pool_name}}"}},
			steps: []step{{nil, blue}}},
		{kind: kindTimeseries, title: "Cache tiers: the engine's own hit rate", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "A tier's hit rate as the engine computes it over its own window (Dynamo KVBM: the last 1,000 requests). Not a share of hits: not comparable with the panel beside it.",
			emptyOK:     "only Dynamo KVBM reports a hit rate of its own",
			queries:     []query{{expr: signal.KVPoolHitRate.Name + sel, legend: "{{server}} {{tier}}"}},
			steps:       []step{{nil, blue}}},
	}
}

// fleetTierPanels are the fleet dashboard's views of the same: the fullest
// lower cache tiers, and how many servers each pool's KV sums cover (a sum
// that leaves a server out is a lower bound).
func fleetTierPanels(o Options) []panelSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio, one := f(0), f(1)
	return []panelSpec{
		{kind: kindBarGauge, title: "Cache tiers: fullest lower tiers", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Usage of the 15 fullest cache tiers below the GPU (host, disk, remote, LMCache). A full tier is normal for a cache; " +
				AlertTierFull + " warns when one is full and its share of prefix hits halves. Tiers that report no fill (vLLM CPU offload) are not listed.",
			emptyOK: tierEmpty,
			queries: []query{{expr: fmt.Sprintf("topk(15, %s%s)", signal.KVPoolUsageRatio.Name, poolSel(signal.LabelKVTier+`!="gpu"`)),
				legend: "{{server}} {{tier}} {{pool_name}}", instant: true}},
			steps: []step{{nil, green}, {f(a.TierFullUsage), orange}}},
		{kind: kindTimeseries, title: "Servers behind the pool sums", unit: "short", min: ratio, w: 12, h: 8,
			description: "Per pool: its targets (routers and cache servers aside), how many kvwatch reaches, and how many report used and capacity tokens, the servers the pool's KV sums add up. " +
				"Fewer reporting than targets: the pool's tokens are a lower bound, not a total.",
			queries: []query{
				{expr: RecTargets("pool") + poolSel(), legend: "targets {{cluster}}/{{pool}} {{role}}"},
				{expr: RecTargetsUp("pool") + poolSel(), legend: "up {{cluster}}/{{pool}} {{role}}"},
				{expr: RecReporting("pool") + poolSel(), legend: "in the sums {{cluster}}/{{pool}} {{role}}"},
			},
			steps: []step{{nil, green}}},
	}
}
