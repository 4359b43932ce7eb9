package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestStackGenerateThresholdsFromConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte("alerts:\n  kv_usage_warning: 0.8\n  kv_usage_critical: 0.95\n  queue_length: 0\nalerting:\n  webhooks: [http://127.0.0.1:5001/hook]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "stack")
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"stack", "generate", "--config.file", cfg, "--out", out, "--storage.tsdb.retention.time", "30d"},
		Streams{Stdout: &stdout, Stderr: &stderr})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	alerts, err := os.ReadFile(filepath.Join(out, "rules", "kvwatch-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// queue_length: 0 is kept (it used to become the default 50).
	for _, want := range []string{"kvwatch_kv_usage_ratio > 0.8\n", "kvwatch_kv_usage_ratio > 0.95\n", "(threshold 0 for 5m)"} {
		if !strings.Contains(string(alerts), want) {
			t.Errorf("alert rules lack %q", want)
		}
	}
	am, _ := os.ReadFile(filepath.Join(out, "alertmanager.yml"))
	if !strings.Contains(string(am), "url: http://127.0.0.1:5001/hook") {
		t.Errorf("alertmanager.yml lacks the config file's webhook:\n%s", am)
	}
	unit, _ := os.ReadFile(filepath.Join(out, "systemd", "kvwatch-prometheus.service"))
	if !strings.Contains(string(unit), "--storage.tsdb.retention.time=30d") {
		t.Errorf("prometheus unit lacks the retention flag:\n%s", unit)
	}
	copied, _ := os.ReadFile(filepath.Join(out, "kvwatch.yml"))
	if !strings.Contains(string(copied), "kv_usage_warning: 0.8") {
		t.Errorf("kvwatch.yml in the stack is not the given config:\n%s", copied)
	}
}

func TestStackGenerateBadFlags(t *testing.T) {
	for name, c := range map[string]struct {
		args   []string
		stderr string // a part of the error
	}{
		"bad address":   {[]string{"--prometheus.listen-address", "nonsense"}, `--prometheus.listen-address "nonsense": want host:port, e.g. 127.0.0.1:9090`},
		"bad retention": {[]string{"--storage.tsdb.retention.time", "forever"}, `--storage.tsdb.retention.time "forever": want a duration such as 15d`},
		"half e-mail":   {[]string{"--alertmanager.email-to", "a@example.com"}, "e-mail receiver: set --alertmanager.email-to, --alertmanager.email-from and --alertmanager.email-smarthost together"},
		"label without value": {[]string{"--kubernetes.labels", "release"},
			`kvwatch: --kubernetes.labels "release": want NAME=VALUE, e.g. release=kube-prometheus-stack; see 'kvwatch --help'`},
		"bad label key": {[]string{"--kubernetes.labels", "team name=inference"}, `--kubernetes.labels key "team name": name part must consist of alphanumeric characters`},
		"external label without value": {[]string{"--external-label", "=gpu-box-7"},
			`kvwatch: --external-label "=gpu-box-7": want NAME=VALUE, e.g. collector=gpu-box-7; see 'kvwatch --help'`},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"stack", "generate", "--out", t.TempDir()}, c.args...)
			if code, _, stderr := runCaught(t, context.Background(), args); code != exitUsage || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, c.stderr)
			}
		})
	}
}

func TestStackInstallDryRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stack")
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"stack", "generate", "--out", out}, Streams{Stdout: &stdout, Stderr: &stderr}); code != exitOK {
		t.Fatalf("generate: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	root := t.TempDir()
	if code := Run(context.Background(), []string{"stack", "install", "--dir", out, "--dry-run", "--root", root}, Streams{Stdout: &stdout, Stderr: &stderr}); code != exitOK {
		t.Fatalf("install: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "[Service]") || !strings.Contains(stdout.String(), "NoNewPrivileges=yes") {
		t.Errorf("dry run does not print the units:\n%s", stdout.String())
	}
}

// The example config names secret files that exist where serve runs, not
// where the stack is generated: stack generate does not ask for them.
func TestStackGenerateWithoutTheSecrets(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stack")
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"stack", "generate", "--config.file", filepath.Join("..", "..", "examples", "kvwatch.yml"), "--out", out},
		Streams{Stdout: &stdout, Stderr: &stderr})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}

// --kubernetes.labels (once panicking on kingpin's nil map) reaches the
// labels of every generated Kubernetes object, the Prometheus Operator's
// ServiceMonitor, PodMonitor and PrometheusRule among them, while the
// selectors keep the app label alone.
func TestStackGenerateKubernetesLabels(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stack")
	args := []string{"stack", "generate", "--kubernetes.labels", "release=kube-prometheus-stack", "--kubernetes.labels", "team=inference", "--out", out}
	code, _, stderr := runCaught(t, context.Background(), args)
	if code != exitOK {
		t.Fatalf("kvwatch %q: exit %d, stderr %s", args, code, stderr)
	}
	type object struct {
		Kind     string
		Metadata struct {
			Name   string
			Labels map[string]string
		}
		Spec struct {
			Selector map[string]any
			Template struct {
				Metadata struct{ Labels map[string]any }
			}
		}
	}
	appOnly := map[string]any{"app.kubernetes.io/name": "kvwatch"}
	kinds := map[string]int{}
	for _, file := range []string{"kvwatch.yaml", "servicemonitor.yaml", "podmonitor.yaml", "prometheusrule.yaml", "dashboards.yaml"} {
		b, err := os.ReadFile(filepath.Join(out, "kubernetes", file))
		if err != nil {
			t.Fatal(err)
		}
		for doc := range strings.SplitSeq(string(b), "\n---\n") {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			kinds[o.Kind]++
			if o.Metadata.Labels["release"] != "kube-prometheus-stack" || o.Metadata.Labels["team"] != "inference" || o.Metadata.Labels["app.kubernetes.io/name"] != "kvwatch" {
				t.Errorf("%s: %s %s has labels %v; want release: kube-prometheus-stack, team: inference and app.kubernetes.io/name: kvwatch", file, o.Kind, o.Metadata.Name, o.Metadata.Labels)
			}
			selectors := map[string]any{}
			switch o.Kind {
			case "Deployment":
				selectors["selector"], selectors["pod template labels"] = o.Spec.Selector["matchLabels"], o.Spec.Template.Metadata.Labels
			case "ServiceMonitor":
				selectors["selector"] = o.Spec.Selector["matchLabels"]
			case "Service":
				selectors["selector"] = o.Spec.Selector
			}
			for what, got := range selectors {
				if !reflect.DeepEqual(got, appOnly) {
					t.Errorf("%s: %s %s is %v, want %v", file, o.Kind, what, got, appOnly)
				}
			}
		}
	}
	for _, k := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule", "Deployment", "Service", "ConfigMap"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests (%v)", k, kinds)
		}
	}
}

// stack generate warns on stderr about every inline secret of the config
// (issue 31 item 4), and writes kvwatch.yml and the Kubernetes Secret 0600.
func TestStackGenerateWarnsOfInlineSecrets(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stack")
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"stack", "generate", "--config.file", filepath.Join("..", "stack", "testdata", "inline-secrets.yml"), "--out", out},
		Streams{Stdout: &stdout, Stderr: &stderr})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "warning: the kvwatch config holds 13 secrets inline. ") || len(lines) != 15 ||
		lines[1] != "  targets[0].basic_auth.password: write targets[0].basic_auth.password_file: FILE" ||
		!strings.HasPrefix(lines[14], "note: prometheus.yml scrapes these engines only through kvwatch, not directly: target sglang-basic, ") {
		t.Errorf("stderr:\n%s\nwant the warning, then the 13 secrets by key path, first targets[0].basic_auth.password, "+
			"then the note naming the engines prometheus.yml does not scrape directly", stderr.String())
	}
	if strings.Contains(stderr.String()+stdout.String(), "s3cret-") {
		t.Errorf("the output shows a secret:\n%s%s", stdout.String(), stderr.String())
	}
	for _, f := range []string{"kvwatch.yml", "kubernetes/secret.yaml"} {
		if mode, err := permOf(filepath.Join(out, f)); err != nil || mode != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, mode)
		}
	}
}

// permOf returns the permission bits of the file at p.
func permOf(p string) (os.FileMode, error) {
	st, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return st.Mode().Perm(), nil
}
