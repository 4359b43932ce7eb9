package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestServeFleetBadFlags(t *testing.T) {
	testenv.StateDir(t) // the flags are refused after the history is built
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"shard out of range": {[]string{"--shard", "2/2"}, "must be below M"},
		"shard not N/M":      {[]string{"--shard", "1"}, "want N/M"},
		"bad external label": {[]string{"--remote-write.url", "http://127.0.0.1:1/api/v1/write", "--remote-write.external-label", "region"}, "want NAME=VALUE"},
		"bad url":            {[]string{"--remote-write.url", "127.0.0.1:8428"}, "want an absolute http(s) URL"},
		"bad timeout":        {[]string{"--remote-write.url", "http://127.0.0.1:1/", "--remote-write.timeout", "soon"}, "not a duration"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--web.listen-address", "127.0.0.1:0", "http://127.0.0.1:1/metrics"}, c.args...)
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a serve that starts anyway stops at once
			if code := Run(ctx, args, Streams{Stdout: &stdout, Stderr: &stderr}); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), c.want)
			}
		})
	}
}

func TestStackGenerateAgentMode(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"stack", "generate", "--out", out, "--mode", "agent",
		"--remote-write.url", "http://10.0.0.5:8428/api/v1/write", "--external-label", "collector=box-7", "--external-label", "region=eu"},
		Streams{Stdout: &stdout, Stderr: &stderr})
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	agent, err := os.ReadFile(filepath.Join(out, "agent", "prometheus-agent.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"collector: box-7", "region: eu", "url: http://10.0.0.5:8428/api/v1/write"} {
		if !strings.Contains(string(agent), want) {
			t.Errorf("agent/prometheus-agent.yml lacks %q:\n%s", want, agent)
		}
	}
	flags, _ := os.ReadFile(filepath.Join(out, "agent", "vmalert.flags"))
	if !strings.Contains(string(flags), "-datasource.url=http://10.0.0.5:8428\n") {
		t.Errorf("vmalert.flags does not read the store the collectors write to:\n%s", flags)
	}

	for _, args := range [][]string{{"--mode", "central"}, {"--mode", "agent", "--external-label", "novalue"}} {
		stderr.Reset()
		if code := Run(context.Background(), append([]string{"stack", "generate", "--out", t.TempDir()}, args...), Streams{Stdout: &stdout, Stderr: &stderr}); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
	// Without --mode agent there is no agent/ directory.
	plain := t.TempDir()
	if code := Run(context.Background(), []string{"stack", "generate", "--out", plain}, Streams{Stdout: &stdout, Stderr: &stderr}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(plain, "agent")); !os.IsNotExist(err) {
		t.Errorf("agent/ written without --mode agent (%v)", err)
	}
}
