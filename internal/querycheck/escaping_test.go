package querycheck_test

// The spelling a store holds: an SGLang page served as SGLang 0.5.16 was
// seen to serve it (verl-project/rl-insight#160) to a scraper that
// negotiates name escaping, OpenMetrics with escaping=underscores, whose
// sample names prometheus_client spells sglang_x under # TYPE lines that
// keep sglang:x; and as the classic text format with sglang:x to one that
// does not. Prometheus 3 negotiates and stores sglang_x, Debian's 2.42 does
// not and stores sglang:x; check queries says which spelling each needs.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/querycheck"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// sglangFamilies are the fixture's families: name (colon spelling), type,
// value; every sample carries sglangLabels.
var sglangFamilies = []struct {
	name, typ string
	value     float64
}{
	{"sglang:kv_used_tokens", "gauge", 1000},
	{"sglang:max_total_num_tokens", "gauge", 4000},
	{"sglang:full_token_usage", "gauge", 0.25},
	{"sglang:num_running_reqs", "gauge", 2},
	{"sglang:num_queue_reqs", "gauge", 1},
	{"sglang:num_retracted_requests", "counter", 3},
}

const sglangLabels = `{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",dp_rank="0"}`

// escapingEngine serves the fixture page on loopback until the test ends.
func escapingEngine(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		if strings.Contains(r.Header.Get("Accept"), "escaping=") {
			w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores")
			for _, f := range sglangFamilies {
				sample := strings.Replace(f.name, ":", "_", 1)
				if f.typ == "counter" {
					sample += "_total"
				}
				fmt.Fprintf(&b, "# HELP %s fixture\n# TYPE %s %s\n%s%s %g\n", f.name, f.name, f.typ, sample, sglangLabels, f.value)
			}
			b.WriteString("# EOF\n")
		} else {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			for _, f := range sglangFamilies {
				name := f.name
				if f.typ == "counter" {
					name += "_total"
				}
				fmt.Fprintf(&b, "# HELP %s fixture\n# TYPE %s %s\n%s%s %g\n", name, name, f.typ, name, sglangLabels, f.value)
			}
		}
		_, _ = w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// prometheus3 returns the Prometheus 3 binary tools/prometheus3/build.sh
// built ($KVWATCH_PROMETHEUS3_DIR, or bin/prometheus3 at the repository's
// root), skipping the test without it (failing with KVWATCH_REQUIRE_TOOLS=1).
func prometheus3(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KVWATCH_PROMETHEUS3_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "bin", "prometheus3")
	}
	p := filepath.Join(dir, "prometheus")
	if _, err := os.Stat(p); err != nil {
		msg := "Prometheus 3 not built in " + dir + "; run `make prometheus3` (tools/prometheus3/build.sh)"
		if os.Getenv(testenv.RequireToolsEnv) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func TestSpellingTheStoreHolds(t *testing.T) {
	engine := escapingEngine(t)
	colonFile := filepath.Join("testdata", "escaping", "sglang-colon.json")
	underFile := filepath.Join("testdata", "escaping", "sglang-underscore.json")
	for _, tc := range []struct {
		name       string
		prometheus func(*testing.T) string
		version    string // the start of the version buildinfo reports
		colon      bool   // the store holds sglang:x
	}{
		{"Prometheus 3 stores sglang_x", prometheus3, "3.", false},
		{"Prometheus 2 stores sglang:x", func(t *testing.T) string { return testenv.Tool(t, "prometheus", "prometheus") }, "2.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prom := tc.prometheus(t)
			dir := t.TempDir()
			cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: [%q]\n",
				strings.TrimPrefix(engine.URL, "http://"))
			if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			base := startPrometheus(t, prom, filepath.Join(dir, "prometheus.yml"), freeAddr(t))
			need, wrong, needSpelling, otherSpelling := underFile, colonFile, "sglang_x", "sglang:x"
			stored := func(n string) string { return strings.Replace(n, ":", "_", 1) }
			if tc.colon {
				need, wrong, needSpelling, otherSpelling = colonFile, underFile, "sglang:x", "sglang_x"
				stored = func(n string) string { return n }
			}
			waitNames(t, base, stored("sglang:num_running_reqs"), stored("sglang:num_retracted_requests_total"))

			// The file in the spelling the store holds passes, without a note.
			rep := checkJSON(t, 0, need, "--against", base)
			compare(t, rep, nil)
			if len(rep.Notes) != 0 {
				t.Errorf("notes for %s = %+v, want none", need, rep.Notes)
			}

			// The other spelling: every selector is wrong-prefix, with the
			// spelling the store holds as its fix, and one note names it.
			rep = checkJSON(t, 1, wrong, "--against", base)
			other := func(n string) string {
				if tc.colon {
					return strings.Replace(n, "_", ":", 1)
				}
				return strings.Replace(n, ":", "_", 1)
			}
			var want []finding
			for _, w := range []struct{ where, selector string }{
				{`panel "SGLang KV" (id 1) query A`, "sglang:kv_used_tokens"},
				{`panel "SGLang KV" (id 1) query A`, "sglang:max_total_num_tokens"},
				{`panel "SGLang KV" (id 1) query B`, `sglang:full_token_usage{engine_type="unified"}`},
				{`panel "SGLang requests" (id 2) query A`, "sglang:num_running_reqs"},
				{`panel "SGLang requests" (id 2) query A`, "sglang:num_queue_reqs"},
				{`panel "SGLang requests" (id 2) query B`, "sglang:num_retracted_requests_total"},
			} {
				sel, name := w.selector, strings.SplitN(w.selector, "{", 2)[0]
				if tc.colon {
					sel, name = strings.Replace(sel, ":", "_", 1), strings.Replace(name, ":", "_", 1)
				}
				want = append(want, finding{w.where, querycheck.KindWrongPrefix, querycheck.Error, sel, other(name)})
			}
			compare(t, rep, want)
			wantNote := fmt.Sprintf("needs the %s spelling of sglang names: this store (version %s", needSpelling, tc.version)
			wantCounts := fmt.Sprintf(") holds 6 names spelt %s and none spelt %s (", needSpelling, otherSpelling)
			if len(rep.Notes) != 1 || rep.Notes[0].File != wrong || !strings.HasPrefix(rep.Notes[0].Message, wantNote) ||
				!strings.Contains(rep.Notes[0].Message, wantCounts) || !strings.HasSuffix(rep.Notes[0].Message, "; 6 selectors here use the other spelling, reported as wrong-prefix, and --fix rewrites them") {
				t.Errorf("notes = %+v, want one for %s: %q…%q", rep.Notes, wrong, wantNote, wantCounts)
			}

			// --fix rewrites the file into the spelling the store holds,
			// which then passes.
			orig, err := os.ReadFile(wrong)
			if err != nil {
				t.Fatal(err)
			}
			copyFile := filepath.Join(t.TempDir(), filepath.Base(wrong))
			if err := os.WriteFile(copyFile, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			if code, _, errs := run(t, "check", "queries", "--fix", copyFile, "--against", base); code != 1 || !strings.Contains(errs, "wrote "+copyFile+".fixed (6 replacements)") {
				t.Fatalf("--fix = exit %d, stderr %q; want 1 and 6 replacements", code, errs)
			}
			fixed, err := os.ReadFile(copyFile + ".fixed")
			if err != nil {
				t.Fatal(err)
			}
			from, to := "sglang_", "sglang:"
			if !tc.colon {
				from, to = to, from
			}
			if want := strings.ReplaceAll(string(orig), from, to); string(fixed) != want {
				t.Errorf("fixed file =\n%s\nwant\n%s", fixed, want)
			}
			rep = checkJSON(t, 0, copyFile+".fixed", "--against", base)
			compare(t, rep, nil)
		})
	}
}
