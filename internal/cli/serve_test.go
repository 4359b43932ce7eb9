package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

func TestServeReloadsOnSIGHUPAndStopsOnCancel(t *testing.T) {
	testenv.StateDir(t)
	engine := testenv.EngineServer(t, "", []byte("sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 10\n"))
	cfg := filepath.Join(t.TempDir(), "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte("targets:\n  - url: "+engine.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := runBackground(t, "serve", "--config.file", cfg, "--web.listen-address", "127.0.0.1:0")
	stderr := &serve.Stderr
	wait := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), what); {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %q in the log:\n%s", what, stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("kvwatch serve started")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("config reloaded")
	if code := serve.Stop(); code != exitOK {
		t.Errorf("serve exit code = %d after cancel, want 0; log:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "kvwatch serve stopped") {
		t.Errorf("no graceful stop in the log:\n%s", stderr.String())
	}
}

// serve with history records the daemon's samples every interval (through
// the daemon's Walk, not a gather) and answers PromQL over them.
func TestServeHistoryRecordsScrapes(t *testing.T) {
	testenv.StateDir(t)
	engine := testenv.EngineServer(t, "", []byte("sglang:max_total_num_tokens 1000\nsglang:kv_used_tokens 10\n"))
	addr := testenv.FreeAddr(t)
	cfg := filepath.Join(t.TempDir(), "kvwatch.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\ntargets:\n  - {name: a, url: "+engine.URL+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := runBackground(t, "serve", "--config.file", cfg, "--web.listen-address", addr, "--history", "10m")
	stderr := &serve.Stderr
	query := func(q string) string {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// Three gathers of the target's used tokens, with the server's labels.
	want := `"metric":{"role":"unified","server":"a"},"value":[`
	for deadline := time.Now().Add(30 * time.Second); ; {
		got := query(`count_over_time(kvwatch_kv_used_tokens[10m]) >= 3`)
		if strings.Contains(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history never held 3 samples of a's used tokens; last answer: %s\nlog:\n%s", got, stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := query(`max_over_time(kvwatch_kv_used_tokens{server="a"}[10m])`); !strings.Contains(got, `"10"]`) {
		t.Errorf("used tokens in the history: %s, want 10", got)
	}
	// The rules run at global.evaluation_interval (default 15s, as the
	// generated stack's Prometheus), not at the 1s scrape interval.
	resp, err := http.Get("http://" + addr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rules struct {
		Data struct {
			Groups []struct {
				Name     string  `json:"name"`
				Interval float64 `json:"interval"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rules); err != nil {
		t.Fatal(err)
	}
	if len(rules.Data.Groups) == 0 {
		t.Fatal("serve with history has no rule groups")
	}
	for _, g := range rules.Data.Groups {
		if g.Interval != 15 {
			t.Errorf("rule group %s evaluates every %vs, want 15s (global.evaluation_interval's default)", g.Name, g.Interval)
		}
	}
}

// TestServeWebFlagErrors: serve's listener flags refuse values it cannot
// run with, saying how to fix them.
func TestServeWebFlagErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no connection cap", []string{"--web.max-connections", "0"},
			"kvwatch: --web.max-connections 0: must be at least 1 (serve always caps its connections)\n"},
		{"a URL as a host name", []string{"--web.allowed-hosts", "http://kvwatch.example"},
			`kvwatch: --web.allowed-hosts "http://kvwatch.example": not a host name; give names without scheme or port, e.g. kvwatch.example.com (IP addresses and localhost need none), or * for any` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--web.listen-address", "127.0.0.1:0"}, c.args...)
			code, _, stderr := runCLI(t, append(args, "http://127.0.0.1:1")...)
			if code != exitUsage || stderr != c.want {
				t.Errorf("serve %v = %d\n%s\nwant %d\n%s", c.args, code, stderr, exitUsage, c.want)
			}
		})
	}
}
