package stack

import (
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/engine"
	"github.com/kvwatch/kvwatch/internal/signal"
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
	Scheme         string             `yaml:"scheme,omitempty"`
	HonorLabels    bool               `yaml:"honor_labels,omitempty"`
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
	c.ScrapeConfigs = append(c.ScrapeConfigs, engineScrapeConfigs(o)...)
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

// EngineJobPrefix starts the names of the jobs that scrape the engines
// themselves: engines-<role> for the config's targets of each role
// ("engines" for those without one), engines-file-sd for its file_sd
// files.
const EngineJobPrefix = "engines"

// engineScrapeConfigs are the jobs that scrape the engines of kvwatch's
// config directly, so that their own series (latency histograms and every
// family kvwatch does not normalize) sit beside serve's kvwatch_* ones, as
// the Kubernetes PodMonitor does. One job per role of the config's
// targets, each target labelled as kvwatch labels its series (server,
// role, cluster, pool) with its metrics path, scheme and query; and one
// job per file_sd entry over the same files, with the same labels (server
// is host:port, as kvwatch names those targets; the groups' engine and
// model labels are dropped). The engines' own labels win (honor_labels):
// SGLang's HiCache families carry a pool label of their own, vLLM's an
// engine label. Targets that need credentials, TLS settings or a proxy
// (EngineScrapeWarning) are left out: the stack's Prometheus does not have
// their secrets.
func engineScrapeConfigs(o Options) []promScrapeConfig {
	byRole := map[string][]promStaticConfig{}
	for _, t := range o.Config.Targets {
		sc, ok := engineTarget(t)
		if ok {
			byRole[t.Role] = append(byRole[t.Role], sc)
		}
	}
	var out []promScrapeConfig
	for _, role := range append([]string{""}, config.Roles...) {
		if len(byRole[role]) == 0 {
			continue
		}
		job := EngineJobPrefix
		if role != "" {
			job += "-" + role
		}
		out = append(out, promScrapeConfig{JobName: job, HonorLabels: true, StaticConfigs: byRole[role]})
	}
	n := 0
	for _, sd := range o.Config.FileSD {
		if !reflect.DeepEqual(sd.HTTPClientConfig, promcfg.HTTPClientConfig{}) {
			continue
		}
		n++
		job := EngineJobPrefix + "-file-sd"
		if n > 1 {
			job += "-" + strconv.Itoa(n)
		}
		relabel := []promRelabel{
			{SourceLabels: []string{"__address__"}, TargetLabel: signal.LabelServer},
			{Action: "labeldrop", Regex: signal.LabelEngine + "|" + signal.LabelModel},
		}
		// The config's global labels, for the groups that set none; then
		// the group's cluster under kvwatch's series name for it.
		for _, l := range seriesLabels {
			if v := o.Config.Global.Labels[l.key]; v != "" {
				relabel = append(relabel, promRelabel{SourceLabels: []string{l.key}, Regex: "^$", TargetLabel: l.key, Replacement: v})
			}
		}
		relabel = append(relabel,
			promRelabel{SourceLabels: []string{config.TargetLabelCluster}, Regex: "(.+)", TargetLabel: signal.LabelCluster},
			promRelabel{Action: "labeldrop", Regex: config.TargetLabelCluster})
		scheme := sd.Scheme
		if scheme == "http" {
			scheme = "" // Prometheus' default
		}
		out = append(out, promScrapeConfig{JobName: job, Scheme: scheme, HonorLabels: true,
			FileSDConfigs: []promFileSD{{Files: sd.Files, RefreshInterval: sd.RefreshInterval}}, RelabelConfigs: relabel})
	}
	return out
}

// seriesLabels are the target labels the engine jobs carry, each under
// the name kvwatch's own series give it: the config's cluster is
// kv_cluster, leaving cluster to the Prometheus (docs/metrics.md).
var seriesLabels = []struct{ key, series string }{
	{config.TargetLabelCluster, signal.LabelCluster},
	{config.TargetLabelPool, signal.LabelPool},
}

// engineTarget is t as a static target of its role's engine job; ok is
// false when scraping it needs more than its URL (credentials, TLS
// settings, a proxy, headers, a password in the URL).
func engineTarget(t config.Target) (promStaticConfig, bool) {
	u, err := config.ParseTargetURL(t.URL)
	if err != nil || u.User != nil || !reflect.DeepEqual(t.HTTPClientConfig, promcfg.HTTPClientConfig{}) {
		return promStaticConfig{}, false
	}
	path := u.Path
	if path == "" || path == "/" {
		path = engineMetricsPath(t.Engine)
	}
	labels := map[string]string{"__metrics_path__": path, signal.LabelServer: t.Name}
	if u.Scheme != "http" {
		labels["__scheme__"] = u.Scheme
	}
	for k, vs := range u.Query() {
		labels["__param_"+k] = vs[0]
	}
	if t.Role != "" {
		labels[signal.LabelRole] = t.Role
	}
	for _, l := range seriesLabels {
		if v := t.Labels[l.key]; v != "" {
			labels[l.series] = v
		}
	}
	if labels[signal.LabelServer] == "" {
		labels[signal.LabelServer] = u.Host
	}
	return promStaticConfig{Targets: []string{u.Host}, Labels: labels}, true
}

// engineMetricsPath is where engine serves its metrics when a target's URL
// gives no path: its adapter's path (trtllm-serve: /prometheus/metrics), or
// /metrics.
func engineMetricsPath(name string) string {
	if name != "" {
		if a, err := engine.NewRegistry().ByName(name); err == nil {
			if mp, ok := a.(engine.MetricsPath); ok {
				return mp.MetricsPath()
			}
		}
	}
	return "/metrics"
}

// EngineScrapeWarning is what `stack generate` says on stderr about the
// targets and file_sd entries of o's config that prometheus.yml does not
// scrape directly (engineScrapeConfigs): each with why; "" when there are
// none.
func EngineScrapeWarning(o Options) string {
	o = o.WithDefaults()
	var skipped []string
	for _, t := range o.Config.Targets {
		if _, ok := engineTarget(t); !ok {
			skipped = append(skipped, "target "+t.Name)
		}
	}
	for i, sd := range o.Config.FileSD {
		if !reflect.DeepEqual(sd.HTTPClientConfig, promcfg.HTTPClientConfig{}) {
			skipped = append(skipped, fmt.Sprintf("file_sd_configs[%d]", i))
		}
	}
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("note: prometheus.yml scrapes these engines only through kvwatch, not directly: %s (they need credentials, TLS settings or a proxy, "+
		"which the stack's Prometheus does not have); add a scrape job with them to see their own series beside kvwatch's (docs/stack.md, \"Files\").\n",
		strings.Join(skipped, ", "))
}
