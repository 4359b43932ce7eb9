package signal

// The HTTP paths of serve's health checks: the daemon answers on them, and
// the generated stack's Kubernetes probes ask them (the Prometheus
// convention, as Prometheus and Alertmanager answer on the same paths).
const (
	// PathHealthy answers 200 while serve runs: the liveness probe.
	PathHealthy = "/-/healthy"
	// PathReady answers 200 once serve's first round of scrapes is done,
	// 503 before: the readiness probe.
	PathReady = "/-/ready"
)
