package stack

import "testing"

// TestAlertValueUnits: every alert says the unit of its value where it has
// one, worked out here from each expression: what its left-hand side
// returns. An alert missing here fails: decide its unit.
func TestAlertValueUnits(t *testing.T) {
	want := map[string]string{
		"KVCacheUsageHigh":          "ratio",      // kvwatch_kv_usage_ratio > 0.9
		"KVCacheUsageCritical":      "ratio",      // kvwatch_kv_usage_ratio > 0.97
		"KVCacheExhausted":          "ratio",      // min_over_time(kvwatch_kv_usage_ratio[45s]) > 0.99
		"KVCacheFullSoon":           "ratio",      // kvwatch_kv_usage_ratio > 0.5 and predict_linear(...) >= 1
		"KVCacheLeakSuspected":      "ratio",      // kvwatch_kv_usage_ratio and ... state == 1
		"KVRankImbalance":           "ratio",      // kvwatch_kv_rank_spread_ratio > 0.2
		"StatePoolUsageHigh":        "ratio",      // kvwatch_kv_pool_usage_ratio{pool_type=~"mamba|swa",tier="gpu"} > 0.9
		"RequestQueueBuildingUp":    "requests",   // sum of kvwatch_requests_queued
		"KVPreemptionsSustained":    "requests/s", // server:kvwatch_preemptions:rate5m
		"PrefixCacheHitRateLow":     "ratio",      // hit over queried tokens
		"KVWatchDown":               "",           // up == 0
		"EngineTargetDown":          "",           // kvwatch_target_up == 0
		"EngineMetricsDisabled":     "",           // kvwatch_target_scrape_error == 1
		"EngineMetricsStale":        "seconds",    // time() - kvwatch_target_last_success_timestamp_seconds
		"EngineValuesImplausible":   "",           // a count of warnings
		"KVPoolFullSoon":            "seconds",    // pool:kvwatch_kv_seconds_to_full:deriv15m
		"KVPoolNMinusOneUnsafe":     "ratio",      // kvwatch_pool_drain_margin_ratio < 0
		"KVCacheTierFullLosingHits": "ratio",      // the tier's share of hit tokens
		"KVPoolProjectedFull":       "ratio",      // pool:kvwatch_kv_load_per_capacity:max1d_predict30d >= 1
		"KVWatchAbsent":             "",           // absent(up)
		"KVWatchWatchdog":           "",           // vector(1)
	}
	seen := map[string]bool{}
	for _, g := range AlertRules(Options{}).Groups {
		for _, r := range g.Rules {
			seen[r.Alert] = true
			w, ok := want[r.Alert]
			if !ok {
				t.Errorf("%s: no expected value unit; add it to this test", r.Alert)
				continue
			}
			got, has := r.Annotations[AnnotationValueUnit]
			if got != w || has != (w != "") {
				t.Errorf("%s: %s = %q (set %v), want %q", r.Alert, AnnotationValueUnit, got, has, w)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s: expected here but not among the alert rules", name)
		}
	}
}
