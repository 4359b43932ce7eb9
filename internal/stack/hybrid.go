package stack

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// Hybrid models in the stack (docs/planning.md, "Hybrid models"): the
// alert on a hybrid model's state pool (its Mamba state slots or its
// sliding-window tokens on the GPU, beside the KV pool), the dashboards'
// "State pool" panels, and the alert's promtool tests.
//
// A state pool fills as the KV cache does (a running request holds a part
// of each), but what relieves it differs: fewer requests at once or more
// state slots, not more KV. So it has its own alert at the KV warning's
// threshold and hold, whose texts say whether the state pool is what caps
// the server's concurrency (kvwatch_binding_pool). A server without a
// state pool has no such series: the alert stays quiet, as it does when the
// engine does not report the pool's fill.

// AlertStateHigh is the state-pool alert; it has a section in
// docs/runbook.md.
const AlertStateHigh = "StatePoolUsageHigh"

// statePool is one kind of state pool: its pool type and the binding it
// is when it caps concurrency.
type statePool struct {
	typ     string
	binding kv.Binding
}

// stateTypes are the kinds of state pool, in the order the texts name
// them.
func stateTypes() []statePool {
	return []statePool{{kv.PoolMamba, kv.BindingMamba}, {kv.PoolSWA, kv.BindingSWA}}
}

// stateMatchers select the state pools among the cache-pool series: Mamba
// and SWA pools on the GPU (not the cache tiers below it).
func stateMatchers() []string {
	var types []string
	for _, t := range stateTypes() {
		types = append(types, t.typ)
	}
	return []string{signal.LabelPoolType + `=~"` + strings.Join(types, "|") + `"`, signal.LabelKVTier + `="` + kv.TierGPU + `"`}
}

// stateSel is the selector of every server's state pools.
func stateSel() string { return "{" + strings.Join(stateMatchers(), ",") + "}" }

// serverIdentity are the labels that name one server's series as kvwatch
// exports them and Prometheus scrapes them: the binding series of the
// alert's server is the one with the alert's values of all of them ("" for
// a label the alert does not have, which matches a series without it), and
// the panels join a server's series on them.
func serverIdentity() []string { return append(signal.ServerLabels(), "job", "instance") }

// bindingText is the sentence of the state alert's description on what
// caps the server's concurrency, as kvwatch_binding_pool says at the
// evaluation: this pool (the state pool, not the KV cache), another term
// (named in words, kv.BindingWords, as every face names it), or unknown
// (no series: kvwatch does not know the server's concurrency).
func bindingText() string {
	var sel, args []string
	for _, l := range serverIdentity() {
		sel = append(sel, l+"=%q")
		args = append(args, `(index $labels "`+l+`")`)
	}
	q := fmt.Sprintf(`printf "%s{%s} == 1" %s`, signal.BindingPool.Name, strings.Join(sel, ","), strings.Join(args, " "))
	var want strings.Builder
	want.WriteString(`{{ $pool := "" }}`)
	for _, t := range stateTypes() {
		fmt.Fprintf(&want, `{{ if eq $labels.%s "%s" }}{{ $pool = "%s" }}{{ end }}`, signal.LabelPoolType, t.typ, t.binding)
	}
	var words strings.Builder
	for i, b := range kv.Bindings() {
		if i > 0 {
			words.WriteString("{{ else if ")
		} else {
			words.WriteString("{{ if ")
		}
		fmt.Fprintf(&words, `eq $b "%s" }}%s`, b, kv.BindingWords(b))
	}
	words.WriteString("{{ else }}{{ $b }}{{ end }}")
	return want.String() +
		"{{ with " + q + " | query }}{{ $b := . | first | label \"" + signal.LabelBinding + "\" }}{{ if eq $b $pool }}" +
		signal.BindingPool.Name + " names this pool as what caps the server's concurrency: the state pool, not the KV cache, limits how many requests run at once. " +
		"Run fewer requests at once or give the state pool more room; more KV does not help." +
		"{{ else }}" + signal.BindingPool.Name + " names " + words.String() + " as what caps the server's concurrency, not this pool." +
		"{{ end }}{{ else }}What caps the server's concurrency is unknown (no " + signal.BindingPool.Name + ").{{ end }}"
}

// stateAlert returns AlertStateHigh (in the kv group): a state pool above
// the KV warning's threshold for its hold. Its value is the pool's usage.
func stateAlert(o Options, srvLabels string, alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.Rule {
	a := o.Config.Alerts
	return alert(AlertStateHigh, SeverityWarning, a.KVUsageWarningFor,
		fmt.Sprintf("%s%s > %s", signal.KVPoolUsageRatio.Name, stateSel(), num(a.KVUsageWarning)),
		"State pool ({{ $labels."+signal.LabelPoolType+" }}) of "+srvLabels+" is above "+pct(a.KVUsageWarning),
		"The {{ $labels."+signal.LabelPoolType+" }} state pool of {{ $labels.server }} is {{ $value | humanizePercentage }} full (warning above "+
			pct(a.KVUsageWarning)+" for "+a.KVUsageWarningFor.String()+"). "+bindingText())
}

// stateEmpty is why a state-pool panel may show no data.
const stateEmpty = "no selected server runs a hybrid model with a state pool (Mamba or sliding-window layers: SGLang), or the engine does not report the pool's fill"

// statePanels are the server dashboard's "State pool" panels: each state
// pool's usage, its capacity and headroom in requests beside the server's
// concurrency, and what caps the concurrency now. Every value is a series
// as exported: no series is unknown, never 0.
func statePanels(o Options) []panelSpec {
	o = o.WithDefaults()
	a := o.Config.Alerts
	ratio, one := f(0), f(1)
	sel := serverSel(stateMatchers()...)
	return []panelSpec{
		{kind: kindTimeseries, title: "State pool: usage", unit: "percentunit", min: ratio, max: one, w: 8, h: 8,
			description: "Used over capacity of a hybrid model's state pool on the GPU (Mamba state slots, one set per running request, or sliding-window tokens), and of its KV cache beside it. " +
				fmt.Sprintf("Above %s (kv_usage_warning) for %s, %s warns. ", pct(a.KVUsageWarning), a.KVUsageWarningFor, AlertStateHigh) +
				"A full state pool admits no more requests whatever KV is free: fewer requests at once or more state slots relieve it, not more KV.",
			emptyOK: stateEmpty,
			queries: []query{
				{expr: signal.KVPoolUsageRatio.Name + sel, legend: "{{server}} {{pool_type}}"},
				{expr: signal.KVUsageRatio.Name + serverSel() + " and on (" + strings.Join(serverIdentity(), ", ") + ") " + signal.KVPoolUsageRatio.Name + stateSel(),
					legend: "{{server}} KV cache"},
			},
			steps: usageSteps(o)},
		{kind: kindTimeseries, title: "State pool: requests it holds, and concurrency", unit: "short", min: ratio, w: 8, h: 8,
			description: "How many requests the state pool holds at once (its capacity over what a running request holds in it) and how many more fit, beside the server's concurrency: " +
				"min(running-request limit, KV capacity in requests, state capacity in requests). No capacity line while the pool's counts are not on the page (older SGLang) or, for SWA, while nothing runs.",
			emptyOK: stateEmpty,
			queries: []query{
				{expr: signal.StateCapacityRequests.Name + serverSel(), legend: "capacity {{server}} {{pool_type}}"},
				{expr: signal.StateHeadroomRequests.Name + serverSel(), legend: "headroom {{server}} {{pool_type}}"},
				{expr: signal.ConcurrencyRequests.Name + serverSel() + " and on (" + strings.Join(serverIdentity(), ", ") + ") " + signal.StateCapacityRequests.Name,
					legend: "concurrency {{server}}"},
			},
			steps: []step{{nil, green}}},
		{kind: kindTable, title: "State pool: what caps concurrency", unit: "short", w: 8, h: 8,
			description: "What caps each selected server's concurrency now (kvwatch_binding_pool): mamba_slots or swa_tokens (the state pool), kv_tokens (the KV cache) or running_limit. " +
				"Every server whose concurrency kvwatch knows is listed, hybrid or not; a server whose concurrency is unknown (nothing runs, or a term is unknown) is not.",
			emptyOK: "no selected server's concurrency is known (nothing runs, or a term of it is unknown)",
			queries: []query{{expr: signal.BindingPool.Name + serverSel() + " == 1", legend: "{{server}} {{binding}}", instant: true}},
			steps:   []step{{nil, blue}}},
	}
}

// fleetStatePanels are the fleet dashboard's view of the same: the fullest
// state pools, and per pool how many servers each term caps.
func fleetStatePanels(o Options) []panelSpec {
	o = o.WithDefaults()
	ratio, one := f(0), f(1)
	poolKey := []string{signal.LabelCluster, signal.LabelPool, signal.LabelRole}
	return []panelSpec{
		{kind: kindBarGauge, title: "State pools: fullest", unit: "percentunit", min: ratio, max: one, w: 12, h: 8,
			description: "Usage of the 15 fullest state pools of hybrid models (Mamba state slots, sliding-window tokens) on the GPU. " +
				AlertStateHigh + " warns above kv_usage_warning, as KVCacheUsageHigh does for the KV cache.",
			emptyOK: stateEmpty,
			queries: []query{{expr: fmt.Sprintf("topk(15, %s%s)", signal.KVPoolUsageRatio.Name, poolSel(stateMatchers()...)),
				legend: "{{server}} {{pool_type}}", instant: true}},
			steps: usageSteps(o)},
		{kind: kindTimeseries, title: "What caps concurrency: servers per term", unit: "short", min: ratio, w: 12, h: 8,
			description: "Per pool, how many servers each term caps (kvwatch_binding_pool): the state pool (mamba_slots, swa_tokens), the KV cache (kv_tokens) or the running-request limit. " +
				"A term that caps no server has no line (a count of nothing), and servers whose concurrency is unknown are not counted.",
			emptyOK: "no selected server's concurrency is known (nothing runs, or a term of it is unknown)",
			queries: []query{{expr: fmt.Sprintf("count by (%s) (%s%s == 1)", strings.Join(append(poolKey, signal.LabelBinding), ", "), signal.BindingPool.Name, poolSel()),
				legend: "{{binding}} " + poolLegend}},
			steps: []step{{nil, green}}},
	}
}

// The promtool tests of the state-pool alert.

// stateAnnotations are the expected texts of AlertStateHigh on a pool with
// labels l and usage value, whose server's concurrency binding (as
// kvwatch_binding_pool says) is binding, "" when it has none; written out
// here from the thresholds (see expectedAnnotations).
func stateAnnotations(o Options, l map[string]string, value, binding string) map[string]string {
	a := o.Config.Alerts
	typ, srvName, where := l[signal.LabelPoolType], l[signal.LabelServer], serverWhere(l)
	var caps string
	switch binding {
	case "":
		caps = "What caps the server's concurrency is unknown (no kvwatch_binding_pool)."
	case map[string]string{"mamba": "mamba_slots", "swa": "swa_tokens"}[typ]: // this pool
		caps = "kvwatch_binding_pool names this pool as what caps the server's concurrency: the state pool, not the KV cache, limits how many requests run at once. " +
			"Run fewer requests at once or give the state pool more room; more KV does not help."
	default:
		words := map[string]string{"kv_tokens": "KV tokens", "running_limit": "running-request limit", "mamba_slots": "state slots (mamba)", "swa_tokens": "SWA tokens"}[binding]
		caps = "kvwatch_binding_pool names " + words + " as what caps the server's concurrency, not this pool."
	}
	return valueUnitAnnotation(AlertStateHigh, map[string]string{
		"summary": "State pool (" + typ + ") of " + where + " is above " + percent(a.KVUsageWarning),
		"description": "The " + typ + " state pool of " + srvName + " is " + value + " full (warning above " + percent(a.KVUsageWarning) +
			" for " + a.KVUsageWarningFor.String() + "). " + caps,
		"runbook_url": o.RunbookURL + "#statepoolusagehigh",
	})
}

// stateRuleTests are the promtool tests of the state-pool alert. Samples
// are 1m apart; "low" is half the KV warning threshold, "high" halfway
// from it to 1. Every server reports kvwatch_binding_pool one-hot over the
// four terms (1 for the one named below), except hyb-3.
//
// Fire once held for kv_usage_warning_for, from 5m on, when they fill up
// from low to high: hyb-0's Mamba pool (binding mamba_slots: the state pool
// caps concurrency), hyb-1's SWA pool on a target without cluster and pool
// labels (binding swa_tokens: a label the alert lacks matches a binding
// series without it), hyb-2's Mamba pool (binding kv_tokens, its KV cache
// high too: named in words), and hyb-3's Mamba pool, whose server reports
// no binding (unknown; the binding series of a server of that name scraped
// by another kvwatch, instance 127.0.0.2, says mamba_slots and must not be
// read).
//
// Quiet throughout: kvhigh-0, whose KV cache is high and whose Mamba pool
// stays low; dense-0, a model without a state pool, whose KV cache and host
// cache tier (pool_type full) are high.
func stateRuleTests(o Options) []ruleTest {
	o = o.WithDefaults()
	a := o.Config.Alerts
	n := ceilMinutes(afterFor(mins(5), a.KVUsageWarningFor)) + 5
	low, high := a.KVUsageWarning/2, (a.KVUsageWarning+1)/2
	fill := constant(low, 4) + " " + constant(high, n-5) // low at 0–4m, high from 5m
	var in []inputSeries
	bindings := func(s srv, binds string) {
		for _, b := range []string{"running_limit", "kv_tokens", "mamba_slots", "swa_tokens"} {
			v := 0.0
			if b == binds {
				v = 1
			}
			in = append(in, inputSeries{s.sel(signal.BindingPool.Name, signal.LabelBinding, b), constant(v, n)})
		}
	}
	pool := func(s srv, typ, tier, values string) {
		in = append(in, inputSeries{s.sel(signal.KVPoolUsageRatio.Name, signal.LabelPoolType, typ, signal.LabelKVTier, tier), values})
	}
	hyb0, hyb1 := server("hyb-0", "decode", "p1"), srv{"hyb-1", "unified", "", ""}
	hyb2, hyb3 := server("hyb-2", "decode", "p1"), server("hyb-3", "prefill", "p2")
	kvHigh, dense := server("kvhigh-0", "decode", "p1"), server("dense-0", "decode", "p1")
	pool(hyb0, "mamba", "gpu", fill)
	in = append(in, inputSeries{hyb0.sel(signal.KVUsageRatio.Name), constant(low, n)})
	bindings(hyb0, "mamba_slots")
	pool(hyb1, "swa", "gpu", fill)
	bindings(hyb1, "swa_tokens")
	pool(hyb2, "mamba", "gpu", fill)
	in = append(in, inputSeries{hyb2.sel(signal.KVUsageRatio.Name), constant(high, n)})
	bindings(hyb2, "kv_tokens")
	pool(hyb3, "mamba", "gpu", fill)
	in = append(in, inputSeries{signal.BindingPool.Name + renderLabels(map[string]string{signal.LabelServer: "hyb-3", signal.LabelRole: "prefill",
		signal.LabelCluster: testCluster, signal.LabelPool: "p2", signal.LabelBinding: "mamba_slots", "job": testJob, "instance": "127.0.0.2:9477"}), constant(1, n)})
	pool(kvHigh, "mamba", "gpu", constant(low, n))
	in = append(in, inputSeries{kvHigh.sel(signal.KVUsageRatio.Name), constant(high, n)})
	bindings(kvHigh, "kv_tokens")
	in = append(in, inputSeries{dense.sel(signal.KVUsageRatio.Name), constant(high, n)})
	pool(dense, "full", "host", constant(high, n))
	bindings(dense, "kv_tokens")

	v := humanizePercentage(high)
	fire := func(s srv, typ, binding string) expAlert {
		l := s.alertLabels(SeverityWarning, signal.LabelPoolType, typ, signal.LabelKVTier, "gpu")
		return expAlert{ExpLabels: l, ExpAnnotations: stateAnnotations(o, l, v, binding)}
	}
	none := []expAlert{}
	checks := []alertTest{{mins(4), AlertStateHigh, none}}
	if a.KVUsageWarningFor > 0 {
		checks = append(checks, alertTest{beforeFor(mins(5), a.KVUsageWarningFor), AlertStateHigh, none})
	}
	checks = append(checks, alertTest{afterFor(mins(5), a.KVUsageWarningFor), AlertStateHigh, []expAlert{
		fire(hyb0, "mamba", "mamba_slots"), fire(hyb1, "swa", "swa_tokens"), fire(hyb2, "mamba", "kv_tokens"), fire(hyb3, "mamba", ""),
	}})
	return []ruleTest{{Interval: testStep, InputSeries: in, AlertRuleTests: checks}}
}
