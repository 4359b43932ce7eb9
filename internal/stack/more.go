package stack

// generateMore returns the artifacts beyond Prometheus and Alertmanager.
func generateMore(o Options) (Files, error) { return nil, nil }
