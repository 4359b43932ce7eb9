package web

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/stack"
)

// metricName finds kvwatch_* names in the page's script: a family
// (kvwatch_kv_usage_ratio), a recorded series (level:kvwatch_…:operation),
// or a prefix written with a * (kvwatch_rank_*).
var metricName = regexp.MustCompile(`\b(?:[a-z]+:)?kvwatch_[a-z0-9_]+(?::[a-z0-9_]+)?\*?`)

// unknownNames lists the names in js that are neither a family of
// families nor a recorded series of records; a prefix must start some
// family. The second result is every name found.
func unknownNames(js string, families, records []string) (unknown, found []string) {
	for _, n := range metricName.FindAllString(js, -1) {
		found = append(found, n)
		switch prefix, wildcard := strings.CutSuffix(n, "*"); {
		case wildcard:
			if !slices.ContainsFunc(families, func(f string) bool { return strings.HasPrefix(f, prefix) }) {
				unknown = append(unknown, n)
			}
		case strings.Contains(n, ":"):
			if !slices.Contains(records, n) {
				unknown = append(unknown, n)
			}
		case !slices.Contains(families, n):
			unknown = append(unknown, n)
		}
	}
	return unknown, found
}

// knownNames are the families package signal defines and the series the
// generated recording rules record.
func knownNames() (families, records []string) {
	for _, m := range append(signal.All(), signal.RemoteWrite()...) {
		families = append(families, m.Name)
	}
	for _, g := range stack.RecordingRules(stack.Options{}).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records = append(records, r.Record)
			}
		}
	}
	return families, records
}

// TestScriptMetricNames: every kvwatch_* name the web UI queries is one
// that serve exports (package signal) or that the generated recording
// rules record: a renamed family or rule cannot leave a chart silently
// empty.
func TestScriptMetricNames(t *testing.T) {
	b, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	families, records := knownNames()
	unknown, found := unknownNames(string(b), families, records)
	for _, n := range unknown {
		t.Errorf("app.js uses %s, which neither package signal defines nor the stack's recording rules record", n)
	}
	// The script's queries, so that an extraction that finds nothing
	// cannot pass.
	for _, want := range []string{"kvwatch_kv_usage_ratio", "kvwatch_target_up", "pool:kvwatch_kv_seconds_to_full:deriv15m"} {
		if !slices.Contains(found, want) {
			t.Errorf("found %q in app.js, not %s: the extraction misses names", found, want)
		}
	}
}

// TestUnknownNames: the check itself, on names that are wrong.
func TestUnknownNames(t *testing.T) {
	families, records := knownNames()
	for _, c := range []struct {
		js   string
		want []string
	}{
		{`q: "kvwatch_kv_usage_ratio{server=\"a\"}"`, nil},
		{`rate(kvwatch_preemptions_total[5m])`, nil},
		{`"pool:kvwatch_kv_filling:deriv15m"`, nil},
		{`// kvwatch_rank_* series exist only with more than one DP rank`, nil},
		{`kvwatch_kv_usage_ratios`, []string{"kvwatch_kv_usage_ratios"}},                                   // misspelt family
		{`kvwatch_preemptions`, []string{"kvwatch_preemptions"}},                                           // without _total
		{`"pool:kvwatch_kv_seconds_to_full:deriv5m"`, []string{"pool:kvwatch_kv_seconds_to_full:deriv5m"}}, // no such rule
		{`server:kvwatch_kv_usage_ratio:sum`, []string{"server:kvwatch_kv_usage_ratio:sum"}},
		{`kvwatch_nothing_*`, []string{"kvwatch_nothing_*"}},
		{`api/kvwatch/v1/report, kvwatch web UI`, nil}, // not metric names
	} {
		got, _ := unknownNames(c.js, families, records)
		if !slices.Equal(got, c.want) {
			t.Errorf("unknownNames(%s) = %q, want %q", c.js, got, c.want)
		}
	}
}
