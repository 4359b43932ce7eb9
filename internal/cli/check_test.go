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

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// exampleWithSecrets copies examples/kvwatch.yml and its file_sd files into
// a temporary directory and creates the secret files it names.
func exampleWithSecrets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"kvwatch.yml", "file_sd/engines.yml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		writeIn(t, dir, f, string(b))
	}
	for _, f := range []string{"vllm-token", "router-password", "engine-token", "engines-ca.pem"} {
		writeIn(t, dir, filepath.Join("secrets", f), "not a real secret\n")
	}
	return filepath.Join(dir, "kvwatch.yml")
}

func writeIn(t *testing.T, dir, name, body string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckConfigAcceptsTheExample(t *testing.T) {
	f := exampleWithSecrets(t)
	code, out, errs := runCLI(t, "check", "config", f)
	// 4 targets in the file, 3 in examples/file_sd/engines.yml.
	if want := f + ": OK (7 targets)\n"; code != exitOK || out != want {
		t.Errorf("check config %s = %d, %q (stderr %q), want 0, %q", f, code, out, errs, want)
	}
	// status reads the same targets, file_sd ones included (before, status
	// read only the file's own targets).
	code, out, errs = runCLI(t, "status", "--config.file", f, "-o", "json", "--scrape.timeout", "1s")
	if n := strings.Count(out, `"name":`); n < 7 {
		t.Errorf("status --config.file example = %d, %d servers named in its JSON (stderr %q); want 7", code, n, errs)
	}
}

// The example's secret files are not in the repository: check config says
// so, for each, with its line (before, it said OK and every scrape failed).
func TestCheckConfigMissingSecrets(t *testing.T) {
	f := filepath.Join("..", "..", "examples", "kvwatch.yml")
	code, out, errs := runCLI(t, "check", "config", f)
	fix := ": no such file or directory; create it or fix the path (relative paths are from the config file's directory)\n"
	want := f + ": 4 problems:\n" +
		"  line 69: targets[2].authorization.credentials_file: cannot read ../../examples/secrets/vllm-token" + fix +
		"  line 78: targets[3].basic_auth.password_file: cannot read ../../examples/secrets/router-password" + fix +
		"  line 93: file_sd_configs[1].bearer_token_file: cannot read ../../examples/secrets/engine-token" + fix +
		"  line 95: file_sd_configs[1].tls_config.ca_file: cannot read ../../examples/secrets/engines-ca.pem" + fix
	if code != exitUsage || out != "" || errs != want {
		t.Errorf("check config %s = %d, %q, stderr:\n%s\nwant 2 and stderr:\n%s", f, code, out, errs, want)
	}
}

func TestCheckConfigReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "bad.yml")
	bad := "global:\n  scrape_interval: 5s\n  scrape_timeout: 10s\ntargets:\n  - url: ftp://x\n    role: chef\n"
	if err := os.WriteFile(f, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "check", "config", f)
	if code != exitUsage || out != "" {
		t.Errorf("check config bad.yml = %d, stdout %q; want 2 and nothing on stdout", code, out)
	}
	want := f + `: 3 problems:
  line 3: global.scrape_timeout: 10s is longer than scrape_interval 5s; lower it
  line 5: targets[0].url: bad URL "ftp://x": scheme must be http or https
  line 6: targets[0].role: unknown role "chef"; want one of prefill, decode, unified, router, cache
`
	if errs != want {
		t.Errorf("check config stderr:\n%s\nwant:\n%s", errs, want)
	}
}

func TestServeRefusesNonLoopbackWithoutWebConfig(t *testing.T) {
	code, _, errs := runCLI(t, "serve", "--web.listen-address", "0.0.0.0:0", "http://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(errs, "--web.insecure-listen") || !strings.Contains(errs, "--web.config.file") {
		t.Errorf("serve on 0.0.0.0 = %d, %q; want 2 and a message naming --web.config.file and --web.insecure-listen", code, errs)
	}
	code, _, errs = runCLI(t, "serve")
	if code != exitUsage || !strings.Contains(errs, "no targets") {
		t.Errorf("serve without targets = %d, %q; want 2, no targets", code, errs)
	}
}

// A file with only file_sd_configs: check config and status see the same
// one target (before, check said "OK (1 targets)" and status "no targets").
func TestFileSDOnlyForCheckAndStatus(t *testing.T) {
	engine := testenv.EngineFileServer(t, "/metrics", filepath.Join("testdata", "sglang-current-decode-tp2.prom"))
	dir := t.TempDir()
	hostPort := strings.TrimPrefix(engine.URL, "http://")
	writeIn(t, dir, "sd/engines.json", `[{"targets": ["`+hostPort+`"], "labels": {"role": "decode"}}]`)
	writeIn(t, dir, "kvwatch.yml", "file_sd_configs:\n  - files: [sd/*.json]\n")
	f := filepath.Join(dir, "kvwatch.yml")
	if code, out, errs := runCLI(t, "check", "config", f); code != exitOK || out != f+": OK (1 targets)\n" {
		t.Errorf("check config = %d, %q (stderr %q); want 0 and OK (1 targets)", code, out, errs)
	}
	code, out, errs := runCLI(t, "status", "--config.file", f, "-o", "json")
	if code != exitOK || strings.Count(out, `"name": "`+hostPort+`"`)+strings.Count(out, `"name":"`+hostPort+`"`) != 1 {
		t.Errorf("status --config.file = %d, stderr %q, stdout:\n%s\nwant 0 and the one file_sd target", code, errs, out)
	}
}
