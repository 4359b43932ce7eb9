package stack

import (
	"fmt"
	"io/fs"
	"net"
	"path"
	"strconv"
)

// Paths of the Grafana files inside the stack directory.
const (
	GrafanaINIFile      = "grafana/grafana.ini"
	GrafanaPasswordFile = "grafana/admin-password"
	GrafanaDashboardDir = "grafana/dashboards"
	GrafanaProvisioning = "grafana/provisioning"
)

// DataDir is where `stack up` keeps Prometheus, Alertmanager and Grafana
// data inside the stack directory; LogDir holds their logs.
const (
	DataDir = "data"
	LogDir  = "logs"
)

// generateMore returns the artifacts beyond Prometheus and Alertmanager:
// Grafana, systemd units, Kubernetes manifests, docker-compose and HA files.
func generateMore(o Options) (Files, error) {
	var out Files
	add := func(p string, mode fs.FileMode, b []byte, err error) error {
		if err != nil {
			return fmt.Errorf("generate %s: %w", p, err)
		}
		out = append(out, File{Path: p, Data: b, Mode: mode})
		return nil
	}
	for _, d := range Dashboards(o) {
		b, err := dashboardJSON(d)
		if err := add(path.Join(GrafanaDashboardDir, d.File), 0o644, b, err); err != nil {
			return nil, err
		}
	}
	b, err := marshalYAML(grafanaDatasources(o))
	if err := add(GrafanaProvisioning+"/datasources/kvwatch.yml", 0o644, b, err); err != nil {
		return nil, err
	}
	b, err = marshalYAML(grafanaDashboardProviders())
	if err := add(GrafanaProvisioning+"/dashboards/kvwatch.yml", 0o644, b, err); err != nil {
		return nil, err
	}
	if err := add(GrafanaINIFile, 0o644, grafanaINI(o), nil); err != nil {
		return nil, err
	}
	pw, err := adminPassword(o)
	if err := add(GrafanaPasswordFile, 0o600, pw, err); err != nil {
		return nil, err
	}
	b, err = marshalYAML(probeTargets(o))
	if err := add(ProbeTargetsFile, 0o644, b, err); err != nil {
		return nil, err
	}
	b, err = marshalJSON(upProcesses(o))
	if err := add(UpFile, 0o644, b, err); err != nil {
		return nil, err
	}
	for _, u := range systemdUnits(o) {
		b, err := u.render()
		if err := add("systemd/"+u.Name, 0o644, b, err); err != nil {
			return nil, err
		}
	}
	k8s, err := kubernetesFiles(o)
	if err != nil {
		return nil, err
	}
	out = append(out, k8s...)
	b, err = marshalYAML(composeFile(o))
	if err := add("docker-compose.yml", 0o644, b, err); err != nil {
		return nil, err
	}
	if o.HA {
		ha, err := haFiles(o)
		if err != nil {
			return nil, err
		}
		out = append(out, ha...)
	}
	return out, nil
}

// probeTargets is the file_sd list read by the probe job: the configured
// targets' URLs with their role, cluster and pool labels, to be extended
// by whatever discovers engines.
func probeTargets(o Options) []promStaticConfig {
	out := []promStaticConfig{}
	if !o.Probe {
		return out
	}
	for _, t := range o.Config.Targets {
		l := map[string]string{}
		for k, v := range t.Labels {
			l[k] = v
		}
		if t.Role != "" {
			l["role"] = t.Role
		}
		out = append(out, promStaticConfig{Targets: []string{t.URL}, Labels: l})
	}
	return out
}

// hostPort splits a validated host:port.
func hostPort(addr string) (string, int) {
	h, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return h, n
}

// withPort returns addr's host with port p.
func withPort(addr string, p int) string {
	h, _ := hostPort(addr)
	return net.JoinHostPort(h, strconv.Itoa(p))
}
