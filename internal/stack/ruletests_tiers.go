package stack

import (
	"github.com/kvwatch/kvwatch/internal/signal"
)

// tierAnnotations are the expected texts of AlertTierFull, written out
// from the thresholds (see expectedAnnotations).
func tierAnnotations(o Options, l map[string]string, value string) (summary, desc string) {
	a := o.Config.Alerts
	tier := l[signal.LabelKVTier]
	if n := l[signal.LabelPoolName]; n != "" {
		tier += " (" + n + ")"
	}
	where := l[signal.LabelServer] + " (" + l[signal.LabelRole]
	if c := l[signal.LabelCluster]; c != "" {
		where += ", cluster " + c
	}
	if p := l[signal.LabelPool]; p != "" {
		where += ", pool " + p
	}
	where += ")"
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
