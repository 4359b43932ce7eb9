// Package config reads kvwatch's YAML config file, shared by `status`, `top`,
// `serve`, `check config` and `stack generate`, and is the one source of its
// defaults: a file is decoded onto defaults(), so what it writes (0
// included) survives to validation, which range-checks every value.
// Decoding is strict (unknown keys are errors, with their path and the
// nearest known key) and every problem is reported at once with its line.
// LoadTargets assembles the targets of every face: the file's, the command
// line's and those of file_sd files. It watches no files and scrapes
// nothing (serve does).
package config

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/alecthomas/units"
	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/safetext"
)

// Config is the whole config file.
type Config struct {
	Global  Global   `yaml:"global"`
	Targets []Target `yaml:"targets"`
	FileSD  []FileSD `yaml:"file_sd_configs"`
	// KubernetesSD, DNSSD and HTTPSD are Prometheus' service discovery
	// with relabeling (discovery.go), run by serve, status and top.
	KubernetesSD []KubernetesSD `yaml:"kubernetes_sd_configs"`
	DNSSD        []DNSSD        `yaml:"dns_sd_configs"`
	HTTPSD       []HTTPSD       `yaml:"http_sd_configs"`
	Probe        Probe          `yaml:"probe"`
	Alerts       Alerts         `yaml:"alerts"`
	History      History        `yaml:"history"`
	Alerting     Alerting       `yaml:"alerting"`
	// Autoscaling is the autoscaling signal's target and the workloads
	// the stack's autoscalers scale (autoscaling.go).
	Autoscaling Autoscaling `yaml:"autoscaling"`

	// RemoteWrite lists stores serve pushes to (remotewrite.go).
	RemoteWrite []RemoteWrite `yaml:"remote_write"`
}

// Global holds defaults for every target.
type Global struct {
	// ScrapeInterval is how often serve scrapes each target. Default
	// DefaultScrapeInterval.
	ScrapeInterval model.Duration `yaml:"scrape_interval"`
	// ScrapeTimeout bounds one scrape, connection to last byte. Default
	// DefaultScrapeTimeout, or ScrapeInterval when shorter; must not exceed
	// ScrapeInterval.
	ScrapeTimeout model.Duration `yaml:"scrape_timeout"`
	// EvaluationInterval is how often serve evaluates its rules (the
	// generated recording and alert rules, or --rules.file). Its default
	// (defaults()) is also the generated stack's Prometheus
	// evaluation_interval, so embedded and stack alerts keep the same time;
	// it is not tied to ScrapeInterval.
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	// BodySizeLimit bounds the decompressed body of one scrape, e.g. "32MiB".
	BodySizeLimit string `yaml:"body_size_limit"`
	// HeadroomTokens are the request sizes, in tokens, for which headroom is
	// computed (the server's own context length is added when known).
	HeadroomTokens []int `yaml:"headroom_tokens"`
	// Labels (cluster, pool, model) applied to every target that does not
	// set its own.
	Labels map[string]string `yaml:"labels"`
	// Limits bound every target's page (see limits.go).
	Limits Limits `yaml:",inline"`
	// SecretQueryParams are query parameters whose values are redacted in
	// every output, beside those named like token, key, secret, password.
	SecretQueryParams []string `yaml:"secret_query_params"`
	// EnableCompression asks every target for a gzip body (Accept-Encoding:
	// gzip). Default false: on loopback and a LAN the engine's compression
	// (prometheus_client: level 9, ~2 ms of CPU per 95 KB page) costs more
	// than the bytes it saves; turn it on for slow links. A target's own
	// enable_compression wins.
	EnableCompression bool `yaml:"enable_compression"`

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
	// Role is prefill, decode, unified, router or cache; default: what the engine
	// reports, else unified.
	Role string `yaml:"role"`
	// Engine forces an adapter instead of detection.
	Engine string `yaml:"engine"`
	// Labels: cluster, pool, model.
	Labels         map[string]string `yaml:"labels"`
	ScrapeInterval model.Duration    `yaml:"scrape_interval"`
	ScrapeTimeout  model.Duration    `yaml:"scrape_timeout"`
	// EnableCompression overrides global.enable_compression for this target.
	EnableCompression *bool `yaml:"enable_compression"`
	// Limits override the global limits (see limits.go).
	Limits Limits `yaml:",inline"`
	// MaxRunningRequests is the engine's running-request limit, for
	// engines that do not report it (see planning.go); 0: the engine's own.
	MaxRunningRequests int `yaml:"max_running_requests"`
	// KVUnified says whether a llama.cpp server's slots share one KV
	// cache (true: llama-server --kv-unified, its default without -np) or
	// each hold their own (false: --parallel N); llama-server does not
	// say, and its capacity depends on it. nil: not said (the capacity of
	// a server of more than one slot is then unavailable). Read for
	// llama.cpp only.
	KVUnified *bool `yaml:"kv_unified"`
	// HTTPClientConfig holds auth and TLS: bearer_token_file, basic_auth,
	// authorization, tls_config, ... (the Prometheus keys).
	HTTPClientConfig promcfg.HTTPClientConfig `yaml:",inline"`
}

// FileSD reads targets from Prometheus file_sd files (JSON or YAML).
type FileSD struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval"`
	// Scheme is the targets' scheme (http or https) unless a
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
	// TierFullUsage is the usage of a cache tier below the GPU (host, disk,
	// remote, LMCache) above which a drop of its share of prefix hits
	// alerts; in [0, 1): 0 alerts on the drop at any fill.
	TierFullUsage float64        `yaml:"tier_full_usage"`
	TargetDownFor model.Duration `yaml:"target_down_for"`
	StaleAfter    model.Duration `yaml:"stale_after"`

	// KVUsageExhausted (ratio) and KVUsageExhaustedWindow are the fast
	// window of the KV alerts (KVCacheExhausted): every sample of the
	// window above the ratio pages at once, with no for-duration.
	KVUsageExhausted       float64        `yaml:"kv_usage_exhausted"`
	KVUsageExhaustedWindow model.Duration `yaml:"kv_usage_exhausted_window"`
}

// History configures serve's in-memory history.
type History struct {
	// Retention is the window kept in memory; 0 turns history off.
	Retention model.Duration `yaml:"retention"`
	// SnapshotFile is written periodically and on shutdown and read on
	// start, so a restart keeps the window. nil (not written, or written
	// empty: `snapshot_file:`) is the default, DefaultSnapshotFile in
	// serve's state directory; "" (written `""`) turns snapshots off.
	SnapshotFile     *string        `yaml:"snapshot_file"`
	SnapshotInterval model.Duration `yaml:"snapshot_interval"`
	// MaxSeries bounds the series the history holds, MaxSeriesPerTarget
	// those of one target (its server label): past a limit, series absent
	// from the latest gather are dropped to make room, else new series
	// are refused. 0: no limit. Defaults HistoryMaxSeries and
	// HistoryMaxSeriesPerTarget.
	MaxSeries          int `yaml:"max_series"`
	MaxSeriesPerTarget int `yaml:"max_series_per_target"`
}

// The default series limits of the history, sized from docs/benchmarks.md
// ("History and web UI"): a series takes about 4.2 KiB over a 24h window,
// about 1 KiB of it bookkeeping that a series of a single sample costs too
// (a target renaming its 500 ranks at every scrape kept 183,000 series,
// 176 MiB, in a 2-minute window). A target exports about 40 series (SGLang TP=8:
// 38), one at rank_limit's 512 DP ranks about 1,600 (3 per rank): 5,000
// per target leave three times that, and hold a churning target to at most
// 21 MiB. 500,000 hold 10,000 targets of 40 series (12 times the
// benchmark's 41,000), about 2 GiB over 24h.
const (
	HistoryMaxSeriesPerTarget = 5_000
	HistoryMaxSeries          = 500_000
)

// SnapshotFileName is the name of the history snapshot in serve's state
// directory.
const SnapshotFileName = "history.snapshot"

// DefaultSnapshotFile is the history snapshot serve writes when
// history.snapshot_file is not written: SnapshotFileName in its state
// directory, which is $STATE_DIRECTORY (systemd sets it for a unit with
// StateDirectory=, as the generated kvwatch.service has; the first when it
// lists several), else $XDG_STATE_HOME/kvwatch, else
// $HOME/.local/state/kvwatch (the XDG default). Relative directories are
// ignored, as the XDG specification says. getenv reads the environment
// (os.Getenv).
func DefaultSnapshotFile(getenv func(string) string) (string, error) {
	if d, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); filepath.IsAbs(d) {
		return filepath.Join(d, SnapshotFileName), nil
	}
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "kvwatch", SnapshotFileName), nil
	}
	if d := getenv("HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, ".local", "state", "kvwatch", SnapshotFileName), nil
	}
	return "", errors.New("no state directory for the history snapshot: none of STATE_DIRECTORY, XDG_STATE_HOME and HOME is set to an absolute path; " +
		"set history.snapshot_file (or --history.snapshot-file), or write history.snapshot_file: \"\" to keep the history in memory only")
}

// Alerting says where serve's embedded rules send alerts.
type Alerting struct {
	// Alertmanagers are base URLs of Alertmanagers (their v2 API is used).
	Alertmanagers []string `yaml:"alertmanagers"`
	// Webhooks receive Alertmanager-style webhook JSON.
	Webhooks []string `yaml:"webhooks"`
}

// Roles a target may have.
var Roles = []string{"prefill", "decode", "unified", "router", "cache"}

// The labels a target may set (its labels:, or global.labels), as the
// config writes them. kvwatch carries them into its output; the exported
// series name the inference cluster kv_cluster (signal.LabelCluster), so
// that a Kubernetes cluster label from Prometheus is not hidden.
const (
	TargetLabelCluster = "cluster"
	TargetLabelPool    = "pool"
	TargetLabelModel   = "model"
)

// TargetLabels are the target labels kvwatch carries into its output.
var TargetLabels = []string{TargetLabelCluster, TargetLabelPool, TargetLabelModel}

// unset marks a duration that was not written: a target's scrape_interval
// and scrape_timeout inherit the global ones, the global scrape_timeout
// follows scrape_interval when that is below its default, and a
// remote_write entry's send_interval is the global scrape_interval.
// Written durations are never negative (model.Duration refuses a sign), so
// an explicit 0 stays 0 and is range-checked like any other value.
const unset = model.Duration(-1)

// Defaults that other packages read for values built without a config.
const (
	// DefaultScrapeInterval is global.scrape_interval's default.
	DefaultScrapeInterval = 5 * time.Second
	// DefaultScrapeTimeout is global.scrape_timeout's default (or the
	// scrape interval when that is shorter).
	DefaultScrapeTimeout = 4 * time.Second
	// DefaultBodySizeLimit is global.body_size_limit's default, in bytes
	// (32MiB).
	DefaultBodySizeLimit = 32 << 20
)

// defaults is the config every file is decoded onto, blackbox_exporter's
// way: what a file does not say keeps its default, what it says (0
// included) survives to validation. It is the only place defaults live,
// with the defaults of list entries: defaultTarget, defaultFileSD,
// DefaultRemoteWrite and the SD entries' (defaultKubernetesSD,
// defaultDNSSD, defaultHTTPSD).
func defaults() *Config {
	return &Config{
		Global: Global{
			ScrapeInterval:     model.Duration(DefaultScrapeInterval),
			ScrapeTimeout:      unset,
			EvaluationInterval: model.Duration(15 * time.Second),
			BodySizeLimit:      units.Base2Bytes(DefaultBodySizeLimit).String(),
			BodySizeLimitBytes: DefaultBodySizeLimit,
			HeadroomTokens:     []int{8192},
		},
		Alerts: Alerts{
			KVUsageWarning:       0.90,
			KVUsageWarningFor:    model.Duration(10 * time.Minute),
			KVUsageCritical:      0.97,
			KVUsageCriticalFor:   model.Duration(5 * time.Minute),
			KVFullWithin:         model.Duration(30 * time.Minute),
			QueueLength:          50,
			QueueFor:             model.Duration(5 * time.Minute),
			PreemptionsPerSecond: 0.1,
			PreemptionsFor:       model.Duration(10 * time.Minute),
			PrefixHitRatioLow:    0.10,
			PrefixHitMinTokensPS: 1000,
			PrefixHitFor:         model.Duration(15 * time.Minute),
			LeakUsage:            0.50,
			LeakFor:              model.Duration(15 * time.Minute),
			RankSpread:           0.30,
			RankSpreadFor:        model.Duration(15 * time.Minute),
			TierFullUsage:        0.90,
			TargetDownFor:        model.Duration(2 * time.Minute),
			StaleAfter:           model.Duration(2 * time.Minute),

			// 45s: three samples of the stack's Prometheus (15s scrapes),
			// nine of serve's (5s), so a burst to full shorter than 30s
			// (Prometheus) or 40s (serve) does not page, and a cache full
			// above 99% pages within 45s and one evaluation interval
			// (docs/stack.md, "Fast and slow KV alerts").
			KVUsageExhausted:       0.99,
			KVUsageExhaustedWindow: model.Duration(45 * time.Second),
		},
		History: History{
			Retention:          model.Duration(time.Hour),
			SnapshotInterval:   model.Duration(5 * time.Minute),
			MaxSeries:          HistoryMaxSeries,
			MaxSeriesPerTarget: HistoryMaxSeriesPerTarget,
		},
		Autoscaling: Autoscaling{
			TargetKVUsage: 0.80,
			PrometheusURL: "http://prometheus-operated.monitoring.svc:9090",
		},
	}
}

// defaultTarget is a targets entry before decoding: its timing is unset,
// so that it inherits the global one.
func defaultTarget() Target { return Target{ScrapeInterval: unset, ScrapeTimeout: unset} }

// defaultFileSD is a file_sd_configs entry before decoding.
func defaultFileSD() FileSD {
	return FileSD{RefreshInterval: model.Duration(time.Minute), Scheme: "http"}
}

// decodeEntries decodes the list entries of the file onto their defaults
// (defaultTarget, defaultFileSD, DefaultRemoteWrite, the SD entries'): yaml makes each
// element of a list from its zero value, and drops one it cannot decode,
// which would shift every later index. Here every entry is kept at its
// index, and what it writes (0 included) survives. The decoding of the
// whole file has reported each entry's problems; they are not reported
// again.
func (c *Config) decodeEntries(root *yaml.Node) {
	c.Targets = entriesOnto(root, "targets", defaultTarget, c.Targets)
	c.FileSD = entriesOnto(root, "file_sd_configs", defaultFileSD, c.FileSD)
	c.RemoteWrite = entriesOnto(root, "remote_write", DefaultRemoteWrite, c.RemoteWrite)
	c.KubernetesSD = entriesOnto(root, "kubernetes_sd_configs", defaultKubernetesSD, c.KubernetesSD)
	c.DNSSD = entriesOnto(root, "dns_sd_configs", defaultDNSSD, c.DNSSD)
	c.HTTPSD = entriesOnto(root, "http_sd_configs", defaultHTTPSD, c.HTTPSD)
	c.markWrittenWorkloads(root)
}

// entriesOnto decodes each entry of the list under key in root onto def();
// decoded is what the whole file's decoding made of the list, kept when
// the key holds no list.
func entriesOnto[T any](root *yaml.Node, key string, def func() T, decoded []T) []T {
	n := nodeAt(root, []any{key})
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		return decoded
	}
	out := make([]T, len(n.Content))
	for i, e := range n.Content {
		out[i] = def()
		_ = e.Decode(&out[i]) // reported by the file's decoding
	}
	return out
}

// Default returns a config with every default set and no targets.
func Default() *Config {
	c := defaults()
	c.resolve()
	return c
}

// resolve fills what is inherited: the global scrape_timeout from
// scrape_interval, each target's timing from the global one, each
// remote_write entry's send_interval from the global scrape_interval. It
// runs before
// validation; labels are inherited after it (inheritLabels), so a global
// label problem is reported once, not once per target.
func (c *Config) resolve() {
	g := &c.Global
	if g.ScrapeTimeout == unset {
		g.ScrapeTimeout = min(model.Duration(DefaultScrapeTimeout), g.ScrapeInterval)
	}
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.ScrapeInterval == unset {
			t.ScrapeInterval = g.ScrapeInterval
		}
		if t.ScrapeTimeout == unset {
			t.ScrapeTimeout = min(g.ScrapeTimeout, t.ScrapeInterval)
		}
	}
	c.resolveRemoteWrites()
}

// inheritLabels gives every target the global labels it does not set.
func (c *Config) inheritLabels() {
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		for k, v := range c.Global.Labels {
			if _, ok := t.Labels[k]; !ok {
				t.Labels[k] = v
			}
		}
	}
}

// codeDefaults marks the zero fields of a config built in code (targets
// from the command line, `kvwatch demo`) as not written, so they take the
// defaults a file would give them.
func (c *Config) codeDefaults() {
	markUnset(c.Targets)
	for i := range c.FileSD {
		sd, d := &c.FileSD[i], defaultFileSD()
		if sd.RefreshInterval == 0 {
			sd.RefreshInterval = d.RefreshInterval
		}
		if sd.Scheme == "" {
			sd.Scheme = d.Scheme
		}
	}
	for i := range c.KubernetesSD {
		codeSDDefaults(&c.KubernetesSD[i].SDTargets)
	}
	for i := range c.DNSSD {
		codeSDDefaults(&c.DNSSD[i].SDTargets)
	}
	for i := range c.HTTPSD {
		codeSDDefaults(&c.HTTPSD[i].SDTargets)
	}
	for i := range c.Autoscaling.Workloads {
		w := &c.Autoscaling.Workloads[i]
		w.setDefaults(func(key string) bool {
			switch key {
			case "kind":
				return w.Kind != ""
			case "min_servers":
				return w.MinServers != 0
			}
			return w.APIVersion != ""
		})
	}
}

// codeSDDefaults gives an SD entry built in code the defaults of a file's.
func codeSDDefaults(s *SDTargets) {
	if s.TargetLimit == 0 {
		s.TargetLimit = DefaultSDTargetLimit
	}
}

// markUnset marks the zero timing of targets built in code as not written.
func markUnset(ts []Target) {
	for i := range ts {
		t := &ts[i]
		if t.ScrapeInterval == 0 {
			t.ScrapeInterval = unset
		}
		if t.ScrapeTimeout == 0 {
			t.ScrapeTimeout = unset
		}
	}
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
// it are resolved against the file's directory; secret and TLS files it
// names must exist. It reads no file_sd files: LoadTargets does.
func Load(path string) (*Config, error) { return load(path, false) }

// LoadWithoutFiles is Load for a config that runs elsewhere (`stack
// generate` copies it into a stack for another machine or a pod): the
// secret and TLS files it names need not exist here.
func LoadWithoutFiles(path string) (*Config, error) { return load(path, true) }

func load(path string, skipFiles bool) (*Config, error) {
	f, err := readFile(path)
	if err != nil {
		return nil, err
	}
	v := &validator{root: f.root, problems: f.problems, skipFiles: skipFiles, dir: f.dir}
	if f.cfg != nil {
		f.cfg.validate(v, nil)
	}
	if len(v.problems) > 0 {
		return nil, &Error{File: path, Problems: v.problems}
	}
	f.cfg.inheritLabels()
	return f.cfg, nil
}

// Parse decodes and validates a config from b; name is used in errors.
// Relative file paths in it are left as written.
func Parse(b []byte, name string) (*Config, error) {
	f := parse(b, name, "")
	v := f.check(nil)
	if len(v.problems) > 0 {
		return nil, &Error{File: name, Problems: v.problems}
	}
	f.cfg.inheritLabels()
	return f.cfg, nil
}

// Check applies defaults and validates a config built in code (e.g. from
// command-line targets); zero durations take their defaults, problems name
// keys but no lines.
func (c *Config) Check(name string) error {
	c.codeDefaults()
	c.resolve()
	v := validator{}
	c.validate(&v, nil)
	if len(v.problems) > 0 {
		return &Error{File: name, Problems: v.problems}
	}
	c.inheritLabels()
	return nil
}

// file is a config file decoded onto the defaults, with the problems found
// while decoding; cfg is nil when the file is not YAML at all.
type file struct {
	cfg      *Config
	root     *yaml.Node
	problems []string
	// dir is the file's directory, which relative paths are resolved
	// against; "" for a config that is not a file.
	dir string
}

// readFile reads and decodes the file at path, resolving its relative
// paths against its directory.
func readFile(path string) (*file, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w; check the path given to --config.file", err)
	}
	f := parse(b, path, filepath.Dir(path))
	f.dir = filepath.Dir(path)
	return f, nil
}

// parse decodes b onto the defaults. An unknown key or a value of the wrong
// type is a problem, and decoding goes on so that validation can report the
// rest in the same pass; only a file that is not YAML stops here. dir, when
// set, is the directory relative paths are resolved against.
func parse(b []byte, name, dir string) *file {
	f := &file{}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		f.problems = []string{strings.TrimPrefix(err.Error(), "yaml: ")}
		return f
	}
	f.root = &root
	c := defaults()
	if len(bytes.TrimSpace(b)) > 0 {
		w := unknownKeys(&root, reflect.TypeOf(c).Elem())
		f.problems = w.out
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(c); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				// A value's own decoder refused it (e.g. a duration): the
				// rest of the file was not read, so validating it would
				// report what is not there.
				if !w.badDurations { // else unknownKeys said where
					f.problems = append(f.problems, yamlProblem(&root, err.Error()))
				}
				return f
			}
			for _, m := range te.Errors {
				if !w.said(m) { // unknown keys and durations: said with their path
					f.problems = append(f.problems, yamlProblem(&root, m))
				}
			}
		}
	}
	c.decodeEntries(&root)
	if dir != "" {
		c.resolvePaths(dir)
	}
	c.resolve()
	f.cfg = c
	return f
}

// check validates the decoded config; engines, when set, checks engine
// names. It returns the decoding problems and validation's, in one list.
func (f *file) check(engines func(string) error) *validator {
	v := &validator{root: f.root, problems: f.problems}
	if f.cfg != nil {
		f.cfg.validate(v, engines)
	}
	return v
}

// resolvePaths makes the file paths in c relative to dir.
func (c *Config) resolvePaths(dir string) {
	for i := range c.Targets {
		c.Targets[i].HTTPClientConfig.SetDirectory(dir)
	}
	for i := range c.FileSD {
		for j, f := range c.FileSD[i].Files {
			c.FileSD[i].Files[j] = promcfg.JoinDir(dir, f)
		}
		c.FileSD[i].HTTPClientConfig.SetDirectory(dir)
	}
	if p := c.History.SnapshotFile; p != nil && *p != "" {
		abs := promcfg.JoinDir(dir, *p)
		c.History.SnapshotFile = &abs
	}
	c.resolveDiscoveryPaths(dir)
}

// validator collects problems, each prefixed with the line of its key.
type validator struct {
	root     *yaml.Node
	problems []string
	// skipFiles leaves out the check that secret and TLS files exist.
	skipFiles bool
	// dir resolves the relative files of remote_write, which the config
	// keeps as written (serve resolves them against the same directory).
	dir string
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
	_, line := lookup(root, path)
	return line
}

// nodeAt returns the node at path in root, or nil.
func nodeAt(root *yaml.Node, path []any) *yaml.Node {
	n, _ := lookup(root, path)
	return n
}

// lookup follows path from root: the node at its end (nil when a step is
// missing) and the line of the deepest key or item found.
func lookup(root *yaml.Node, path []any) (*yaml.Node, int) {
	if root == nil {
		return nil, 0
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
			return nil, line
		}
		n = next
	}
	return n, line
}

// validate range-checks every value, after resolve and before
// inheritLabels; engines, when set, checks engine names.
func (c *Config) validate(v *validator, engines func(string) error) {
	g := &c.Global
	if g.ScrapeInterval <= 0 {
		v.addf([]any{"global", "scrape_interval"}, "must be positive")
	}
	if g.ScrapeTimeout <= 0 {
		v.addf([]any{"global", "scrape_timeout"}, "must be positive")
	} else if g.ScrapeTimeout > g.ScrapeInterval {
		v.addf([]any{"global", "scrape_timeout"}, "%s is longer than scrape_interval %s; lower it", g.ScrapeTimeout, g.ScrapeInterval)
	}
	if g.EvaluationInterval <= 0 {
		v.addf([]any{"global", "evaluation_interval"}, "must be positive")
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
		if t.Role != "" && !slices.Contains(Roles, t.Role) {
			v.addf(p("role"), "unknown role %q; want one of %s", t.Role, strings.Join(Roles, ", "))
		}
		if t.Engine != "" && engines != nil {
			if err := engines(t.Engine); err != nil {
				v.addf(p("engine"), "%v", err)
			}
		}
		if t.ScrapeInterval <= 0 {
			v.addf(p("scrape_interval"), "must be positive")
		}
		if t.ScrapeTimeout <= 0 {
			v.addf(p("scrape_timeout"), "must be positive")
		} else if t.ScrapeInterval > 0 && t.ScrapeTimeout > t.ScrapeInterval {
			v.addf(p("scrape_timeout"), "%s is longer than scrape_interval %s; lower it", t.ScrapeTimeout, t.ScrapeInterval)
		}
		checkLabels(v, p("labels"), t.Labels)
		checkHTTP(v, []any{"targets", i}, &t.HTTPClientConfig)
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
		if f.RefreshInterval <= 0 {
			v.addf([]any{"file_sd_configs", i, "refresh_interval"}, "must be positive")
		}
		if f.Scheme != "http" && f.Scheme != "https" {
			v.addf([]any{"file_sd_configs", i, "scheme"}, "%q: want http or https", f.Scheme)
		}
		checkHTTP(v, []any{"file_sd_configs", i}, &c.FileSD[i].HTTPClientConfig)
	}
	c.validateDiscovery(v)
	for i := range c.RemoteWrite {
		checkTLSKeys(v, []any{"remote_write", i}, &c.RemoteWrite[i].HTTPClientConfig, v.dir)
	}
	c.validateLimits(v)
	c.validatePlanning(v)
	c.validateRemoteWrites(v)
	c.validateAutoscaling(v)
	for i, a := range c.Probe.Allow {
		if strings.Contains(a, "/") {
			if _, _, err := net.ParseCIDR(a); err != nil {
				v.addf([]any{"probe", "allow", i}, "%q is not a CIDR; write e.g. 10.0.0.0/8", a)
			}
		} else if _, err := filepath.Match(a, ""); err != nil || a == "" {
			v.addf([]any{"probe", "allow", i}, "%q is not a host, glob or CIDR", a)
		}
	}
	c.Alerts.validate(v)
	// A window of fewer than two scrapes holds one sample or none at some
	// evaluations: KVCacheExhausted would page on one sample and flap.
	if w, s := c.Alerts.KVUsageExhaustedWindow, c.Global.ScrapeInterval; w > 0 && s > 0 && w < 2*s {
		v.addf([]any{"alerts", "kv_usage_exhausted_window"}, "%s is shorter than two scrape intervals (global.scrape_interval %s); write at least %s",
			w, s, 2*s)
	}
	h := c.History
	if h.Retention > 0 && h.Retention < c.Global.ScrapeInterval {
		v.addf([]any{"history", "retention"}, "%s is shorter than one scrape interval; write 0s to turn history off", h.Retention)
	}
	if h.SnapshotInterval <= 0 {
		v.addf([]any{"history", "snapshot_interval"}, "must be positive")
	}
	if h.MaxSeries < 0 {
		v.addf([]any{"history", "max_series"}, "%d is negative; write 0 for no limit", h.MaxSeries)
	}
	if h.MaxSeriesPerTarget < 0 {
		v.addf([]any{"history", "max_series_per_target"}, "%d is negative; write 0 for no limit", h.MaxSeriesPerTarget)
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

// validate range-checks the thresholds. Ratios are in (0, 1]; counts and
// rates may be 0 (alert on any); for-durations may be 0 (fire at once).
func (a *Alerts) validate(v *validator) {
	at := func(key string) []any { return []any{"alerts", key} }
	for _, r := range []struct {
		key string
		v   float64
	}{{"kv_usage_warning", a.KVUsageWarning}, {"kv_usage_critical", a.KVUsageCritical},
		{"prefix_hit_ratio_low", a.PrefixHitRatioLow}, {"leak_usage", a.LeakUsage}, {"rank_spread", a.RankSpread},
		{"kv_usage_exhausted", a.KVUsageExhausted}} {
		if !(r.v > 0 && r.v <= 1) {
			v.addf(at(r.key), "%g is not a ratio; use a number in (0, 1], e.g. 0.9 for 90%%", r.v)
		}
	}
	// 1 would be a tier alert that can never fire (usage above 1 is
	// implausible and not exported); 0 alerts on a hit-share drop at any fill.
	if !(a.TierFullUsage >= 0 && a.TierFullUsage < 1) {
		v.addf(at("tier_full_usage"), "%g is not a ratio below 1; use a number in [0, 1), e.g. 0.9 for 90%%", a.TierFullUsage)
	}
	if a.KVUsageWarning >= a.KVUsageCritical {
		v.addf(at("kv_usage_warning"), "%g must be below kv_usage_critical %g", a.KVUsageWarning, a.KVUsageCritical)
	}
	// The fast window has the higher threshold (checked between ratios
	// only: a bad kv_usage_critical has its own message).
	if a.KVUsageExhausted < a.KVUsageCritical && a.KVUsageCritical <= 1 {
		v.addf(at("kv_usage_exhausted"), "%g is below kv_usage_critical %g; the fast window takes the higher threshold, e.g. 0.99",
			a.KVUsageExhausted, a.KVUsageCritical)
	}
	for _, r := range []struct {
		key string
		v   float64
	}{{"queue_length", a.QueueLength}, {"preemptions_per_second", a.PreemptionsPerSecond},
		{"prefix_hit_min_query_tokens_per_second", a.PrefixHitMinTokensPS}} {
		if !(r.v >= 0) || math.IsInf(r.v, 1) {
			v.addf(at(r.key), "%g must be a finite number, 0 or more", r.v)
		}
	}
	for _, d := range []struct {
		key string
		v   model.Duration
	}{{"kv_full_within", a.KVFullWithin}, {"stale_after", a.StaleAfter}, {"kv_usage_exhausted_window", a.KVUsageExhaustedWindow}} {
		if d.v <= 0 {
			v.addf(at(d.key), "must be positive")
		}
	}
	for _, d := range []struct {
		key string
		v   model.Duration
	}{{"kv_usage_warning_for", a.KVUsageWarningFor}, {"kv_usage_critical_for", a.KVUsageCriticalFor},
		{"queue_for", a.QueueFor}, {"preemptions_for", a.PreemptionsFor}, {"prefix_hit_for", a.PrefixHitFor},
		{"leak_for", a.LeakFor}, {"rank_spread_for", a.RankSpreadFor}, {"target_down_for", a.TargetDownFor}} {
		if d.v < 0 {
			v.addf(at(d.key), "must not be negative")
		}
	}
}

// secretFiles lists the files h names, each at its path under path.
func secretFiles(path []any, h *promcfg.HTTPClientConfig) []fileRef {
	at := func(keys ...any) []any { return append(append([]any{}, path...), keys...) }
	files := []fileRef{{at("bearer_token_file"), h.BearerTokenFile},
		{at("tls_config", "ca_file"), h.TLSConfig.CAFile},
		{at("tls_config", "cert_file"), h.TLSConfig.CertFile},
		{at("tls_config", "key_file"), h.TLSConfig.KeyFile}}
	if b := h.BasicAuth; b != nil {
		files = append(files, fileRef{at("basic_auth", "password_file"), b.PasswordFile},
			fileRef{at("basic_auth", "username_file"), b.UsernameFile})
	}
	if a := h.Authorization; a != nil {
		files = append(files, fileRef{at("authorization", "credentials_file"), a.CredentialsFile})
	}
	if o := h.OAuth2; o != nil {
		files = append(files, fileRef{at("oauth2", "client_secret_file"), o.ClientSecretFile})
	}
	return files
}

// fileRef is a file named at a path of the config.
type fileRef struct {
	path []any
	file string
}

// checkHTTP checks auth and TLS settings, and that every secret or TLS file
// they name exists (a missing one would fail every scrape).
func checkHTTP(v *validator, path []any, h *promcfg.HTTPClientConfig) {
	checkHTTPFiles(v, path, h)
	// Last: Validate moves bearer_token_file to authorization.
	if err := h.Validate(); err != nil {
		v.addf(path, "%v", err)
	}
}

// checkHTTPFiles checks that every secret or TLS file h names exists, and
// that its TLS keys are strong enough.
func checkHTTPFiles(v *validator, path []any, h *promcfg.HTTPClientConfig) {
	for _, f := range secretFiles(path, h) {
		if v.skipFiles || f.file == "" {
			continue
		}
		if _, err := os.Stat(f.file); err != nil {
			v.addf(f.path, "cannot read %s: %v; create it or fix the path (relative paths are from the config file's directory)", f.file, errors.Unwrap(err))
		}
	}
	checkTLSKeys(v, path, h, "")
}

func checkLabels(v *validator, path []any, l map[string]string) {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(TargetLabels, k) {
			v.addf(append(append([]any{}, path...), k), "unknown label %q; kvwatch carries %s", k, strings.Join(TargetLabels, ", "))
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
		// url.Error repeats the URL, password included: keep its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("bad URL %q: %w", safetext.URLString(s), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bad URL %q: scheme must be http or https", safetext.URL(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("bad URL %q: no host; write e.g. http://127.0.0.1:30000", safetext.URL(u))
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
