package querycheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// TestAgainstNeedsAuth: --against.http-config carries basic auth, with
// the keys a kvwatch target uses, to an API that requires it (kvwatch serve
// behind its exporter-toolkit web config).
func TestAgainstNeedsAuth(t *testing.T) {
	testenv.StateDir(t)
	eps := startSim(t, "vllm-dp")
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(web, []byte("basic_auth_users:\n  ci: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, "prom-auth.yml")
	if err := os.WriteFile(creds, []byte("basic_auth:\n  username: ci\n  password: s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "r.yml")
	if err := os.WriteFile(rules, []byte("groups:\n  - name: g\n    rules:\n      - alert: Full\n        expr: kvwatch_kv_usage_ratio > 0.9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--web.config.file", web, eps[0].URL+eps[0].MetricsPath)
	// Wait until serve answers (401 without credentials) and holds the series.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, _ := run(t, "check", "queries", rules, "--against", base, "--against.http-config", creds)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check with credentials never passed (last exit %d)", code)
		}
		time.Sleep(300 * time.Millisecond)
	}
	code, out, errs := run(t, "check", "queries", rules, "--against", base)
	if code != 2 || out != "" || !strings.Contains(errs, "401 Unauthorized: give credentials with --against.http-config") {
		t.Errorf("without credentials: exit %d, stdout %q, stderr %q; want 2, 401 and how to give credentials", code, out, errs)
	}
	if strings.Contains(errs, "s3cret") {
		t.Errorf("stderr shows the password: %q", errs)
	}
}
