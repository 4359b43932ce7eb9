package signal

import (
	"net"
	"strconv"
)

// DefaultPort is serve's default port: one that neither the DCGM exporter
// (9400) nor node_exporter (9100) uses. Serve listens on it, the generated
// stack scrapes it and its Kubernetes Service exposes it.
const DefaultPort = 9477

// DefaultListenAddress is serve's default address: loopback only, on
// DefaultPort.
var DefaultListenAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort))

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
