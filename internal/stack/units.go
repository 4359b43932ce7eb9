package stack

import "github.com/kvwatch/kvwatch/internal/signal"

// AnnotationValueUnit is the alert annotation that says what unit the
// alert's value ($value) is in, so that a face can show it with its unit
// (the web UI: "99.7%", "18m", "20,467 requests") instead of a bare number.
// Alerts whose value is a flag or a count of nothing in particular (up ==
// 0, vector(1)) have none.
const AnnotationValueUnit = "value_unit"

// Values of AnnotationValueUnit: signal's units, and a rate.
const (
	UnitRatio    = "ratio"   // 0–1, shown as a percentage
	UnitSeconds  = "seconds" // a time span, shown as a duration
	UnitTokens   = "tokens"
	UnitRequests = "requests"
	UnitPerSec   = "requests/s"
)

// alertValueUnits is the unit of each alert's value: the unit of the
// signal metric its expression returns (its left-hand side), or of the
// recording rule it reads.
var alertValueUnits = map[string]string{
	AlertKVHigh:            signal.KVUsageRatio.Unit,
	AlertKVCritical:        signal.KVUsageRatio.Unit,
	AlertKVExhausted:       signal.KVUsageRatio.Unit, // min_over_time of the usage ratio
	AlertKVFullSoon:        signal.KVUsageRatio.Unit, // the usage ratio now (its texts say "full now" above the fast window's threshold)
	AlertLeak:              signal.KVUsageRatio.Unit,
	AlertRankImbalance:     signal.RankSpreadRatio.Unit,
	AlertStateHigh:         signal.KVPoolUsageRatio.Unit,
	AlertQueue:             signal.RequestsQueued.Unit,
	AlertPreemptions:       signal.Preemptions.Unit + "/s", // the recorded rate
	AlertPrefixHitLow:      UnitRatio,                      // hit over queried tokens
	AlertMetricsStale:      signal.TargetLastSuccess.Unit,  // time() minus the last success
	AlertPoolFullSoon:      UnitSeconds,                    // RecPoolTimeToFull
	AlertPoolDrain:         signal.PoolDrainMarginRatio.Unit,
	AlertTierFull:          UnitRatio, // the tier's share of the hit tokens
	AlertPoolProjectedFull: UnitRatio, // RecPoolProjectedPeak
}

// valueUnitAnnotation adds the unit of alert name's value to annotations
// (AnnotationValueUnit), where its value has one.
func valueUnitAnnotation(name string, annotations map[string]string) map[string]string {
	if u := alertValueUnits[name]; u != "" {
		annotations[AnnotationValueUnit] = u
	}
	return annotations
}
