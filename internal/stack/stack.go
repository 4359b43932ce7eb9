// Package stack generates a complete monitoring stack for kvwatch: a
// Prometheus config, recording and alert rules with their promtool unit
// tests, an Alertmanager config, Grafana provisioning and dashboards, systemd
// units, Kubernetes manifests and a docker-compose file. Every artifact is
// built as a typed value and marshalled last; every metric name comes from
// package signal. It also supervises the generated stack's processes (Up) and
// installs its systemd units (Install). It does not download or package
// Prometheus, Alertmanager or Grafana: it finds them on PATH.
package stack

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// DefaultKVWatchAddress is where the stack expects `kvwatch serve`: its
// default listen address.
var DefaultKVWatchAddress = signal.DefaultListenAddress

// The defaults of Options (see WithDefaults). Every component listens on
// loopback unless told otherwise.
const (
	DefaultPrometheusAddress   = "127.0.0.1:9090"
	DefaultAlertmanagerAddress = "127.0.0.1:9093"
	DefaultGrafanaAddress      = "127.0.0.1:3000"
	DefaultInstallDir          = "/etc/kvwatch/stack"
	DefaultRunbookURL          = "https://github.com/kvwatch/kvwatch/blob/main/docs/runbook.md"
	// DefaultRetentionTime is Prometheus' own default; DefaultRetentionSize
	// bounds the disk beside it.
	DefaultRetentionTime = 15 * 24 * time.Hour
	DefaultRetentionSize = "10GB"
	// DefaultScrapeInterval is how often the stack's Prometheus scrapes
	// kvwatch.
	DefaultScrapeInterval = 15 * time.Second
	DefaultKVFullMinUsage = 0.5
	DefaultKVFullFor      = 5 * time.Minute
	DefaultHAClusterName  = "kvwatch"
	DefaultNamespace      = "monitoring"
)

// Options says what to generate. Zero fields take the defaults listed on
// each field (see WithDefaults).
type Options struct {
	// Config is kvwatch's config: targets (for probe mode) and the alert
	// thresholds (Config.Alerts, the one source every face reads). Default
	// config.Default().
	Config *config.Config
	// ConfigFile is the raw kvwatch config file copied into the stack as
	// kvwatch.yml so the kvwatch unit and container run with it; nil writes
	// a kvwatch.yml holding only the probe allow list.
	ConfigFile []byte

	// KVWatchAddress is host:port of `kvwatch serve`. Default
	// DefaultKVWatchAddress.
	KVWatchAddress string
	// PrometheusAddress is Prometheus's --web.listen-address. Default
	// DefaultPrometheusAddress.
	PrometheusAddress string
	// AlertmanagerAddress is Alertmanager's --web.listen-address. Default
	// DefaultAlertmanagerAddress.
	AlertmanagerAddress string
	// GrafanaAddress is Grafana's http_addr:http_port. Default
	// DefaultGrafanaAddress.
	GrafanaAddress string

	// RetentionTime is Prometheus's --storage.tsdb.retention.time. Default
	// DefaultRetentionTime.
	RetentionTime model.Duration
	// RetentionSize is Prometheus's --storage.tsdb.retention.size, e.g.
	// "10GB". Default DefaultRetentionSize.
	RetentionSize string
	// RemoteWriteURL, when set, adds a remote_write to a long-term store
	// (Mimir, Thanos Receive, VictoriaMetrics).
	RemoteWriteURL string

	// ScrapeInterval is how often Prometheus scrapes kvwatch. Default
	// DefaultScrapeInterval.
	ScrapeInterval model.Duration
	// EvaluationInterval is how often rules are evaluated. Default: the
	// kvwatch config's global.evaluation_interval (15s).
	EvaluationInterval model.Duration
	// KVFullMinUsage (ratio 0–1) keeps KVCacheFullSoon quiet while the cache
	// is emptier than this, so a short ramp on an idle server does not page.
	// Default DefaultKVFullMinUsage.
	KVFullMinUsage float64
	// KVFullFor is the for-duration of KVCacheFullSoon. Default
	// DefaultKVFullFor.
	KVFullFor model.Duration

	// Receivers say where Alertmanager sends notifications.
	Receivers Receivers

	// HA adds the files of a two-replica Prometheus and a clustered
	// Alertmanager pair under ha/.
	HA bool
	// Agent adds the agent-mode files (agent.go): collectors, a ruler.
	Agent AgentOptions
	// HAClusterName is the replicas' ha_cluster external label, the HA
	// pair's name for Mimir's HA tracker. Default DefaultHAClusterName.
	HAClusterName string
	// Probe adds a Prometheus job that scrapes every configured target
	// through kvwatch's /probe endpoint (one series set per target, labelled
	// by Prometheus), for fleets that discover targets with Prometheus.
	Probe bool

	// InstallDir is where the systemd units expect the generated files.
	// Default DefaultInstallDir.
	InstallDir string
	// RunbookURL is the base URL of docs/runbook.md; alert runbook_url
	// annotations point at its anchors.
	RunbookURL string
	// Namespace is the Kubernetes namespace of the manifests. Default
	// DefaultNamespace.
	Namespace string
	// KubernetesLabels are added to every Kubernetes object, e.g.
	// release=kube-prometheus-stack for the Prometheus Operator's default
	// serviceMonitorSelector, podMonitorSelector and ruleSelector.
	KubernetesLabels map[string]string
	// Image is the kvwatch container image. Default DefaultImage(): the
	// tag of this binary's version, never latest.
	Image string
	// GrafanaAdminPassword is written to grafana/admin-password; empty
	// generates a random one (an existing file is kept by Files.Write).
	GrafanaAdminPassword string

	// secrets are the inline secrets of ConfigFile (secrets.go), found by
	// Generate.
	secrets []config.InlineSecret
}

// Receivers are Alertmanager notification targets. With none set, alerts are
// kept in Alertmanager (visible in its UI and API) and sent nowhere.
type Receivers struct {
	// WebhookURLs receive Alertmanager's webhook JSON.
	WebhookURLs []string
	// EmailTo, EmailFrom and EmailSmarthost (host:port) configure e-mail.
	EmailTo        string
	EmailFrom      string
	EmailSmarthost string
	// SlackWebhookURL and SlackChannel configure Slack.
	SlackWebhookURL string
	SlackChannel    string
	// WatchdogURL receives the always-firing KVWatchWatchdog alert every
	// minute (a dead man's switch such as a heartbeat check that pages when
	// the pings stop). Empty: the watchdog is visible in Alertmanager only.
	WatchdogURL string
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.Config == nil {
		o.Config = config.Default()
	}
	setS := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	setD := func(p *model.Duration, v time.Duration) {
		if *p == 0 {
			*p = model.Duration(v)
		}
	}
	setS(&o.KVWatchAddress, DefaultKVWatchAddress)
	setS(&o.PrometheusAddress, DefaultPrometheusAddress)
	setS(&o.AlertmanagerAddress, DefaultAlertmanagerAddress)
	setS(&o.GrafanaAddress, DefaultGrafanaAddress)
	setD(&o.RetentionTime, DefaultRetentionTime)
	setS(&o.RetentionSize, DefaultRetentionSize)
	setD(&o.ScrapeInterval, DefaultScrapeInterval)
	// The stack's Prometheus evaluates the rules as often as serve's
	// embedded rules do (global.evaluation_interval).
	setD(&o.EvaluationInterval, time.Duration(o.Config.Global.EvaluationInterval))
	setD(&o.KVFullFor, DefaultKVFullFor)
	if o.KVFullMinUsage == 0 {
		o.KVFullMinUsage = DefaultKVFullMinUsage
	}
	setS(&o.InstallDir, DefaultInstallDir)
	setS(&o.HAClusterName, DefaultHAClusterName)
	setS(&o.RunbookURL, DefaultRunbookURL)
	setS(&o.Namespace, DefaultNamespace)
	setS(&o.Image, DefaultImage())
	if len(o.Receivers.WebhookURLs) == 0 && len(o.Config.Alerting.Webhooks) > 0 {
		o.Receivers.WebhookURLs = append([]string(nil), o.Config.Alerting.Webhooks...)
	}
	return o
}

// validate reports every problem in o (after defaults) at once.
func (o Options) validate() error {
	var errs []error
	for _, a := range []struct{ flag, v string }{
		{"--kvwatch.address", o.KVWatchAddress}, {"--prometheus.listen-address", o.PrometheusAddress},
		{"--alertmanager.listen-address", o.AlertmanagerAddress}, {"--grafana.listen-address", o.GrafanaAddress},
	} {
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:9090", a.flag, a.v))
		}
	}
	urls := append([]string{}, o.Receivers.WebhookURLs...)
	if o.RemoteWriteURL != "" {
		urls = append(urls, o.RemoteWriteURL)
	}
	if o.Receivers.SlackWebhookURL != "" {
		urls = append(urls, o.Receivers.SlackWebhookURL)
	}
	if o.Receivers.WatchdogURL != "" {
		urls = append(urls, o.Receivers.WatchdogURL)
	}
	for _, s := range urls {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("URL %q: want an absolute http(s) URL", s))
		}
	}
	r := o.Receivers
	if (r.EmailTo != "") != (r.EmailSmarthost != "") || (r.EmailTo != "" && r.EmailFrom == "") {
		errs = append(errs, errors.New("e-mail receiver: set --alertmanager.email-to, --alertmanager.email-from and --alertmanager.email-smarthost together"))
	}
	if o.KVFullMinUsage <= 0 || o.KVFullMinUsage >= 1 {
		errs = append(errs, fmt.Errorf("KV full minimum usage %g: want a ratio in (0, 1)", o.KVFullMinUsage))
	}
	if a := o.Config.Alerts; a.KVUsageWarning >= a.KVUsageCritical {
		errs = append(errs, fmt.Errorf("alerts: kv_usage_warning %g must be below kv_usage_critical %g", a.KVUsageWarning, a.KVUsageCritical))
	}
	// The fast window must hold two of Prometheus' samples, as it must
	// hold two of serve's (config.validate).
	if w, s := o.Config.Alerts.KVUsageExhaustedWindow, o.ScrapeInterval; w < 2*s {
		errs = append(errs, fmt.Errorf("alerts: kv_usage_exhausted_window %s holds fewer than two of Prometheus' scrapes of kvwatch (every %s), "+
			"so KVCacheExhausted would page on one sample; raise it to at least %s", w, s, 2*s))
	}
	errs = append(errs, validateK8sLabels(o.KubernetesLabels)...)
	if strings.ContainsAny(o.HAClusterName, "\n\"") {
		errs = append(errs, fmt.Errorf("--ha.cluster-name %q: want a plain name, e.g. kvwatch-eu1", o.HAClusterName))
	}
	if !filepath.IsAbs(o.InstallDir) {
		errs = append(errs, fmt.Errorf("install dir %q: want an absolute path, e.g. %s", o.InstallDir, DefaultInstallDir))
	}
	return errors.Join(errs...)
}

// File is one generated artifact.
type File struct {
	// Path is relative to the stack directory, with forward slashes.
	Path string
	Data []byte
	// Mode is the file's permission bits.
	Mode fs.FileMode
	// Keep leaves the file alone when it exists (the Grafana admin
	// password, generated at random the first time).
	Keep bool
}

// Files are the generated artifacts, sorted by path.
type Files []File

// Get returns the file at path, or nil.
func (fs Files) Get(path string) []byte {
	for _, f := range fs {
		if f.Path == path {
			return f.Data
		}
	}
	return nil
}

// Paths lists the paths of fs in order.
func (fs Files) Paths() []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Path
	}
	return out
}

// Write writes fs under dir, creating directories as needed. Existing
// files are replaced and take the file's mode before they are written (a
// secret never lands in a file others can read); other files in dir are
// left alone. A Keep file is not overwritten when it exists, so a
// regenerated stack keeps its Grafana admin password.
func (fs Files) Write(dir string) error {
	for _, f := range fs {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write stack: %w", err)
		}
		if _, err := os.Stat(p); err == nil {
			if f.Keep {
				continue
			}
			if err := os.Chmod(p, f.Mode); err != nil {
				return fmt.Errorf("write stack: %w", err)
			}
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return fmt.Errorf("write stack: %w", err)
		}
	}
	return nil
}

// Generate builds every artifact of the stack from o.
func Generate(o Options) (Files, error) {
	o = o.WithDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("stack options: %w", err)
	}
	var err error
	if o.secrets, err = configSecrets(o); err != nil {
		return nil, err
	}
	var out Files
	add := func(path string, mode fs.FileMode, gen func() ([]byte, error)) error {
		b, err := gen()
		if err != nil {
			return fmt.Errorf("generate %s: %w", path, err)
		}
		out = append(out, File{Path: path, Data: b, Mode: mode})
		return nil
	}
	steps := []struct {
		path string
		mode fs.FileMode
		gen  func() ([]byte, error)
	}{
		{"prometheus.yml", 0o644, func() ([]byte, error) { return marshalYAML(prometheusConfig(o, "")) }},
		{RecordingRulesFile, 0o644, func() ([]byte, error) { return marshalYAML(RecordingRules(o)) }},
		{AlertRulesFile, 0o644, func() ([]byte, error) { return marshalYAML(AlertRules(o)) }},
		{AlertTestsFile, 0o644, func() ([]byte, error) { return marshalYAML(ruleTests(o)) }},
		{AlertFastTestsFile, 0o644, func() ([]byte, error) { return marshalYAML(fastRuleTests(o)) }},
		{AlertProjectionTestsFile, 0o644, func() ([]byte, error) { return marshalYAML(projectionTests(o)) }},
		{"alertmanager.yml", 0o644, func() ([]byte, error) { return marshalYAML(alertmanagerConfig(o)) }},
		{configFileName, configMode(o.secrets), func() ([]byte, error) { return kvwatchConfig(o) }},
		{ProbeTargetsFile, 0o644, func() ([]byte, error) { return marshalYAML(probeTargets(o)) }},
		{UpFile, 0o644, func() ([]byte, error) { return marshalJSON(upProcesses(o)) }},
		{"docker-compose.yml", 0o644, func() ([]byte, error) { return marshalYAML(composeFile(o)) }},
	}
	for _, s := range steps {
		if err := add(s.path, s.mode, s.gen); err != nil {
			return nil, err
		}
	}
	for _, u := range systemdUnits(o) {
		if err := add("systemd/"+u.Name, 0o644, u.render); err != nil {
			return nil, err
		}
	}
	parts := []func(Options) (Files, error){grafanaFiles, kubernetesFiles}
	if o.HA {
		parts = append(parts, haFiles)
	}
	for _, part := range parts {
		fs, err := part(o)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	if o.Agent.Enabled {
		agent, err := agentFiles(o)
		if err != nil {
			return nil, err
		}
		out = append(out, agent...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// kvwatchConfig returns the config file kvwatch runs with in the stack.
func kvwatchConfig(o Options) ([]byte, error) {
	if o.ConfigFile != nil {
		return o.ConfigFile, nil
	}
	var b strings.Builder
	b.WriteString("# kvwatch config for the generated stack; add targets here (see docs/configuration.md).\n")
	b.WriteString("targets: []\n")
	return []byte(b.String()), nil
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
