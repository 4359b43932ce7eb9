package stack

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestRulesParseWithPrometheus3 validates the generated rule files with the
// rule-file parser and PromQL parser of Prometheus 3 (the module kvwatch
// builds with), as promtool from Debian checks them with Prometheus 2.42.
func TestRulesParseWithPrometheus3(t *testing.T) {
	files, err := Generate(goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "rules/") || strings.HasSuffix(f.Path, ".test.yml") {
			continue
		}
		groups, errs := rulefmt.Parse(f.Data, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
		for _, err := range errs {
			t.Errorf("%s: %v", f.Path, err)
		}
		for _, g := range groups.Groups {
			n += len(g.Rules)
		}
	}
	if n == 0 {
		t.Fatal("no rules parsed")
	}
}
