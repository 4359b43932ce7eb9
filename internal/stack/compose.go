package stack

import (
	"fmt"
)

// The docker-compose schema, as far as the stack uses it.
type composeProject struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]struct{}       `yaml:"volumes"`
}

type composeService struct {
	Image       string   `yaml:"image"`
	Entrypoint  []string `yaml:"entrypoint,omitempty"`
	Command     []string `yaml:"command,omitempty"`
	Environment []string `yaml:"environment,omitempty"`
	Volumes     []string `yaml:"volumes"`
	NetworkMode string   `yaml:"network_mode"`
	Restart     string   `yaml:"restart"`
	User        string   `yaml:"user,omitempty"`
	ReadOnly    bool     `yaml:"read_only"`
	SecurityOpt []string `yaml:"security_opt"`
	DependsOn   []string `yaml:"depends_on,omitempty"`
}

// Container images of the compose file, pinned to the versions of the test
// matrix (docs/stack.md, "Version matrix"): Prometheus 3.16 runs the full
// e2e here (built from its Go module); the dashboards pass the schema of
// Grafana 13.2 (@grafana/schema 13.2.3). No container engine runs here, so
// the images themselves are not pulled by the tests.
const (
	imagePrometheus   = "prom/prometheus:v3.16.0"
	imageAlertmanager = "prom/alertmanager:v0.35.0"
	imageGrafana      = "grafana/grafana-oss:13.2.3"
	// No kvwatch image is published: the kvwatch service runs the host's
	// own binary, mounted read-only into a plain Debian image, from where
	// the Debian package installs it or from $KVWATCH_BINARY.
	imageKVWatchBase = "debian:12-slim"
	kvwatchBinary    = "${KVWATCH_BINARY:-/usr/bin/kvwatch}"
)

// composeFile returns docker-compose.yml. Every service uses the host
// network so the loopback addresses of the generated configs work
// unchanged; the stack directory is mounted read-only at /stack.
func composeFile(o Options) composeProject {
	c := func(p string) string { return "/stack/" + p }
	cp := paths{config: "/stack", promData: "/prometheus", amData: "/alertmanager", grafanaData: "/var/lib/grafana", grafanaLog: "/var/lib/grafana/log"}
	base := func(image string) composeService {
		return composeService{Image: image, NetworkMode: "host", Restart: "on-failure", ReadOnly: true,
			SecurityOpt: []string{"no-new-privileges:true"}, Volumes: []string{"./:/stack:ro"}}
	}
	kv := base(imageKVWatchBase)
	kv.Volumes = append(kv.Volumes, kvwatchBinary+":/usr/bin/kvwatch:ro")
	kv.User = "65534:65534"
	kv.Entrypoint = []string{"/usr/bin/kvwatch"}
	kv.Command = []string{"serve", "--config.file=" + c("kvwatch.yml"), "--web.listen-address=" + o.KVWatchAddress}
	prom := base(imagePrometheus)
	prom.Command = promArgs(o, c("prometheus.yml"), cp.promData, o.PrometheusAddress)
	prom.Volumes = append(prom.Volumes, "prometheus-data:"+cp.promData)
	prom.DependsOn = []string{"kvwatch"}
	am := base(imageAlertmanager)
	am.Command = amArgs(c("alertmanager.yml"), cp.amData, o.AlertmanagerAddress, "", nil)
	am.Volumes = append(am.Volumes, "alertmanager-data:"+cp.amData)
	gr := base(imageGrafana)
	gr.Environment = grafanaEnv(cp, c(GrafanaPasswordFile))
	gr.Environment = append(gr.Environment, "GF_PATHS_CONFIG="+c(GrafanaINIFile))
	gr.Volumes = append(gr.Volumes, "grafana-data:"+cp.grafanaData, "grafana-tmp:/tmp")
	gr.DependsOn = []string{"prometheus"}
	return composeProject{
		Services: map[string]composeService{"kvwatch": kv, "prometheus": prom, "alertmanager": am, "grafana": gr},
		Volumes:  map[string]struct{}{"prometheus-data": {}, "alertmanager-data": {}, "grafana-data": {}, "grafana-tmp": {}},
	}
}

// haFiles returns the HA variant: two Prometheus replicas that differ only
// in their `replica` external label, both sending to two clustered
// Alertmanagers, with the systemd units to run them on one host (move
// addresses to run them on two).
func haFiles(o Options) (Files, error) {
	_, pp := hostPort(o.PrometheusAddress)
	_, ap := hostPort(o.AlertmanagerAddress)
	proms := []string{o.PrometheusAddress, withPort(o.PrometheusAddress, pp+1)}
	ams := []string{o.AlertmanagerAddress, withPort(o.AlertmanagerAddress, ap+2)}
	clusters := []string{withPort(o.AlertmanagerAddress, ap+1), withPort(o.AlertmanagerAddress, ap+3)}
	d := o.InstallDir
	var out Files
	for i := range 2 {
		n := fmt.Sprint(i + 1)
		po := o
		po.PrometheusAddress = proms[i]
		pc := prometheusConfig(po, n, ams...)
		for j := range pc.RuleFiles {
			pc.RuleFiles[j] = "../" + pc.RuleFiles[j]
		}
		for j := range pc.ScrapeConfigs {
			for k := range pc.ScrapeConfigs[j].FileSDConfigs {
				for l, f := range pc.ScrapeConfigs[j].FileSDConfigs[k].Files {
					pc.ScrapeConfigs[j].FileSDConfigs[k].Files[l] = "../" + f
				}
			}
		}
		b, err := marshalYAML(pc)
		if err != nil {
			return nil, err
		}
		// The HA configs sit in ha/, so their rule_files point one level up.
		cfg := "ha/prometheus-" + n + ".yml"
		out = append(out, File{Path: cfg, Data: b, Mode: 0o644})
		units := []unit{
			{Name: "kvwatch-prometheus-" + n + ".service", Description: "Prometheus replica " + n + " for kvwatch",
				Doc: "https://prometheus.io/docs/", After: []string{UnitKVWatch}, State: "kvwatch-prometheus-" + n, NoSIGKILL: true,
				Exec: append([]string{"/usr/bin/prometheus"}, promArgs(po, d+"/"+cfg, "/var/lib/kvwatch-prometheus-"+n, proms[i])...)},
			{Name: "kvwatch-alertmanager-" + n + ".service", Description: "Alertmanager " + n + " (clustered) for kvwatch",
				Doc: "https://prometheus.io/docs/alerting/latest/alertmanager/", State: "kvwatch-alertmanager-" + n,
				Exec: append([]string{"/usr/bin/prometheus-alertmanager"},
					amArgs(d+"/alertmanager.yml", "/var/lib/kvwatch-alertmanager-"+n, ams[i], clusters[i], []string{clusters[1-i]})...)},
		}
		for _, u := range units {
			b, err := u.render()
			if err != nil {
				return nil, err
			}
			out = append(out, File{Path: "ha/systemd/" + u.Name, Data: b, Mode: 0o644})
		}
	}
	return out, nil
}
