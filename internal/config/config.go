// Package config reads kvwatch's YAML config file, shared by `status`, `top`,
// `serve` and `stack generate`. Decoding is strict (unknown keys are errors),
// defaults are applied before validation, and every problem is reported at
// once with its line. It does not read file_sd target files, watch files or
// scrape anything (serve does).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/alecthomas/units"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Config is the whole config file.
type Config struct {
	Global   Global   `yaml:"global"`
	Targets  []Target `yaml:"targets"`
	FileSD   []FileSD `yaml:"file_sd_configs"`
	Probe    Probe    `yaml:"probe"`
	Alerts   Alerts   `yaml:"alerts"`
	History  History  `yaml:"history"`
	Alerting Alerting `yaml:"alerting"`
}

// Global holds defaults for every target.
type Global struct {
	// ScrapeInterval is how often serve scrapes each target. Default 5s.
	ScrapeInterval model.Duration `yaml:"scrape_interval"`
	// ScrapeTimeout bounds one scrape, connection to last byte. Default 4s;
	// must not exceed ScrapeInterval.
	ScrapeTimeout model.Duration `yaml:"scrape_timeout"`
	// BodySizeLimit bounds the decompressed body of one scrape, e.g. "32MiB".
	BodySizeLimit string `yaml:"body_size_limit"`
	// HeadroomTokens are the request sizes, in tokens, for which headroom is
	// computed (the server's own context length is added when known).
	HeadroomTokens []int `yaml:"headroom_tokens"`
	// Labels (cluster, pool, model) applied to every target that does not
	// set its own.
	Labels map[string]string `yaml:"labels"`

	// BodySizeLimitBytes is BodySizeLimit parsed; set by validation.
	BodySizeLimitBytes int64 `yaml:"-"`
}

// Target is one engine or router endpoint.
type Target struct {
	// Name identifies the server in every output; default host:port.
	Name string `yaml:"name"`
	// URL is the server's base URL or its full metrics URL. Without a path,
	// the engine's default metrics path is used (/metrics).
	URL string `yaml:"url"`
	// Role is prefill, decode, unified or router; default: what the engine
	// reports, else unified.
	Role string `yaml:"role"`
	// Engine forces an adapter instead of detection.
	Engine string `yaml:"engine"`
	// Labels: cluster, pool, model.
	Labels         map[string]string `yaml:"labels"`
	ScrapeInterval model.Duration    `yaml:"scrape_interval"`
	ScrapeTimeout  model.Duration    `yaml:"scrape_timeout"`
	// HTTPClientConfig holds auth and TLS: bearer_token_file, basic_auth,
	// authorization, tls_config, ... (the Prometheus keys).
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:",inline"`
}

// FileSD reads targets from Prometheus file_sd files (JSON or YAML).
type FileSD struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval"`
	// Scheme is the targets' scheme (http or https, default http) unless a
	// group's __scheme__ label sets one, as in a Prometheus scrape config.
	Scheme string `yaml:"scheme"`
	// HTTPClientConfig holds the auth and TLS of every target these files
	// list, with the same keys as a target's (basic_auth, authorization,
	// bearer_token_file, tls_config, proxy_url...).
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:",inline"`
}

// Probe configures serve's /probe endpoint.
type Probe struct {
	// Allow lists hosts, host globs ("gpu-*.example") and CIDRs that /probe
	// may scrape. Empty: /probe refuses every target.
	Allow []string `yaml:"allow"`
}

// Alerts holds the thresholds of the generated and embedded alert rules.
type Alerts struct {
	KVUsageWarning       float64        `yaml:"kv_usage_warning"`
	KVUsageWarningFor    model.Duration `yaml:"kv_usage_warning_for"`
	KVUsageCritical      float64        `yaml:"kv_usage_critical"`
	KVUsageCriticalFor   model.Duration `yaml:"kv_usage_critical_for"`
	KVFullWithin         model.Duration `yaml:"kv_full_within"`
	QueueLength          float64        `yaml:"queue_length"`
	QueueFor             model.Duration `yaml:"queue_for"`
	PreemptionsPerSecond float64        `yaml:"preemptions_per_second"`
	PreemptionsFor       model.Duration `yaml:"preemptions_for"`
	PrefixHitRatioLow    float64        `yaml:"prefix_hit_ratio_low"`
	PrefixHitMinTokensPS float64        `yaml:"prefix_hit_min_query_tokens_per_second"`
	PrefixHitFor         model.Duration `yaml:"prefix_hit_for"`
	LeakUsage            float64        `yaml:"leak_usage"`
	LeakFor              model.Duration `yaml:"leak_for"`
	RankSpread           float64        `yaml:"rank_spread"`
	RankSpreadFor        model.Duration `yaml:"rank_spread_for"`
	TargetDownFor        model.Duration `yaml:"target_down_for"`
	StaleAfter           model.Duration `yaml:"stale_after"`
}

// History configures serve's in-memory history.
type History struct {
	// Retention is the window kept in memory. Default 1h.
	Retention model.Duration `yaml:"retention"`
	// SnapshotFile, when set, is written periodically and on shutdown and
	// read on start, so a restart keeps the window.
	SnapshotFile     string         `yaml:"snapshot_file"`
	SnapshotInterval model.Duration `yaml:"snapshot_interval"`
}

// Alerting says where serve's embedded rules send alerts.
type Alerting struct {
	// Alertmanagers are base URLs of Alertmanagers (their v2 API is used).
	Alertmanagers []string `yaml:"alertmanagers"`
	// Webhooks receive Alertmanager-style webhook JSON.
	Webhooks []string `yaml:"webhooks"`
}

// Roles a target may have.
var roles = []string{"prefill", "decode", "unified", "router"}

// allowedLabels are the target labels kvwatch carries into its output.
var allowedLabels = []string{"cluster", "pool", "model"}

// Default returns a config with every default set and no targets.
func Default() *Config {
	c := &Config{}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	g := &c.Global
	if g.ScrapeInterval == 0 {
		g.ScrapeInterval = model.Duration(5 * time.Second)
	}
	if g.ScrapeTimeout == 0 {
		g.ScrapeTimeout = model.Duration(4 * time.Second)
		if time.Duration(g.ScrapeInterval) < 4*time.Second {
			g.ScrapeTimeout = g.ScrapeInterval
		}
	}
	if g.BodySizeLimit == "" {
		g.BodySizeLimit = "32MiB"
	}
	if g.HeadroomTokens == nil {
		g.HeadroomTokens = []int{8192}
	}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.ScrapeInterval == 0 {
			t.ScrapeInterval = g.ScrapeInterval
		}
		if t.ScrapeTimeout == 0 {
			t.ScrapeTimeout = g.ScrapeTimeout
			if t.ScrapeTimeout > t.ScrapeInterval {
				t.ScrapeTimeout = t.ScrapeInterval
			}
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		for k, v := range g.Labels {
			if _, ok := t.Labels[k]; !ok {
				t.Labels[k] = v
			}
		}
	}
	for i := range c.FileSD {
		if c.FileSD[i].RefreshInterval == 0 {
			c.FileSD[i].RefreshInterval = model.Duration(time.Minute)
		}
	}
	a := &c.Alerts
	setF := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *model.Duration, v time.Duration) {
		if *p == 0 {
			*p = model.Duration(v)
		}
	}
	setF(&a.KVUsageWarning, 0.90)
	setD(&a.KVUsageWarningFor, 10*time.Minute)
	setF(&a.KVUsageCritical, 0.97)
	setD(&a.KVUsageCriticalFor, 5*time.Minute)
	setD(&a.KVFullWithin, 30*time.Minute)
	setF(&a.QueueLength, 50)
	setD(&a.QueueFor, 5*time.Minute)
	setF(&a.PreemptionsPerSecond, 0.1)
	setD(&a.PreemptionsFor, 10*time.Minute)
	setF(&a.PrefixHitRatioLow, 0.10)
	setF(&a.PrefixHitMinTokensPS, 1000)
	setD(&a.PrefixHitFor, 15*time.Minute)
	setF(&a.LeakUsage, 0.50)
	setD(&a.LeakFor, 15*time.Minute)
	setF(&a.RankSpread, 0.30)
	setD(&a.RankSpreadFor, 15*time.Minute)
	setD(&a.TargetDownFor, 2*time.Minute)
	setD(&a.StaleAfter, 2*time.Minute)
	setD(&c.History.Retention, time.Hour)
	setD(&c.History.SnapshotInterval, 5*time.Minute)
}

// Error lists every problem found in a config file, each with its line.
type Error struct {
	File     string
	Problems []string
}

func (e *Error) Error() string {
	name := e.File
	if name == "" {
		name = "config"
	}
	if len(e.Problems) == 1 {
		return fmt.Sprintf("%s: %s", name, e.Problems[0])
	}
	return fmt.Sprintf("%s: %d problems:\n  %s", name, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Load reads and validates the config file at path. Relative file paths in
// it are resolved against the file's directory.
func Load(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(b, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for i := range c.Targets {
		c.Targets[i].HTTPClientConfig.SetDirectory(dir)
	}
	for i := range c.FileSD {
		for j, f := range c.FileSD[i].Files {
			c.FileSD[i].Files[j] = promcfg.JoinDir(dir, f)
		}
		c.FileSD[i].HTTPClientConfig.SetDirectory(dir)
	}
	if c.History.SnapshotFile != "" {
		c.History.SnapshotFile = promcfg.JoinDir(dir, c.History.SnapshotFile)
	}
	return c, nil
}

// Parse decodes and validates a config from b; name is used in errors.
func Parse(b []byte, name string) (*Config, error) {
	e := &Error{File: name}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		e.Problems = append(e.Problems, yamlProblems(err)...)
		return nil, e
	}
	c := &Config{}
	if len(bytes.TrimSpace(b)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil {
			e.Problems = append(e.Problems, yamlProblems(err)...)
			return nil, e
		}
	}
	c.applyDefaults()
	v := validator{root: &root}
	c.validate(&v)
	if len(v.problems) > 0 {
		e.Problems = v.problems
		return nil, e
	}
	return c, nil
}

// Check applies defaults and validates a config built in code (e.g. from
// command-line targets); problems name keys but no lines.
func (c *Config) Check(name string) error {
	c.applyDefaults()
	v := validator{}
	c.validate(&v)
	if len(v.problems) > 0 {
		return &Error{File: name, Problems: v.problems}
	}
	return nil
}

// yamlProblems splits a yaml error into its per-line messages.
func yamlProblems(err error) []string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		out := make([]string, 0, len(te.Errors))
		for _, m := range te.Errors {
			out = append(out, strings.Replace(m, " in type config.", " in ", 1))
		}
		return out
	}
	return []string{strings.TrimPrefix(err.Error(), "yaml: ")}
}

// validator collects problems, each prefixed with the line of its key.
type validator struct {
	root     *yaml.Node
	problems []string
}

// addf records a problem at the node found by path (map keys as strings,
// sequence indexes as ints).
func (v *validator) addf(path []any, format string, args ...any) {
	line := LineOf(v.root, path)
	msg := fmt.Sprintf("%s: %s", pathString(path), fmt.Sprintf(format, args...))
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	v.problems = append(v.problems, msg)
}

func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case int:
			fmt.Fprintf(&b, "[%d]", p)
		}
	}
	return b.String()
}

// LineOf returns the line of the node at path in a parsed config file (map
// keys as strings, sequence indexes as ints), or of its nearest ancestor
// present in the file; 0 when root is nil.
func LineOf(root *yaml.Node, path []any) int {
	if root == nil {
		return 0
	}
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch p := p.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == p {
						line = n.Content[i].Line
						next = n.Content[i+1]
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && p < len(n.Content) {
				next = n.Content[p]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

func (c *Config) validate(v *validator) {
	g := &c.Global
	if g.ScrapeInterval <= 0 {
		v.addf([]any{"global", "scrape_interval"}, "must be positive")
	}
	if g.ScrapeTimeout > g.ScrapeInterval {
		v.addf([]any{"global", "scrape_timeout"}, "%s is longer than scrape_interval %s; lower it", g.ScrapeTimeout, g.ScrapeInterval)
	}
	if n, err := units.ParseBase2Bytes(g.BodySizeLimit); err != nil || n <= 0 {
		v.addf([]any{"global", "body_size_limit"}, "%q is not a size; write e.g. 32MiB", g.BodySizeLimit)
	} else {
		g.BodySizeLimitBytes = int64(n)
	}
	for i, n := range g.HeadroomTokens {
		if n <= 0 {
			v.addf([]any{"global", "headroom_tokens", i}, "%d must be a positive number of tokens", n)
		}
	}
	checkLabels(v, []any{"global", "labels"}, g.Labels)
	names := map[string]int{}
	for i := range c.Targets {
		t := &c.Targets[i]
		p := func(k string) []any { return []any{"targets", i, k} }
		if t.URL == "" {
			v.addf([]any{"targets", i}, "url is missing; write e.g. url: http://127.0.0.1:30000")
		} else if u, err := ParseTargetURL(t.URL); err != nil {
			v.addf(p("url"), "%v", err)
		} else if t.Name == "" {
			t.Name = defaultName(u)
		}
		if t.Role != "" && !contains(roles, t.Role) {
			v.addf(p("role"), "unknown role %q; want one of %s", t.Role, strings.Join(roles, ", "))
		}
		if t.ScrapeTimeout > t.ScrapeInterval {
			v.addf(p("scrape_timeout"), "%s is longer than scrape_interval %s; lower it", t.ScrapeTimeout, t.ScrapeInterval)
		}
		checkLabels(v, p("labels"), t.Labels)
		if err := t.HTTPClientConfig.Validate(); err != nil {
			v.addf([]any{"targets", i}, "%v", err)
		}
		if t.Name != "" {
			if j, dup := names[t.Name]; dup {
				v.addf(p("name"), "%q is also the name of targets[%d]; names must be unique", t.Name, j)
			}
			names[t.Name] = i
		}
	}
	for i, f := range c.FileSD {
		if len(f.Files) == 0 {
			v.addf([]any{"file_sd_configs", i}, "files is empty; list JSON or YAML target files")
		}
		for j, pat := range f.Files {
			if _, err := filepath.Match(pat, ""); err != nil {
				v.addf([]any{"file_sd_configs", i, "files", j}, "bad pattern %q: %v", pat, err)
			}
		}
		if f.Scheme != "" && f.Scheme != "http" && f.Scheme != "https" {
			v.addf([]any{"file_sd_configs", i, "scheme"}, "%q: want http or https", f.Scheme)
		}
		if err := f.HTTPClientConfig.Validate(); err != nil {
			v.addf([]any{"file_sd_configs", i}, "%v", err)
		}
	}
	for i, a := range c.Probe.Allow {
		if strings.Contains(a, "/") {
			if _, _, err := net.ParseCIDR(a); err != nil {
				v.addf([]any{"probe", "allow", i}, "%q is not a CIDR; write e.g. 10.0.0.0/8", a)
			}
		} else if _, err := filepath.Match(a, ""); err != nil || a == "" {
			v.addf([]any{"probe", "allow", i}, "%q is not a host, glob or CIDR", a)
		}
	}
	a := &c.Alerts
	for _, r := range []struct {
		key string
		v   float64
	}{{"kv_usage_warning", a.KVUsageWarning}, {"kv_usage_critical", a.KVUsageCritical},
		{"prefix_hit_ratio_low", a.PrefixHitRatioLow}, {"leak_usage", a.LeakUsage}, {"rank_spread", a.RankSpread}} {
		if r.v <= 0 || r.v > 1 {
			v.addf([]any{"alerts", r.key}, "%g is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%%", r.v)
		}
	}
	if a.KVUsageWarning >= a.KVUsageCritical {
		v.addf([]any{"alerts", "kv_usage_warning"}, "%g must be below kv_usage_critical %g", a.KVUsageWarning, a.KVUsageCritical)
	}
	if c.History.Retention < c.Global.ScrapeInterval {
		v.addf([]any{"history", "retention"}, "%s is shorter than one scrape interval", c.History.Retention)
	}
	for i, u := range c.Alerting.Alertmanagers {
		if _, err := ParseTargetURL(u); err != nil {
			v.addf([]any{"alerting", "alertmanagers", i}, "%v", err)
		}
	}
	for i, u := range c.Alerting.Webhooks {
		if _, err := ParseTargetURL(u); err != nil {
			v.addf([]any{"alerting", "webhooks", i}, "%v", err)
		}
	}
}

func checkLabels(v *validator, path []any, l map[string]string) {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(allowedLabels, k) {
			v.addf(append(append([]any{}, path...), k), "unknown label %q; kvwatch carries %s", k, strings.Join(allowedLabels, ", "))
		}
	}
}

// ParseTargetURL checks that s is an absolute http(s) URL with a host and
// returns it parsed. A bare host:port gets http://.
func ParseTargetURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bad URL %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("bad URL %q: no host; write e.g. http://127.0.0.1:30000", s)
	}
	return u, nil
}

// defaultName is host:port, plus the path when it is not the usual /metrics.
func defaultName(u *url.URL) string {
	switch u.Path {
	case "", "/", "/metrics", "/prometheus/metrics":
		return u.Host
	}
	return u.Host + u.Path
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
