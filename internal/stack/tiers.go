package stack

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Cache tiers in the stack: the alert on a cache tier below the GPU (host
// memory, disk, a remote store, LMCache's L1 and L2) that is full and
// serves a falling share of the server's prefix-cache hits, the
// dashboards' rows of tiers and pools, and the alert's promtool tests.
//
// A cache tier runs full by design (it keeps what it can and evicts the
// least recently used), so its fill alone is no reason to warn anyone. What
// is: a full tier whose share of the prefix hits falls, i.e. it now evicts
// prefixes that would still have been hit: the tier is too small for the
// working set. The share is the tier's hit tokens over all of the server's
// prefix hit tokens (the server's counter counts every tier, the GPU
// included), not over the looked-up tokens: a workload that turns less
// cacheable lowers every tier's hits together and leaves the shares as they
// were (PrefixCacheHitRateLow covers that), while a tier that loses its
// entries loses share to the others.

// AlertTierFull is the cache-tier alert; it has a section in docs/runbook.md.
const AlertTierFull = "KVCacheTierFullLosingHits"

// The windows of the tier alert. The share now is the last tierShareWindow;
// the baseline is the tierBaselineWindow before it, so a drop is measured
// against shares the drop has not yet pulled down. Both together span one
// hour, the default retention of serve's history, which evaluates the same
// rules.
const (
	tierShareWindow    = "15m"
	tierBaselineWindow = "45m"
	// tierShareDrop: the share now must be below this fraction of the
	// baseline share ("halved").
	tierShareDrop = 0.5
	// tierShareMin: a tier that served less than this share of the hits
	// over the baseline has little to lose; it does not alert.
	tierShareMin = 0.05
	// tierFullFor is the hold time: the tier stays full and its share
	// stays halved this long before the alert fires.
	tierFullFor = model.Duration(15 * time.Minute)
)

// lowerTier selects the cache tiers below the GPU (not the SWA and Mamba
// pools, which are GPU pools of other attention types).
func lowerTier() string {
	return fmt.Sprintf(`{%s!="gpu"}`, signal.LabelKVTier)
}

// tierShare is the share of a server's prefix hits each lower tier served
// over window (offset off, "" for none): absent where the tier reports no
// hit tokens or the server served no hits at all.
func tierShare(window, off string) string {
	return fmt.Sprintf("%s / ignoring (%s) group_left () (%s > 0)",
		counterRate(signal.KVPoolHitTokens.Name+lowerTier(), window, off), strings.Join(signal.CachePoolLabels(), ", "),
		counterRate(signal.PrefixCacheHitTokens.Name, window, off))
}

// tierAlertExpr is the tier alert's expression; its value is the tier's
// share of the prefix hits over the last tierShareWindow.
func tierAlertExpr(o Options) string {
	a := o.Config.Alerts
	return fmt.Sprintf("(%s) < (%s > %s) * %s and %s%s > %s and ignoring (%s) %s > %s",
		tierShare(tierShareWindow, ""), tierShare(tierBaselineWindow, tierShareWindow), num(tierShareMin), num(tierShareDrop),
		signal.KVPoolUsageRatio.Name, lowerTier(), num(a.TierFullUsage),
		strings.Join(signal.CachePoolLabels(), ", "), counterRate(signal.PrefixCacheQueryTokens.Name, tierShareWindow, ""), num(a.PrefixHitMinTokensPS))
}

// tierWhere names a tier in the alert texts: "host", "lmcache-l2 (fs)".
const tierWhere = "{{ $labels.tier }}{{ with $labels.pool_name }} ({{ . }}){{ end }}"

// tierAlerts returns the cache-tier alert group.
func tierAlerts(o Options, srvLabels string, alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.RuleGroup {
	a := o.Config.Alerts
	return rulefmt.RuleGroup{Name: "kvwatch-tiers", Rules: []rulefmt.Rule{
		alert(AlertTierFull, SeverityWarning, tierFullFor, tierAlertExpr(o),
			"Cache tier "+tierWhere+" of "+srvLabels+" is full and serves fewer prefix hits",
			"The "+tierWhere+" cache tier of {{ $labels.server }} is above "+pct(a.TierFullUsage)+" full, and its share of the server's prefix-cache hits over the last "+
				tierShareWindow+" is {{ $value | humanizePercentage }}, under "+pct(tierShareDrop)+" of its share over the "+tierBaselineWindow+
				" before. It evicts prefixes that would still be hit: it is too small for the working set."),
	}}
}

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
			queries: []query{{expr: fmt.Sprintf("%s / ignoring (%s) group_left () (%s > 0)",
				counterRate(signal.KVPoolHitTokens.Name+sel, "$__rate_interval", ""), strings.Join(signal.CachePoolLabels(), ", "),
				counterRate(signal.PrefixCacheHitTokens.Name+sel, "$__rate_interval", "")),
				legend: "{{server}} {{tier}} {{pool_name}}"}},
			steps: []step{{nil, blue}}},
		{kind: kindTimeseries, title: "Cache tiers: the engine's own hit rate", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "A tier's hit rate as the engine computes it over its own window (Dynamo KVBM: the last 1,000 requests). Not a share of hits: not comparable with the panel beside it.",
			emptyOK:     "no selected server is a Dynamo KVBM listener (only KVBM reports a hit rate of its own)",
			queries:     []query{{expr: signal.KVPoolHitRate.Name + sel, legend: "{{server}} {{tier}}"}},
			steps:       []step{{nil, blue}}},
		{kind: kindTimeseries, title: "Cache tiers: KV traffic to and from the GPU", unit: "Bps", min: ratio, w: 24, h: 8,
			description: "Bytes per second each cache tier loads into the GPU (load: KV of prefix hits brought back) and stores from it (store: KV offloaded). " +
				"Stores without loads: a tier written and never read, its cost without its hits. " +
				"No series for engines that count their tier traffic in tokens or blocks, or not at all (SGLang HiCache, Dynamo KVBM, LMCache).",
			emptyOK: "no selected server reports its tier traffic in bytes (vLLM CPU offloading, trtllm-serve's host cache do)",
			queries: []query{{expr: counterRate(signal.KVPoolTransferBytes.Name+sel, "$__rate_interval", ""),
				legend: "{{direction}} {{server}} {{tier}} {{pool_name}}"}},
			steps: []step{{nil, blue}}},
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
				{expr: RecTargets("pool") + poolSel(), legend: "targets " + poolLegend},
				{expr: RecTargetsUp("pool") + poolSel(), legend: "up " + poolLegend},
				{expr: RecReporting("pool") + poolSel(), legend: "in the sums " + poolLegend},
			},
			steps: []step{{nil, green}}},
	}
}

// The promtool tests of the cache-tier alert.

// tierAnnotations are the expected texts of AlertTierFull, written out
// from the thresholds (see expectedAnnotations).
func tierAnnotations(o Options, l map[string]string, value string) (summary, desc string) {
	a := o.Config.Alerts
	tier := l[signal.LabelKVTier]
	if n := l[signal.LabelPoolName]; n != "" {
		tier += " (" + n + ")"
	}
	where := serverWhere(l)
	summary = "Cache tier " + tier + " of " + where + " is full and serves fewer prefix hits"
	desc = "The " + tier + " cache tier of " + l[signal.LabelServer] + " is above " + percent(a.TierFullUsage) +
		" full, and its share of the server's prefix-cache hits over the last 15m is " + value +
		", under 50% of its share over the 45m before. It evicts prefixes that would still be hit: it is too small for the working set."
	return summary, desc
}

// tierRuleTests are the promtool tests of the cache-tier alert. The windows
// (15m now, the 45m before as the baseline, halved, a 5 % floor, a 15m
// hold) are written out here by hand, not read from the rule's constants.
//
// Traffic: every server looks up q tokens/min, twice the traffic floor
// plus 1 token/s, and hits half of them (p = q/2 per min). A tier's hit
// counter grows by its share of p per minute; at minute T = 60 the
// dropping tiers fall from their share to a lower one. All counters start
// at 0 and samples are 1m apart.
//
// The host tier of hicache-0 (above tier_full_usage, share 40 % → 10 %):
// at T+t the share over the last 15m is ((15−t)·0.4 + t·0.1)/15 with the
// closed range of Prometheus 2 (15 increments), ((14−t)·0.4 + t·0.1)/14
// with the left-open range of Prometheus 3; the baseline (the 45m ending
// 15m ago) is still 0.4 for t ≤ 15. The share is below half of it, 0.2,
// from t = 10 (Prometheus 3: 2.6/14 = 0.186; Prometheus 2: exactly 0.2, not
// below it, so t = 11 there: 2.7/15 = 0.18). Held 15m, the alert fires at
// T+25 or T+26: quiet at T+24, firing at T+27 with the share 15 · 0.1 / 15
// = 10 % (the whole window is past the drop; the baseline, 45m ending at
// T+12, is (33·0.4 + 12·0.1)/45 = 0.32, half of it 0.16 > 0.1). By T+55
// the baseline has taken the new share in ((5·0.4 + 40·0.1)/45 = 0.133,
// half 0.067 < 0.1; Prometheus 3: (4·0.4 + 40·0.1)/44 = 0.127) and the
// alert has resolved.
//
// Quiet throughout: tiered-1's disk tier (full, share steady at 20 %),
// remote tier (share 30 % → 5 % but below tier_full_usage), LMCache L1
// (full, hit counter flat: no share to lose), LMCache L2 "fs" (full, share
// 4 % → 1 %: under the 5 % floor), LMCache L2 "s3" (full, no hit counter at
// all, as LMCache's L2 without hits by level or vLLM's swap space), and
// hicache-0's SWA pool (a GPU pool, not a lower tier, with the host tier's
// numbers). With a traffic floor above 0, idle-2's host tier (as
// hicache-0's, at half the floor's traffic) stays quiet too.
func tierRuleTests(o Options, expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	o = o.WithDefaults()
	a := o.Config.Alerts
	const T, n = 60, 120
	none := []expAlert{}
	full, low := (a.TierFullUsage+1)/2, a.TierFullUsage/2
	q := (2*a.PrefixHitMinTokensPS + 1) * 60 // looked-up tokens per minute
	type tier struct {
		typ, tier, name string
		usage           float64
		hits            bool    // the tier reports hit tokens
		before, after   float64 // share of the server's hits before and after T
	}
	var in []inputSeries
	add := func(s srv, q float64, tiers ...tier) {
		p := q / 2
		in = append(in,
			inputSeries{s.sel(signal.PrefixCacheQueryTokens.Name), ramp(0, q, n)},
			inputSeries{s.sel(signal.PrefixCacheHitTokens.Name), ramp(0, p, n)})
		for _, t := range tiers {
			extra := []string{signal.LabelPoolType, t.typ, signal.LabelKVTier, t.tier}
			if t.name != "" {
				extra = append(extra, signal.LabelPoolName, t.name)
			}
			in = append(in, inputSeries{s.sel(signal.KVPoolUsageRatio.Name, extra...), constant(t.usage, n)})
			if t.hits {
				// T+1 samples up to T at the share before, then the rest at
				// the share after, continuing from the value at T.
				h0, h1 := t.before*p, t.after*p
				in = append(in, inputSeries{s.sel(signal.KVPoolHitTokens.Name, extra...),
					ramp(0, h0, T) + " " + ramp(h0*T+h1, h1, n-T-1)})
			}
		}
	}
	hi := server("hicache-0", "unified", "p3")
	add(hi, q,
		tier{"full", "host", "", full, true, 0.4, 0.1},
		tier{"swa", "gpu", "", full, true, 0.4, 0.1})
	add(server("tiered-1", "unified", "p3"), q,
		tier{"full", "disk", "", full, true, 0.2, 0.2},
		tier{"full", "remote", "", low, true, 0.3, 0.05},
		tier{"full", "lmcache-l1", "", full, true, 0, 0},
		tier{"full", "lmcache-l2", "fs", full, true, 0.04, 0.01},
		tier{"full", "lmcache-l2", "s3", full, false, 0, 0})
	if a.PrefixHitMinTokensPS > 0 {
		add(server("idle-2", "unified", "p3"), a.PrefixHitMinTokensPS*30,
			tier{"full", "host", "", full, true, 0.4, 0.1})
	}
	l := hi.alertLabels(SeverityWarning, signal.LabelPoolType, "full", signal.LabelKVTier, "host")
	return []ruleTest{{Interval: testStep, InputSeries: in, AlertRuleTests: []alertTest{
		{mins(T + 9), AlertTierFull, none},
		{mins(T + 24), AlertTierFull, none},
		{mins(T + 27), AlertTierFull, []expAlert{expect(AlertTierFull, l, humanizePercentage(0.1))}},
		{mins(T + 55), AlertTierFull, none},
	}}}
}
