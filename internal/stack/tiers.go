package stack

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Cache-tier rules (issue 13): a cache tier below the GPU (host memory,
// disk, a remote store, LMCache's L1 and L2) that is full and serves a
// falling share of the server's prefix-cache hits.
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
	if off != "" {
		off = " offset " + off
	}
	return fmt.Sprintf("rate(%s%s[%s]%s) / ignoring (%s) group_left () (rate(%s[%s]%s) > 0)",
		signal.KVPoolHitTokens.Name, lowerTier(), window, off, strings.Join(signal.CachePoolLabels(), ", "),
		signal.PrefixCacheHitTokens.Name, window, off)
}

// tierAlertExpr is the tier alert's expression; its value is the tier's
// share of the prefix hits over the last tierShareWindow.
func tierAlertExpr(o Options) string {
	a := o.Config.Alerts
	return fmt.Sprintf("(%s) < (%s > %s) * %s and %s%s > %s and ignoring (%s) rate(%s[%s]) > %s",
		tierShare(tierShareWindow, ""), tierShare(tierBaselineWindow, tierShareWindow), num(tierShareMin), num(tierShareDrop),
		signal.KVPoolUsageRatio.Name, lowerTier(), num(a.TierFullUsage),
		strings.Join(signal.CachePoolLabels(), ", "), signal.PrefixCacheQueryTokens.Name, tierShareWindow, num(a.PrefixHitMinTokensPS))
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
