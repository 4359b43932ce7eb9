package signal

// LabelSDConfig names a service discovery entry as config problems do
// (kubernetes_sd_configs[0], dns_sd_configs[1], http_sd_configs[0]) on
// the discovery families.
const LabelSDConfig = "sd_config"

// Families about serve's service discovery (present with
// kubernetes_sd_configs, dns_sd_configs or http_sd_configs). Each carries
// LabelSDConfig. Prometheus' own prometheus_sd_* families are served
// beside them.
var (
	DiscoveryTargets = Metric{Name: "kvwatch_discovery_targets", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelSDConfig},
		Help:   "Targets the service discovery entry adds, after relabeling, invalid and duplicate targets and its target_limit."}
	DiscoveryDroppedTargets = Metric{Name: "kvwatch_discovery_dropped_targets", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelSDConfig, LabelReason},
		Help:   "Targets of the entry's last update that serve does not scrape, by reason: relabeled (relabel_configs dropped them), invalid (an address, scheme, role or engine kvwatch cannot use), duplicate (another target has the name), over_limit (the update had more than target_limit targets: the entry keeps the targets it had)."}
	DiscoveryKubernetesUp = Metric{Name: "kvwatch_discovery_kubernetes_api_up", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelSDConfig},
		Help:   "1 if the last check of a kubernetes_sd_configs entry reached the API server and could list everything its role watches, else 0."}
	DiscoveryKubernetesFailures = Metric{Name: "kvwatch_discovery_kubernetes_api_failures_total", Type: Counter, Unit: "", Self: true,
		Labels: []string{LabelSDConfig, LabelReason},
		Help:   "Failed checks of a kubernetes_sd_configs entry's API server, by reason: unreachable, unauthorized, forbidden, other."}
	DiscoveryPodsWithoutIP = Metric{Name: "kvwatch_discovery_pods_without_ip", Type: Gauge, Unit: "", Self: true,
		Labels: []string{LabelSDConfig},
		Help:   "Pods a kubernetes_sd_configs entry of role pod selects that have no IP yet, so no target (counted up to 100)."}
)

// Discovery lists the service discovery families in documentation order.
func Discovery() []Metric {
	return []Metric{DiscoveryTargets, DiscoveryDroppedTargets, DiscoveryKubernetesUp, DiscoveryKubernetesFailures, DiscoveryPodsWithoutIP}
}
