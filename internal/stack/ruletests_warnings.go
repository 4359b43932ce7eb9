package stack

import (
	"github.com/kvwatch/kvwatch/internal/signal"
)

// targetWarningsAnnotations are the expected texts of AlertTargetWarnings.
func targetWarningsAnnotations(l map[string]string, value string) (summary, desc string) {
	s, r := l[signal.LabelServer], l[signal.LabelReason]
	return "Engine " + s + " reports implausible values (" + r + ")",
		"The last page of " + s + " had " + value + " " + r + " warnings, and its pages have had some for 10m: " +
			"the values concerned are not exported, so its KV signals are partly unknown. `kvwatch status` shows each warning's text."
}

// targetWarningsRuleTests: decode-0 has 2 negative warnings on every page
// from 0 on, so the alert is pending until the 10m hold has passed (quiet
// at 9m) and fires at 11m with the value 2. decode-1 reports 0 warnings
// (a clean page): never. prefill-0 has a used_over_capacity warning for 5m
// only, then clean pages: never.
func targetWarningsRuleTests(expect func(name string, labels map[string]string, value string) expAlert) []ruleTest {
	const n = 20
	dec, dec1 := server("decode-0", "decode", "p1"), server("decode-1", "decode", "p1")
	pre := server("prefill-0", "prefill", "p2")
	w := signal.TargetWarnings.Name
	l := dec.alertLabels(SeverityWarning, signal.LabelReason, "negative")
	return []ruleTest{{Interval: testStep,
		InputSeries: []inputSeries{
			{dec.sel(w, signal.LabelReason, "negative"), constant(2, n)},
			{dec1.sel(w, signal.LabelReason, "negative"), constant(0, n)},
			{pre.sel(w, signal.LabelReason, "used_over_capacity"), constant(1, 5) + " " + constant(0, n-6)},
		},
		AlertRuleTests: []alertTest{
			{mins(9), AlertTargetWarnings, []expAlert{}},
			{mins(11), AlertTargetWarnings, []expAlert{expect(AlertTargetWarnings, l, "2")}},
		}}}
}
