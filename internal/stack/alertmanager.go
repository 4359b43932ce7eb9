package stack

import (
	"fmt"
	"net"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Alertmanager's config schema, as far as the stack uses it. These are our
// own types rather than alertmanager/config's: that package marshals
// secrets (Slack webhook URLs, passwords) as "<secret>", which would lose them.
type amConfig struct {
	Global       amGlobal     `yaml:"global"`
	Route        amRoute      `yaml:"route"`
	InhibitRules []amInhibit  `yaml:"inhibit_rules"`
	Receivers    []amReceiver `yaml:"receivers"`
}

type amGlobal struct {
	ResolveTimeout model.Duration `yaml:"resolve_timeout"`
	SMTPFrom       string         `yaml:"smtp_from,omitempty"`
	SMTPSmarthost  string         `yaml:"smtp_smarthost,omitempty"`
	SMTPRequireTLS *bool          `yaml:"smtp_require_tls,omitempty"`
}

type amRoute struct {
	Receiver       string         `yaml:"receiver"`
	GroupBy        []string       `yaml:"group_by,omitempty"`
	Matchers       []amMatcher    `yaml:"matchers,omitempty"`
	Continue       bool           `yaml:"continue,omitempty"`
	GroupWait      model.Duration `yaml:"group_wait,omitempty"`
	GroupInterval  model.Duration `yaml:"group_interval,omitempty"`
	RepeatInterval model.Duration `yaml:"repeat_interval,omitempty"`
	Routes         []amRoute      `yaml:"routes,omitempty"`
}

type amInhibit struct {
	SourceMatchers []amMatcher `yaml:"source_matchers"`
	TargetMatchers []amMatcher `yaml:"target_matchers"`
	Equal          []string    `yaml:"equal"`
}

type amReceiver struct {
	Name           string      `yaml:"name"`
	WebhookConfigs []amWebhook `yaml:"webhook_configs,omitempty"`
	EmailConfigs   []amEmail   `yaml:"email_configs,omitempty"`
	SlackConfigs   []amSlack   `yaml:"slack_configs,omitempty"`
}

type amWebhook struct {
	URL          string `yaml:"url"`
	SendResolved bool   `yaml:"send_resolved"`
}

type amEmail struct {
	To           string `yaml:"to"`
	SendResolved bool   `yaml:"send_resolved"`
}

type amSlack struct {
	APIURL       string `yaml:"api_url"`
	Channel      string `yaml:"channel,omitempty"`
	SendResolved bool   `yaml:"send_resolved"`
	Title        string `yaml:"title"`
	Text         string `yaml:"text"`
}

// Receiver names of the generated Alertmanager config.
const (
	ReceiverDefault  = "kvwatch-default"
	ReceiverCritical = "kvwatch-critical"
	ReceiverWarning  = "kvwatch-warning"
	ReceiverWatchdog = "kvwatch-watchdog"
)

// amMatcher is one label matcher of a route or inhibit rule: written as
// Alertmanager's `name="value"` string in alertmanager.yml, and as the
// Prometheus Operator's structured matcher in the AlertmanagerConfig.
type amMatcher struct {
	Name, Op, Value string
}

func matcher(name, op, value string) amMatcher { return amMatcher{Name: name, Op: op, Value: value} }

func (m amMatcher) String() string { return fmt.Sprintf("%s%s%q", m.Name, m.Op, m.Value) }

// MarshalYAML writes m as Alertmanager's matcher string.
func (m amMatcher) MarshalYAML() (any, error) { return m.String(), nil }

// alertmanagerConfig returns Alertmanager's config: a route tree by
// severity, grouped by cluster, pool and server; KV warnings inhibited
// while the critical fires on the same server.
func alertmanagerConfig(o Options) amConfig {
	r := o.Receivers
	integrations := func(name string) amReceiver {
		rc := amReceiver{Name: name}
		for _, u := range r.WebhookURLs {
			rc.WebhookConfigs = append(rc.WebhookConfigs, amWebhook{URL: u, SendResolved: true})
		}
		if r.EmailTo != "" {
			rc.EmailConfigs = append(rc.EmailConfigs, amEmail{To: r.EmailTo, SendResolved: true})
		}
		if r.SlackWebhookURL != "" {
			rc.SlackConfigs = append(rc.SlackConfigs, amSlack{
				APIURL: r.SlackWebhookURL, Channel: r.SlackChannel, SendResolved: true,
				Title: `[{{ .Status | toUpper }}{{ if eq .Status "firing" }}:{{ .Alerts.Firing | len }}{{ end }}] {{ .CommonLabels.alertname }} {{ .CommonLabels.` + signal.LabelCluster + ` }}/{{ .CommonLabels.pool }}`,
				Text:  `{{ range .Alerts }}{{ .Annotations.description }} <{{ .Annotations.runbook_url }}|runbook>` + "\n" + `{{ end }}`,
			})
		}
		return rc
	}
	watchdog := amReceiver{Name: ReceiverWatchdog}
	if r.WatchdogURL != "" {
		watchdog.WebhookConfigs = []amWebhook{{URL: r.WatchdogURL}}
	}
	c := amConfig{
		Global: amGlobal{ResolveTimeout: dur("5m")},
		Route: amRoute{
			Receiver:       ReceiverDefault,
			GroupBy:        []string{"alertname", signal.LabelCluster, signal.LabelPool, signal.LabelServer},
			GroupWait:      dur("30s"),
			GroupInterval:  dur("5m"),
			RepeatInterval: dur("4h"),
			Routes: []amRoute{
				// The watchdog goes to the dead man's switch only, every
				// minute, and never to people.
				{Receiver: ReceiverWatchdog, Matchers: []amMatcher{matcher("alertname", "=", AlertWatchdog)},
					GroupWait: dur("1s"), GroupInterval: dur("1m"), RepeatInterval: dur("1m")},
				{Receiver: ReceiverCritical, Matchers: []amMatcher{matcher("severity", "=", SeverityCritical)},
					GroupWait: dur("10s"), RepeatInterval: dur("1h")},
				{Receiver: ReceiverWarning, Matchers: []amMatcher{matcher("severity", "=", SeverityWarning)}},
			},
		},
		InhibitRules: []amInhibit{
			{
				SourceMatchers: []amMatcher{matcher("alertname", "=~", AlertKVCritical+"|"+AlertKVExhausted)},
				TargetMatchers: []amMatcher{matcher("alertname", "=~", AlertKVHigh+"|"+AlertKVFullSoon)},
				Equal:          []string{signal.LabelCluster, signal.LabelPool, signal.LabelServer},
			},
			// The fast window pages first; the slow critical window that
			// follows on the same server is the same incident.
			{
				SourceMatchers: []amMatcher{matcher("alertname", "=", AlertKVExhausted)},
				TargetMatchers: []amMatcher{matcher("alertname", "=", AlertKVCritical)},
				Equal:          []string{signal.LabelCluster, signal.LabelPool, signal.LabelServer},
			},
			{
				SourceMatchers: []amMatcher{matcher("alertname", "=~", AlertTargetDown+"|"+AlertMetricsDisabled)},
				TargetMatchers: []amMatcher{matcher("alertname", "=", AlertMetricsStale)},
				Equal:          []string{signal.LabelCluster, signal.LabelPool, signal.LabelServer},
			},
		},
		Receivers: []amReceiver{{Name: ReceiverDefault}, integrations(ReceiverCritical), integrations(ReceiverWarning), watchdog},
	}
	if r.EmailTo != "" {
		c.Global.SMTPFrom = r.EmailFrom
		c.Global.SMTPSmarthost = r.EmailSmarthost
		if host, _, err := net.SplitHostPort(r.EmailSmarthost); err == nil && (host == "localhost" || strings.HasPrefix(host, "127.")) {
			no := false
			c.Global.SMTPRequireTLS = &no
		}
	}
	return c
}

// dur parses a constant duration; it panics on a bad constant (a bug).
func dur(s string) model.Duration {
	d, err := model.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
