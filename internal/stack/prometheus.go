package stack

import (
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
)

// Prometheus's config schema, as far as the stack uses it (our own types:
// prometheus/config marshals every default and secrets as "<secret>").
// Only keys that Prometheus 2.42 and 3.x both accept are used.
type promConfig struct {
	Global        promGlobal         `yaml:"global"`
	RuleFiles     []string           `yaml:"rule_files"`
	Alerting      promAlerting       `yaml:"alerting"`
	ScrapeConfigs []promScrapeConfig `yaml:"scrape_configs"`
	RemoteWrite   []promRemoteWrite  `yaml:"remote_write,omitempty"`
}

type promGlobal struct {
	ScrapeInterval     model.Duration    `yaml:"scrape_interval"`
	ScrapeTimeout      model.Duration    `yaml:"scrape_timeout"`
	EvaluationInterval model.Duration    `yaml:"evaluation_interval"`
	ExternalLabels     map[string]string `yaml:"external_labels,omitempty"`
}

type promAlerting struct {
	AlertRelabelConfigs []promRelabel      `yaml:"alert_relabel_configs,omitempty"`
	Alertmanagers       []promAlertmanager `yaml:"alertmanagers"`
}

type promAlertmanager struct {
	APIVersion    string             `yaml:"api_version"`
	StaticConfigs []promStaticConfig `yaml:"static_configs"`
}

type promStaticConfig struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels,omitempty"`
}

type promFileSD struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval,omitempty"`
}

type promScrapeConfig struct {
	JobName        string             `yaml:"job_name"`
	ScrapeInterval model.Duration     `yaml:"scrape_interval,omitempty"`
	ScrapeTimeout  model.Duration     `yaml:"scrape_timeout,omitempty"`
	MetricsPath    string             `yaml:"metrics_path,omitempty"`
	StaticConfigs  []promStaticConfig `yaml:"static_configs,omitempty"`
	FileSDConfigs  []promFileSD       `yaml:"file_sd_configs,omitempty"`
	RelabelConfigs []promRelabel      `yaml:"relabel_configs,omitempty"`
}

type promRelabel struct {
	Action       string   `yaml:"action,omitempty"`
	Regex        string   `yaml:"regex,omitempty"`
	SourceLabels []string `yaml:"source_labels,omitempty"`
	TargetLabel  string   `yaml:"target_label,omitempty"`
	Replacement  string   `yaml:"replacement,omitempty"`
}

type promRemoteWrite struct {
	URL string `yaml:"url"`
}

// External labels of the HA replicas (see prometheusConfig).
const (
	HAReplicaLabel = "replica"
	HAClusterLabel = "ha_cluster"
)

// ProbeTargetsFile is the file_sd file the probe job reads its targets from.
const ProbeTargetsFile = "probe-targets/targets.yml"

// prometheusConfig returns prometheus.yml. replica, when set (HA), becomes
// the external label that tells the replicas apart; alertmanagers are all
// the Alertmanagers the config sends to.
func prometheusConfig(o Options, replica string, alertmanagers ...string) promConfig {
	if len(alertmanagers) == 0 {
		alertmanagers = []string{o.AlertmanagerAddress}
	}
	timeout := o.ScrapeInterval
	if timeout > model.Duration(10e9) {
		timeout = model.Duration(10e9)
	}
	c := promConfig{
		Global: promGlobal{
			ScrapeInterval:     o.ScrapeInterval,
			ScrapeTimeout:      timeout,
			EvaluationInterval: o.EvaluationInterval,
		},
		RuleFiles: []string{RecordingRulesFile, AlertRulesFile},
		Alerting: promAlerting{Alertmanagers: []promAlertmanager{{
			APIVersion: "v2", StaticConfigs: []promStaticConfig{{Targets: alertmanagers}},
		}}},
		ScrapeConfigs: []promScrapeConfig{
			{JobName: "kvwatch", StaticConfigs: []promStaticConfig{{Targets: []string{o.KVWatchAddress}}}},
			{JobName: "prometheus", StaticConfigs: []promStaticConfig{{Targets: []string{o.PrometheusAddress}}}},
			{JobName: "alertmanager", StaticConfigs: []promStaticConfig{{Targets: alertmanagers}}},
		},
	}
	if replica != "" {
		// replica tells the replicas apart (Thanos --query.replica-label,
		// Mimir's ha_replica_label); HAClusterLabel names the pair for
		// Mimir's HA tracker (its ha_cluster_label). Not "cluster", which
		// multi-cluster setups keep for the Kubernetes cluster the
		// Prometheus runs in (kvwatch's inference cluster is kv_cluster):
		// the pair's name must not take its place (docs/stack.md, "HA").
		c.Global.ExternalLabels = map[string]string{HAReplicaLabel: replica, HAClusterLabel: o.HAClusterName}
		// Alerts carry external labels; drop replica so the Alertmanagers
		// see one alert from both replicas and deduplicate it.
		c.Alerting.AlertRelabelConfigs = []promRelabel{{Action: "labeldrop", Regex: "replica"}}
	}
	if o.Probe {
		c.ScrapeConfigs = append(c.ScrapeConfigs, promScrapeConfig{
			JobName:       "kvwatch-probe",
			MetricsPath:   "/probe",
			FileSDConfigs: []promFileSD{{Files: []string{ProbeTargetsFile}, RefreshInterval: dur("1m")}},
			RelabelConfigs: append(probeDropServeTargets(o),
				promRelabel{SourceLabels: []string{"__address__"}, TargetLabel: "__param_target"},
				promRelabel{SourceLabels: []string{"__param_target"}, TargetLabel: "instance"},
				promRelabel{TargetLabel: "__address__", Replacement: o.KVWatchAddress},
			),
		})
	}
	if o.RemoteWriteURL != "" {
		c.RemoteWrite = []promRemoteWrite{{URL: o.RemoteWriteURL}}
	}
	return c
}

// probeTargets is the file_sd list read by the probe job, generated empty:
// it is for engines that something other than kvwatch's config discovers.
// kvwatch's own targets never go there: serve already scrapes them, and
// probing them too would count every server twice (issue 15 item 3).
func probeTargets(Options) []promStaticConfig { return []promStaticConfig{} }

// probeDropServeTargets is the probe job's guard against double counting:
// a relabel rule dropping any probe target that is one of serve's own
// configured targets (same host and port), should someone list it in the
// probe targets file. Targets added to kvwatch.yml later are not covered:
// regenerate the stack.
func probeDropServeTargets(o Options) []promRelabel {
	var urls []string
	for _, t := range o.Config.Targets {
		u, err := url.Parse(t.URL)
		if err != nil || u.Host == "" {
			continue // config.Load refuses such a URL
		}
		// The same server however it is written: with or without the
		// scheme, with any path.
		urls = append(urls, "("+regexp.QuoteMeta(u.Scheme+"://")+")?"+regexp.QuoteMeta(u.Host)+"(/.*)?")
	}
	if len(urls) == 0 {
		return nil
	}
	sort.Strings(urls)
	return []promRelabel{{Action: "drop", SourceLabels: []string{"__address__"}, Regex: strings.Join(urls, "|")}}
}
