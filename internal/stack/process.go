package stack

import (
	"encoding/json"
	"fmt"
)

// Process is one program of the stack: what to run and how. The same
// table drives the systemd units, docker-compose and `stack up`, so their
// flags (retention, listen addresses) cannot disagree.
type Process struct {
	// Name is the component: prometheus, alertmanager or grafana.
	Name string `json:"name"`
	// Binaries are the executable names looked up on PATH, in order.
	Binaries []string `json:"binaries"`
	// Args are the command-line arguments; ${KVWATCH_STACK_DIR} stands for
	// the stack directory.
	Args []string `json:"args"`
	// Env are extra KEY=value environment variables, with the same placeholder.
	Env []string `json:"env,omitempty"`
	// Optional processes are skipped by `stack up` when not installed.
	Optional bool `json:"optional,omitempty"`
	// Install says how to get the binary.
	Install string `json:"install"`
	// Ready is the HTTP path that answers 200 once the process serves,
	// relative to Address.
	Address string `json:"address"`
	Ready   string `json:"ready"`
}

// UpFile is the process table `kvwatch stack up` runs.
const UpFile = "stack-up.json"

// paths says where a process finds its files: config dir and data dirs.
type paths struct {
	config                                    string // the stack directory
	promData, amData, grafanaData, grafanaLog string
}

func upPaths() paths {
	d := "${" + StackDirEnv + "}"
	return paths{config: d, promData: d + "/" + DataDir + "/prometheus", amData: d + "/" + DataDir + "/alertmanager",
		grafanaData: d + "/" + DataDir + "/grafana", grafanaLog: d + "/" + LogDir}
}

// promArgs are Prometheus's flags. Retention is a flag, not a config key.
func promArgs(o Options, configFile, data, listen string) []string {
	return []string{
		"--config.file=" + configFile,
		"--storage.tsdb.path=" + data,
		"--storage.tsdb.retention.time=" + o.RetentionTime.String(),
		"--storage.tsdb.retention.size=" + o.RetentionSize,
		"--web.listen-address=" + listen,
		"--web.external-url=http://" + listen + "/",
	}
}

// amArgs are Alertmanager's flags. Without peers, clustering is off (its
// default would listen on 0.0.0.0:9094).
func amArgs(configFile, data, listen, cluster string, peers []string) []string {
	args := []string{
		"--config.file=" + configFile,
		"--storage.path=" + data,
		"--web.listen-address=" + listen,
		"--cluster.listen-address=" + cluster,
	}
	for _, p := range peers {
		args = append(args, "--cluster.peer="+p)
	}
	return args
}

// grafanaEnv overrides Grafana's paths and reads the admin password file.
func grafanaEnv(p paths, passwordFile string) []string {
	return []string{
		StackDirEnv + "=" + p.config,
		"GF_PATHS_PROVISIONING=" + p.config + "/" + GrafanaProvisioning,
		"GF_PATHS_DATA=" + p.grafanaData,
		"GF_PATHS_LOGS=" + p.grafanaLog,
		"GF_SECURITY_ADMIN_PASSWORD__FILE=" + passwordFile,
	}
}

// upProcesses is the table `stack up` runs, on the addresses of o.
func upProcesses(o Options) []Process {
	p := upPaths()
	return []Process{
		{Name: "prometheus", Binaries: []string{"prometheus"},
			Args:    promArgs(o, p.config+"/prometheus.yml", p.promData, o.PrometheusAddress),
			Install: "apt-get install prometheus (Debian/Ubuntu), or put the prometheus binary on PATH",
			Address: o.PrometheusAddress, Ready: "/-/ready"},
		{Name: "alertmanager", Binaries: []string{"prometheus-alertmanager", "alertmanager"},
			Args:    amArgs(p.config+"/alertmanager.yml", p.amData, o.AlertmanagerAddress, "", nil),
			Install: "apt-get install prometheus-alertmanager (Debian/Ubuntu), or put the alertmanager binary on PATH",
			Address: o.AlertmanagerAddress, Ready: "/-/ready"},
		{Name: "grafana", Binaries: []string{"grafana-server"}, Optional: true,
			Args:    []string{"--homepath=/usr/share/grafana", "--config=" + p.config + "/" + GrafanaINIFile},
			Env:     grafanaEnv(p, p.config+"/"+GrafanaPasswordFile),
			Install: "install Grafana from Grafana's own Debian repository (package grafana); Debian does not ship it",
			Address: o.GrafanaAddress, Ready: "/api/health"},
	}
}

func marshalJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal json: %w", err)
	}
	return append(b, '\n'), nil
}
