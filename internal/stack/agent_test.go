package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func agentOptions() Options {
	o := goldenOptions()
	o.Agent = AgentOptions{Enabled: true, ExternalLabels: map[string]string{"collector": "box-1"}}
	o.Probe = true
	return o
}

// runTool runs bin in dir and returns its output and whether it succeeded.
func runTool(t *testing.T, dir, bin string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func TestAgentFilesOnlyInAgentMode(t *testing.T) {
	files, err := Generate(goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files.Paths() {
		if strings.HasPrefix(p, "agent/") || p == VMAlertTestsFile {
			t.Errorf("%s generated without --mode agent", p)
		}
	}
	files, err = Generate(agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{AgentPrometheusFile, AgentVMAgentFile, AgentVMAgentFlags, AgentVMAlertFlags, AgentREADME, VMAlertTestsFile} {
		if files.Get(p) == nil {
			t.Errorf("agent mode lacks %s", p)
		}
	}
}

func TestAgentCollectorConfig(t *testing.T) {
	files, err := Generate(agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Global struct {
			ExternalLabels map[string]string `yaml:"external_labels"`
		}
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
		RemoteWrite []struct{ URL string } `yaml:"remote_write"`
	}
	if err := yaml.Unmarshal(files.Get(AgentPrometheusFile), &c); err != nil {
		t.Fatal(err)
	}
	if c.Global.ExternalLabels["collector"] != "box-1" {
		t.Errorf("external labels %v, want collector=box-1", c.Global.ExternalLabels)
	}
	var jobs []string
	for _, sc := range c.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	if strings.Join(jobs, ",") != "kvwatch,kvwatch-probe" {
		t.Errorf("jobs %v, want kvwatch and kvwatch-probe", jobs)
	}
	if len(c.RemoteWrite) != 1 || c.RemoteWrite[0].URL != "http://127.0.0.1:9009/api/v1/push" {
		t.Errorf("remote_write %v, want the stack's --remote-write.url", c.RemoteWrite)
	}
	flags := ReadFlagsFile(files.Get(AgentVMAlertFlags))
	want := map[string]bool{"-datasource.url=http://127.0.0.1:9009": true, "-notifier.url=http://" + goldenOptions().WithDefaults().AlertmanagerAddress: true,
		"-rule=" + RecordingRulesFile: true, "-rule=" + AlertRulesFile: true}
	for _, f := range flags {
		delete(want, f)
	}
	if len(want) > 0 {
		t.Errorf("vmalert flags %v lack %v", flags, want)
	}
}

func TestAgentOptionsRejected(t *testing.T) {
	o := agentOptions()
	o.Agent.ExternalLabels = map[string]string{"__bad": "x"}
	if _, err := Generate(o); err == nil || !strings.Contains(err.Error(), "external label") {
		t.Errorf("bad external label: %v", err)
	}
	o = agentOptions()
	o.Agent.StoreURL = "127.0.0.1:8428"
	if _, err := Generate(o); err == nil || !strings.Contains(err.Error(), "--store.url") {
		t.Errorf("bad store URL: %v", err)
	}
}

// TestAgentConfigPromtool: Prometheus in agent mode accepts the collector
// config, and rejects the server config (so the check can fail).
func TestAgentConfigPromtool(t *testing.T) {
	promtool := testenv.Tool(t, "prometheus", "promtool")
	_, dir := generateDir(t, agentOptions())
	if out, ok := runTool(t, dir, promtool, "check", "config", "--agent", AgentPrometheusFile); !ok || !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check config --agent %s failed:\n%s", AgentPrometheusFile, out)
	}
	if out, ok := runTool(t, dir, promtool, "check", "config", "--agent", "prometheus.yml"); ok {
		t.Errorf("promtool check config --agent accepted the server prometheus.yml:\n%s", out)
	}
}

// TestAgentConfigVMAgent: vmagent's strict parse (-dryRun) accepts the
// collector config with the generated flags, and rejects prometheus.yml.
func TestAgentConfigVMAgent(t *testing.T) {
	vmagent := testenv.VictoriaMetrics(t, "vmagent")
	files, dir := generateDir(t, agentOptions())
	flags := append(ReadFlagsFile(files.Get(AgentVMAgentFlags)), "-dryRun")
	if out, ok := runTool(t, dir, vmagent, flags...); !ok {
		t.Errorf("vmagent %s failed:\n%s", strings.Join(flags, " "), out)
	}
	if out, ok := runTool(t, dir, vmagent, "-promscrape.config=prometheus.yml", "-promscrape.config.strictParse", "-dryRun"); ok {
		t.Errorf("vmagent's strict parse accepted the server prometheus.yml:\n%s", out)
	}
}

// TestAgentRulerVMAlert: vmalert loads the generated rule files with the
// generated flags (-dryRun validates rules and templates).
func TestAgentRulerVMAlert(t *testing.T) {
	vmalert := testenv.VictoriaMetrics(t, "vmalert")
	files, dir := generateDir(t, agentOptions())
	flags := append(ReadFlagsFile(files.Get(AgentVMAlertFlags)), "-dryRun")
	if out, ok := runTool(t, dir, vmalert, flags...); !ok {
		t.Errorf("vmalert %s failed:\n%s", strings.Join(flags, " "), out)
	}
}

// TestRuleTestsVMAlertTool runs the vmalert-tool variant of the rule unit
// tests, and checks that the unshifted promtool file fails there (the
// variant is needed, and the tool does fail on a wrong expectation).
func TestRuleTestsVMAlertTool(t *testing.T) {
	vt := testenv.VictoriaMetrics(t, "vmalert-tool")
	_, dir := generateDir(t, agentOptions())
	// The fast window's tests have no expression tests and no Unix
	// times: vmalert-tool runs them as they are.
	for _, f := range []string{VMAlertTestsFile, AlertFastTestsFile} {
		out, ok := runTool(t, dir, vt, "unittest", "--files", f, "--disableAlertgroupLabel")
		if !ok || !strings.Contains(out, "SUCCESS") {
			t.Errorf("vmalert-tool unittest %s failed:\n%s", f, out)
		}
	}
	// The promtool file with only the key renamed: the clock and round()
	// differences make it fail.
	raw, err := Generate(agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	plain := strings.ReplaceAll(string(raw.Get(AlertTestsFile)), "promql_expr_test:", "metricsql_expr_test:")
	p := filepath.Join(dir, "rules", "plain.vmalert-test.yml")
	if err := os.WriteFile(p, []byte(plain), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := runTool(t, dir, vt, "unittest", "--files", "rules/plain.vmalert-test.yml", "--disableAlertgroupLabel")
	if ok {
		t.Errorf("vmalert-tool passed the unshifted tests; the variant's shift would be unneeded:\n%s", out)
	}
	for _, want := range []string{"EngineMetricsStale", "round("} {
		if !strings.Contains(out, want) {
			t.Errorf("vmalert-tool's failures on the unshifted tests do not mention %s:\n%s", want, out)
		}
	}
}

func TestShiftSeriesValues(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0+60x14", "946684800+60x14"},
		{"60x14", "946684860x14"},
		{"1 2 _ stale 3", "946684801 946684802 _ stale 946684803"},
		{"-5-1x3", "946684795-1x3"},
		{"1e3+1x2", "946685800+1x2"},
		{"_x3 4", "_x3 946684804"},
	} {
		if got := shiftSeriesValues(c.in, vmTestEpoch); got != c.want {
			t.Errorf("shiftSeriesValues(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
