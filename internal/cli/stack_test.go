package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for name, args := range map[string][]string{
		"bad address":   {"--prometheus.listen-address", "nonsense"},
		"bad retention": {"--storage.tsdb.retention.time", "forever"},
		"half e-mail":   {"--alertmanager.email-to", "a@example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"stack", "generate", "--out", t.TempDir()}, args...)
			if code := Run(context.Background(), args, Streams{Stdout: &stdout, Stderr: &stderr}); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, stderr.String())
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
	if !strings.HasPrefix(lines[0], "warning: the kvwatch config holds 13 secrets inline. ") || len(lines) != 14 ||
		lines[1] != "  targets[0].basic_auth.password: write targets[0].basic_auth.password_file: FILE" {
		t.Errorf("stderr:\n%s\nwant the warning, then the 13 secrets by key path, first targets[0].basic_auth.password", stderr.String())
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
