package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// customOptions changes every threshold away from its default, so the
// generated unit tests are shown to follow the config.
func customOptions() Options {
	o := Options{Config: config.Default()}
	a := &o.Config.Alerts
	a.KVUsageWarning, a.KVUsageCritical = 0.8, 0.9
	a.KVUsageWarningFor, a.KVUsageCriticalFor = dur("3m"), dur("2m")
	a.KVFullWithin = dur("10m")
	a.QueueLength, a.QueueFor = 5, dur("2m")
	a.PreemptionsPerSecond, a.PreemptionsFor = 1, dur("3m")
	a.PrefixHitRatioLow, a.PrefixHitMinTokensPS, a.PrefixHitFor = 0.5, 10, dur("4m")
	a.LeakUsage, a.LeakFor = 0.2, dur("6m")
	a.RankSpread, a.RankSpreadFor = 0.1, dur("7m")
	a.TargetDownFor, a.StaleAfter = dur("1m"), dur("3m")
	a.TierFullUsage = 0.75
	o.KVFullFor = model.Duration(dur("2m"))
	return o
}

func TestRulesPromtool(t *testing.T) {
	for _, v := range promVersions(t) {
		for name, o := range map[string]Options{"default": {}, "custom": customOptions()} {
			t.Run("prometheus"+v.name+"/"+name, func(t *testing.T) {
				_, dir := generateDir(t, o)
				run(t, dir, v.promtool, "check", "rules", filepath.FromSlash(RecordingRulesFile), filepath.FromSlash(AlertRulesFile))
				run(t, dir, v.promtool, "test", "rules", filepath.FromSlash(AlertTestsFile), filepath.FromSlash(AlertFastTestsFile),
					filepath.FromSlash(AlertProjectionTestsFile))
			})
		}
	}
}

// TestRuleTestsAnyFor (issue 15 item 4): every for-duration the config
// accepts, sub-minute ones included, and thresholds across the range give
// unit tests that both promtools accept and pass. A 30s for-duration used
// to produce eval_time: -1m.
func TestRuleTestsAnyFor(t *testing.T) {
	versions := promVersions(t)
	thresholds := [][2]float64{{0.5, 0.7}, {0.9, 0.95}, {0.05, 0.1}, {0.85, 0.97}}
	for i, d := range []string{"1s", "15s", "30s", "45s", "1m", "90s", "5m", "1h"} {
		o := Options{Config: config.Default()}
		a := &o.Config.Alerts
		fd := dur(d)
		a.KVUsageWarningFor, a.KVUsageCriticalFor, a.QueueFor, a.PreemptionsFor = fd, fd, fd, fd
		a.PrefixHitFor, a.LeakFor, a.RankSpreadFor, a.TargetDownFor, a.StaleAfter = fd, fd, fd, fd, fd
		o.KVFullFor = fd
		th := thresholds[i%len(thresholds)]
		a.KVUsageWarning, a.KVUsageCritical = th[0], th[1]
		a.LeakUsage, a.RankSpread, a.PrefixHitRatioLow = th[0], th[1]-th[0], th[1]
		a.QueueLength, a.PreemptionsPerSecond, a.PrefixHitMinTokensPS = float64(1+10*i), 0.05*float64(i+1), float64(5*i+1)
		// tier_full_usage across its range [0, 1), 0 (any fill) included.
		a.TierFullUsage = []float64{0, 0.5, 0.95, 0.3}[i%4]
		for _, v := range versions {
			t.Run(fmt.Sprintf("for=%s/prometheus%s", d, v.name), func(t *testing.T) {
				_, dir := generateDir(t, o)
				run(t, dir, v.promtool, "test", "rules", filepath.FromSlash(AlertTestsFile), filepath.FromSlash(AlertFastTestsFile))
			})
		}
	}
}

// TestFastWindowTestsAnyConfig (issue 28): the fast window's tests, whose
// series and evaluations follow serve's scrape interval, the stack's
// Prometheus scrape interval, the evaluation interval and the window,
// pass under both promtools for windows, intervals and thresholds across
// their ranges: the shortest window the config accepts (two scrapes), one
// long against its intervals, equal cadences, a threshold of 1 (nothing
// fires: only the bursts are tested), thresholds low enough that the fill
// starts from 0, sub-minute for-durations.
func TestFastWindowTestsAnyConfig(t *testing.T) {
	versions := promVersions(t)
	for _, c := range []struct {
		name                  string
		scrape, prom, eval, w string
		warn, crit, exhausted float64
		warnFor               string
	}{
		{"defaults", "5s", "15s", "15s", "45s", 0.9, 0.97, 0.99, "10m"},
		{"1s everything", "1s", "1s", "1s", "45s", 0.9, 0.97, 0.99, "10m"},
		{"two scrapes", "5s", "5s", "15s", "10s", 0.9, 0.97, 0.99, "30s"},
		{"long window, slow evaluations", "10s", "30s", "1m", "2m", 0.8, 0.9, 0.995, "3m"},
		{"threshold 1", "15s", "15s", "30s", "30s", 0.9, 0.97, 1, "10m"},
		{"low thresholds", "5s", "15s", "15s", "45s", 0.05, 0.08, 0.1, "1s"},
	} {
		o := Options{Config: config.Default(), ScrapeInterval: dur(c.prom), EvaluationInterval: dur(c.eval)}
		o.Config.Global.ScrapeInterval = dur(c.scrape)
		a := &o.Config.Alerts
		a.KVUsageWarning, a.KVUsageCritical, a.KVUsageExhausted = c.warn, c.crit, c.exhausted
		a.KVUsageExhaustedWindow, a.KVUsageWarningFor = dur(c.w), dur(c.warnFor)
		for _, v := range versions {
			t.Run(c.name+"/prometheus"+v.name, func(t *testing.T) {
				_, dir := generateDir(t, o)
				run(t, dir, v.promtool, "test", "rules", filepath.FromSlash(AlertFastTestsFile))
			})
		}
	}
}

// TestGenerateFastWindowScrapes: the fast window must hold two of
// Prometheus' scrapes of kvwatch.
func TestGenerateFastWindowScrapes(t *testing.T) {
	for _, c := range []struct {
		scrape, window string
		want           string // "" for no error
	}{
		{"15s", "45s", ""},
		{"15s", "30s", ""},
		{"30s", "45s", "stack options: alerts: kv_usage_exhausted_window 45s holds fewer than two of Prometheus' scrapes of kvwatch (every 30s), " +
			"so KVCacheExhausted would page on one sample; raise it to at least 1m"},
	} {
		o := Options{Config: config.Default(), ScrapeInterval: dur(c.scrape)}
		o.Config.Alerts.KVUsageExhaustedWindow = dur(c.window)
		_, err := Generate(o)
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("Generate(scrape %s, window %s) = %v, want %q", c.scrape, c.window, err, c.want)
		}
	}
}

// TestFastWindowTestsCatchWrongWindow: the fast window's tests fail on a
// rule whose window is too short for the bursts (it pages on them) or too
// long for the fill (it pages too late), and on one with a for-duration.
func TestFastWindowTestsCatchWrongWindow(t *testing.T) {
	promtool := testenv.Tool(t, "prometheus", "promtool")
	right := "min_over_time(kvwatch_kv_usage_ratio[45s])"
	for _, c := range []struct{ name, old, new string }{
		{"window too short", right, "min_over_time(kvwatch_kv_usage_ratio[15s])"},
		{"window too long", right, "min_over_time(kvwatch_kv_usage_ratio[1m30s])"},
		{"instant usage", right, "kvwatch_kv_usage_ratio"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := generateTampered(t, Options{}, AlertRulesFile, c.old, c.new)
			cmd := exec.Command(promtool, "test", "rules", filepath.FromSlash(AlertFastTestsFile))
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), AlertKVExhausted) {
				t.Errorf("promtool test rules with %s: err %v, want a failure naming %s:\n%s", c.new, err, AlertKVExhausted, out)
			}
		})
	}
}

// TestRuleTestsCoverEveryAlert checks that the generated promtool tests
// have, for every alert rule, a case where it fires and one where it must
// not, and that they check the main recording rules.
func TestRuleTestsCoverEveryAlert(t *testing.T) {
	rt := ruleTests(Options{})
	fires, quiet := map[string]bool{}, map[string]bool{}
	exprs := map[string]bool{}
	for _, g := range append(append(rt.Tests, fastRuleTests(Options{}).Tests...), projectionTests(Options{}).Tests...) {
		for _, a := range g.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
		for _, e := range g.PromqlExprTests {
			exprs[e.Expr] = true
		}
	}
	var rules []string
	for _, g := range AlertRules(Options{}).Groups {
		for _, r := range g.Rules {
			rules = append(rules, r.Alert)
		}
	}
	if d := cmp.Diff(AlertNames(), rules, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("AlertNames() and the alert rule file differ (-names +rules):\n%s", d)
	}
	for _, n := range rules {
		if !fires[n] {
			t.Errorf("no promtool test where %s fires", n)
		}
		if !quiet[n] && n != AlertWatchdog { // the watchdog is never quiet
			t.Errorf("no promtool test where %s must stay quiet", n)
		}
	}
	want := []string{RecUsageRatio("pool"), RecUsageRatio("fleet"), RecHitRatio("pool"),
		RecReporting("pool") + `{kv_cluster="c1",pool="p3",role="decode"}`, RecPartial("pool") + `{kv_cluster="c1",pool="p1",role="decode"}`}
	// Every cluster and fleet rule, over the fleet of aggregateRuleTests.
	want = append(append(want, aggregateNames(signal.LabelCluster)...), aggregateNames("fleet")...)
	for _, e := range want {
		if !exprs[e] {
			t.Errorf("no promtool test of recording rule %s", e)
		}
	}
}

// TestRecordingGroups pins the layout of the recording rules: the server
// group, then one aggregates group of the pool, cluster and fleet rules in
// that order and the planning rules last; and that a rule reads only
// series recorded before it in its own group, or the server group's rates
// and ratios (which serve computes on demand, and which only the pool
// level reads): Prometheus orders rules within a group only.
func TestRecordingGroups(t *testing.T) {
	gs := RecordingRules(Options{}).Groups
	if len(gs) != 3 || gs[0].Name != ServerGroup || gs[1].Name != AggregatesGroup || gs[2].Name != ProjectionGroup {
		var names []string
		for _, g := range gs {
			names = append(names, g.Name)
		}
		t.Fatalf("recording groups %v, want [%s %s %s]", names, ServerGroup, AggregatesGroup, ProjectionGroup)
	}
	// The projection group, on a schedule of its own, reads the pool sums
	// of the aggregates group (at worst one evaluation old: nothing for a
	// daily peak) and its own series recorded before each rule.
	aggregated, own := map[string]bool{}, map[string]bool{}
	for _, r := range gs[1].Rules {
		aggregated[r.Record] = true
	}
	for _, r := range gs[2].Rules {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Record, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && !aggregated[vs.Name] && !own[vs.Name] {
				t.Errorf("%s reads %s, neither a pool sum of %s nor recorded before it in %s", r.Record, vs.Name, AggregatesGroup, ProjectionGroup)
			}
			return nil
		})
		own[r.Record] = true
	}
	gs = gs[:2]
	level := func(name string) string { l, _, _ := strings.Cut(name, ":"); return l }
	serverRules, recorded := map[string]bool{}, map[string]bool{}
	for _, r := range gs[0].Rules {
		serverRules[r.Record] = true
	}
	for _, g := range gs[1:] {
		for _, r := range g.Rules {
			recorded[r.Record] = true
		}
	}
	var levels []string
	seen := map[string]bool{}
	for _, r := range gs[1].Rules {
		l := level(r.Record)
		if _, planning := map[string]bool{RecPoolFillRate: true, RecPoolFreeAfterDemand: true,
			RecPoolTimeToFull: true, RecPoolFilling: true, RecPoolDesiredServers: true}[r.Record]; planning {
			l = "planning"
		}
		if len(levels) == 0 || levels[len(levels)-1] != l {
			levels = append(levels, l)
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
		if err != nil {
			t.Fatalf("%s: %v", r.Record, err)
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			switch {
			case serverRules[vs.Name] && l != "pool":
				t.Errorf("%s (%s level) reads the server rule %s; only the pool level does", r.Record, l, vs.Name)
			case recorded[vs.Name] && !seen[vs.Name]:
				t.Errorf("%s reads %s, which is not recorded before it in %s", r.Record, vs.Name, AggregatesGroup)
			case (l == "kv_cluster" || l == "fleet") && strings.HasPrefix(vs.Name, "kvwatch_") && r.Record != RecDemandRatio(l):
				// Only the demand ratio's denominator (the capacity of the
				// servers that report demand) is recorded at no level.
				t.Errorf("%s reads the raw series %s: the %s level sums the level below's series", r.Record, vs.Name, l)
			}
			return nil
		})
		seen[r.Record] = true
	}
	if d := cmp.Diff([]string{"pool", "kv_cluster", "fleet", "planning"}, levels); d != "" {
		t.Errorf("rule order in %s by level (-want +got):\n%s", AggregatesGroup, d)
	}
}

func TestAlertRulesAnnotations(t *testing.T) {
	for _, g := range AlertRules(Options{}).Groups {
		for _, r := range g.Rules {
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("%s: annotation %s is missing", r.Alert, k)
				}
			}
			if want := DefaultRunbookURL + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url = %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if s := r.Labels["severity"]; (s != SeverityWarning && s != SeverityCritical) != (r.Alert == AlertWatchdog) {
				t.Errorf("%s: severity %q, want warning or critical (none for the watchdog only)", r.Alert, s)
			}
		}
	}
}

// TestRunbookAnchors checks that docs/runbook.md has a section for every
// alert, so every runbook_url lands on its diagnosis and remedy.
func TestRunbookAnchors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range AlertNames() {
		if !strings.Contains(string(b), "\n## "+n+"\n") {
			t.Errorf("docs/runbook.md has no section \"## %s\" (anchor #%s)", n, strings.ToLower(n))
		}
	}
}

// TestRuleTestsCatchTampering: a generated rule file changed in one place
// fails `promtool test rules` with a failure naming what changed.
//   - (issue 18 item 10) the unit tests' expected annotations come from the
//     thresholds, not from the rules' own text, so a summary that names a
//     threshold 5 points above the real one fails;
//   - the state-pool alert on another threshold, or reading another pool's
//     binding, fails its case;
//   - the server prompt-token rate written as a plain rate() fails the
//     counter-reset case.
func TestRuleTestsCatchTampering(t *testing.T) {
	promtool := testenv.Tool(t, "prometheus", "promtool")
	w := Options{}.WithDefaults().Config.Alerts.KVUsageWarning
	m := signal.PromptTokens.Name
	for _, c := range []struct {
		name, file, from, to, want string
	}{
		{"wrong threshold in " + AlertKVHigh + "'s summary", AlertRulesFile,
			fmt.Sprintf("is above %v%%", w*100), fmt.Sprintf("is above %v%%", w*100+5), AlertKVHigh},
		{"state pool alert above 99% instead of the warning", AlertRulesFile,
			fmt.Sprintf(`tier="gpu"} > %v`, w), `tier="gpu"} > 0.99`, AlertStateHigh},
		{"Mamba pool read as the SWA binding", AlertRulesFile,
			`{{ $pool = "mamba_slots" }}`, `{{ $pool = "swa_tokens" }}`, AlertStateHigh},
		{"plain rate() of " + m, RecordingRulesFile,
			counterRate(m, rateWindow, ""), "rate(" + m + "[" + rateWindow + "])", recRate("server", signal.PromptTokens)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := generateTampered(t, Options{}, c.file, c.from, c.to)
			cmd := exec.Command(promtool, "test", "rules", filepath.FromSlash(AlertTestsFile))
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("promtool test rules with a %s: err %v, want a failure naming %s:\n%s", c.name, err, c.want, out)
			}
		})
	}
}

// unguardedRates parses expr and returns how many rate(), irate() and
// increase() calls in it are guarded as counterRate writes them (the left
// side of `unless resets(<the same range>) > 0`, matching on every label)
// and the calls that are not.
func unguardedRates(expr string) (guarded int, bad []string, err error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return 0, nil, err
	}
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		c, ok := n.(*parser.Call)
		if !ok || (c.Func.Name != "rate" && c.Func.Name != "irate" && c.Func.Name != "increase") {
			return nil
		}
		if len(path) > 0 {
			b, ok := path[len(path)-1].(*parser.BinaryExpr)
			if ok && b.Op == parser.LUNLESS && b.LHS == parser.Expr(c) &&
				(b.VectorMatching == nil || !b.VectorMatching.On && len(b.VectorMatching.MatchingLabels) == 0) &&
				b.RHS.String() == "resets("+c.Args[0].String()+") > 0" {
				guarded++
				return nil
			}
		}
		bad = append(bad, c.String())
		return nil
	})
	return guarded, bad, nil
}

func TestUnguardedRates(t *testing.T) {
	for _, c := range []struct {
		expr    string
		guarded int
		bad     int
	}{
		{"(rate(x_total[5m]) unless resets(x_total[5m]) > 0)", 1, 0},
		{`(rate(x_total{a="b"}[5m] offset 15m) unless resets(x_total{a="b"}[5m] offset 15m) > 0) / (rate(y_total[5m]) > 0)`, 1, 1},
		{"rate(x_total[5m])", 0, 1},
		{"increase(x_total[1h]) > 3", 0, 1},
		{"rate(x_total[5m]) unless resets(y_total[5m]) > 0", 0, 1},
		{"rate(x_total[5m]) unless resets(x_total[1m]) > 0", 0, 1},
		{"rate(x_total[5m]) unless on (server) resets(x_total[5m]) > 0", 0, 1},
		{"rate(x_total[5m]) and resets(x_total[5m]) > 0", 0, 1},
		{"deriv(x[15m])", 0, 0},
	} {
		g, bad, err := unguardedRates(c.expr)
		if err != nil || g != c.guarded || len(bad) != c.bad {
			t.Errorf("unguardedRates(%s) = %d guarded, unguarded %v, err %v; want %d guarded, %d unguarded", c.expr, g, bad, err, c.guarded, c.bad)
		}
	}
}

// TestCounterRatesGuarded: every rate of a kvwatch counter in the
// generated rules and dashboards leaves out the windows in which the
// counter went down, as kvwatch's web UI, status and top do
// (docs/stack.md, "Recording rules").
func TestCounterRatesGuarded(t *testing.T) {
	rules := func(gs []rulefmt.RuleGroup) []string {
		var out []string
		for _, g := range gs {
			for _, r := range g.Rules {
				out = append(out, r.Expr)
			}
		}
		return out
	}
	var dash []string
	for _, d := range Dashboards(Options{}) {
		for _, q := range d.Queries() {
			dash = append(dash, grafanaVars.Replace(q.Expr))
		}
	}
	for _, c := range []struct {
		name  string
		exprs []string
	}{
		{"recording rules", rules(RecordingRules(Options{}).Groups)},
		{"alert rules", rules(AlertRules(Options{}).Groups)},
		{"dashboards", dash},
	} {
		total := 0
		for _, e := range c.exprs {
			g, bad, err := unguardedRates(e)
			if err != nil {
				t.Fatalf("%s: %s: %v", c.name, e, err)
			}
			total += g
			for _, b := range bad {
				t.Errorf("%s: %s in %s counts a counter that went down as an increase; write it with counterRate", c.name, b, e)
			}
		}
		if total == 0 {
			t.Errorf("%s: no guarded counter rate at all; the check found nothing to check", c.name)
		}
	}
}
