package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckQueriesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	rules := writeFile(t, dir, "r.yml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: vllm:kv_cache_usage_perc > 0.9\n")
	notDash := writeFile(t, dir, "x.json", `{"a": 1}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{filepath.Join(dir, "nope.yml")}, "no such file"},
		{"not a dashboard", []string{notDash}, "kvwatch reads Grafana dashboards"},
		{"bad URL", []string{rules, "--against", "ftp://x"}, "want an http(s) URL"},
		{"two APIs", []string{rules, "--against", "http://127.0.0.1:1", "--against", "http://127.0.0.1:2"}, "not a mix"},
		{"unreachable API", []string{rules, "--against", "http://127.0.0.1:1", "--against.timeout", "2s"}, "Prometheus-compatible API"},
		{"http config without against", []string{rules, "--against.http-config", rules}, "needs --against"},
	} {
		code, out, errs := runCLI(t, append([]string{"check", "queries"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2, nothing, %q", tc.name, code, out, errs, tc.want)
		}
	}
}

func TestCheckQueriesFixWritesACopy(t *testing.T) {
	dir := t.TempDir()
	// C's name kept its place and changed its meaning (SGLang #22555): reported, not rewritten.
	orig := "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: rate(vllm:num_preemptions[5m]) > 1 and vllm:num_preemptions_total > 0\n      - alert: B\n        expr: vllm:gpu_cache_usage_perc > 0.9\n" +
		"      - alert: C\n        expr: sglang:token_usage > 0.9\n"
	f := writeFile(t, dir, "alerts.yml", orig)
	code, _, errs := runCLI(t, "check", "queries", "--fix", f)
	if code != exitFailed || !strings.Contains(errs, "wrote "+f+".fixed (2 replacements)") {
		t.Fatalf("check queries --fix = %d, stderr %q; want 1 and the .fixed file named", code, errs)
	}
	if want := "not rewritten in " + f + ": the meaning-changed findings need a person (see each one's suggestion)\n"; !strings.Contains(errs, want) {
		t.Errorf("stderr %q lacks %q", errs, want)
	}
	if b, _ := os.ReadFile(f); string(b) != orig {
		t.Errorf("the original changed:\n%s", b)
	}
	fixed, err := os.ReadFile(f + ".fixed")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("rate(vllm:num_preemptions[5m])", "rate(vllm:num_preemptions_total[5m])",
		"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc").Replace(orig)
	if string(fixed) != want {
		t.Errorf("fixed file =\n%s\nwant\n%s", fixed, want)
	}
	if code, out, _ := runCLI(t, "check", "queries", f+".fixed"); code != exitOK {
		t.Errorf("check of the fixed file = %d:\n%s", code, out)
	}
}

func TestCheckQueriesJSON(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "q.promql", "vllm:num_preemptions\nsglang:num_running_reqs\n")
	code, out, _ := runCLI(t, "check", "queries", "-o", "json", f)
	if code != exitFailed {
		t.Errorf("exit = %d, want 1", code)
	}
	var rep struct {
		Mode     string `json:"mode"`
		Queries  int    `json:"queries"`
		Broken   int    `json:"broken"`
		Findings []struct {
			File, Where, Expr, Selector, Kind, Severity, Suggestion string
			Line, Pos                                               int
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Mode != "offline" || rep.Queries != 2 || rep.Broken != 1 || len(rep.Findings) != 1 {
		t.Fatalf("report = %+v, want offline, 2 queries, 1 broken, 1 finding", rep)
	}
	got := rep.Findings[0]
	if got.File != f || got.Line != 1 || got.Where != "line 1" || got.Kind != "counter-without-total" || got.Severity != "error" ||
		got.Selector != "vllm:num_preemptions" || got.Suggestion != "vllm:num_preemptions_total" || got.Pos != 0 {
		t.Errorf("finding = %+v", got)
	}
}
