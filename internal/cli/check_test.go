package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestCheckConfigAcceptsTheExample(t *testing.T) {
	f := filepath.Join("..", "..", "examples", "kvwatch.yml")
	code, out, errs := runCLI(t, "check", "config", f)
	// 4 targets in the file, 3 in examples/file_sd/engines.yml.
	if want := f + ": OK (7 targets)\n"; code != exitOK || out != want {
		t.Errorf("check config %s = %d, %q (stderr %q), want 0, %q", f, code, out, errs, want)
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
	for _, want := range []string{"3 problems", "line 3: global.scrape_timeout", "line 5: targets[0].url", "line 6: targets[0].role"} {
		if !strings.Contains(errs, want) {
			t.Errorf("check config stderr lacks %q:\n%s", want, errs)
		}
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
