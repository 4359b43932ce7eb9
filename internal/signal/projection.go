package signal

// The capacity projection over days (docs/planning.md, "Projection in
// serve"): serve's history fitted as `kvwatch plan` fits a central
// store, one series per pool and bound.

// LabelBound is the label of the projection's families: expected (the
// trend), earliest and latest (the dates at the growth's 95 % bounds), high
// (the servers at its upper bound).
const LabelBound = "bound"

// Values of LabelBound.
const (
	BoundExpected = "expected"
	BoundEarliest = "earliest"
	BoundLatest   = "latest"
	BoundHigh     = "high"
)

// The per-pool projection families.
var (
	PoolProjectedPeakRatio = Metric{Name: "kvwatch_pool_projected_peak_ratio", Type: Gauge, Unit: "ratio", Pool: true,
		Help: "The pool's planned daily peak of KV load now over its capacity: the trend of the daily peaks in serve's history at this instant (a flat pool's median peak); absent while the history is too short for a trend."}
	PoolProjectedWarningTimestamp = Metric{Name: "kvwatch_pool_projected_warning_timestamp_seconds", Type: Gauge, Unit: "seconds", Pool: true,
		Help:   "When the pool's planned daily peak reaches alerts.kv_usage_warning of its capacity, in Unix seconds: bound expected on the trend, earliest and latest at the growth's 95 % bounds; now when it is there already; absent beyond the horizon (90d), for a flat or shrinking pool and while the history is too short.",
		Labels: []string{LabelBound}}
	PoolProjectedFullTimestamp = Metric{Name: "kvwatch_pool_projected_full_timestamp_seconds", Type: Gauge, Unit: "seconds", Pool: true,
		Help:   "When the pool's planned daily peak reaches its capacity, in Unix seconds, with the bounds and absences of kvwatch_pool_projected_warning_timestamp_seconds.",
		Labels: []string{LabelBound}}
	PoolProjectedServersToAdd = Metric{Name: "kvwatch_pool_projected_servers_to_add", Type: Gauge, Unit: "", Pool: true,
		Help:   "Servers of the pool's median size to add so that its planned daily peak at the horizon (90d) stays at or under alerts.kv_usage_warning with its largest server drained (N-1): bound expected on the trend, high at the growth's upper 95 % bound; absent while the history is too short.",
		Labels: []string{LabelBound}}
)

// Projection lists the projection families in documentation order.
func Projection() []Metric {
	return []Metric{PoolProjectedPeakRatio, PoolProjectedWarningTimestamp, PoolProjectedFullTimestamp, PoolProjectedServersToAdd}
}
