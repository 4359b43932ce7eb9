// Package querycheck finds dashboard, alert and autoscaler queries that
// match nothing. It reads Grafana dashboards, Prometheus rule files,
// PrometheusRule manifests and files of bare expressions, substitutes
// Grafana variables, parses every expression with the Prometheus PromQL
// parser and checks each vector and matrix selector (its metric name, each
// label matcher's name, and an = matcher's value) against a Store: a
// Prometheus-compatible API or engine /metrics pages. Without a store it
// checks names offline against kvwatch's catalog of engine metrics
// (package catalog) and kvwatch's own metrics (package signal).
//
// It does not evaluate queries: a selector that matches series can still
// be part of an expression that returns nothing (a failed join, a filter
// that never holds); only a ratio with an empty side is reported.
package querycheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/kvwatch/kvwatch/internal/catalog"
)

// Severity of a finding: an error breaks the query, a warning may, info
// explains what was accepted or skipped.
type Severity string

// Severities.
const (
	Error   Severity = "error"
	Warning Severity = "warning"
	Info    Severity = "info"
)

// Kind classifies a finding (stable strings, used in -o json).
type Kind string

// Finding kinds.
const (
	KindNoSeries         Kind = "no-series"                // nothing has this name
	KindRenamed          Kind = "renamed"                  // the engine renamed it; Suggestion is the new name
	KindRemoved          Kind = "removed"                  // the engine removed it without a replacement
	KindDeprecated       Kind = "deprecated"               // still exposed, but renamed in a newer version
	KindCounterTotal     Kind = "counter-without-total"    // a counter queried without its _total suffix
	KindCounterNoTotal   Kind = "counter-with-total"       // _total added to a counter whose library adds none (TGI)
	KindWrongPrefix      Kind = "wrong-prefix"             // sglang_x where the store holds sglang:x, or the reverse
	KindEscapedName      Kind = "escaped-name"             // offline: an underscore spelling some scrapers store
	KindHistogramBucket  Kind = "histogram-without-bucket" // histogram_quantile over a histogram's base name
	KindUnknownLabel     Kind = "unknown-label"            // a matcher on a label no series of the metric has
	KindLabelValue       Kind = "no-such-value"            // an = matcher whose value no series has
	KindEmptyRatio       Kind = "ratio-side-empty"         // a ratio whose one side selects nothing
	KindUnknownMetric    Kind = "unknown-metric"           // offline: a name the catalog does not know
	KindRecordedMissing  Kind = "recorded-no-series"       // a recorded series that the store does not hold
	KindParse            Kind = "parse-error"              // the expression does not parse
	KindUndefinedVar     Kind = "undefined-variable"       // a $variable the dashboard does not define
	KindTemplatedName    Kind = "templated-name"           // a metric name made of variables: not checked
	KindLabelValuesLabel Kind = "label-values-label"       // label_values(..., label) over a label that does not exist
	KindMeaningChanged   Kind = "meaning-changed"          // the name stayed, its meaning changed; Suggestion is what to query for the old one
	KindMixedEscaping    Kind = "mixed-escaping"           // offline: a file spells one engine's names both sglang:x and sglang_x
)

// Finding is one problem (or note) about one selector.
type Finding struct {
	File  string `json:"file"`
	Where string `json:"where"`
	// Line is the expression's line in the file (0 when unknown).
	Line int `json:"line,omitempty"`
	// Expr is the expression as written in the file.
	Expr string `json:"expr"`
	// Selector is the selector as written (variables and all).
	Selector string `json:"selector,omitempty"`
	// Pos is the selector's byte offset in Expr.
	Pos        int      `json:"pos"`
	Kind       Kind     `json:"kind"`
	Severity   Severity `json:"severity"`
	Message    string   `json:"message"`
	Suggestion string   `json:"suggestion,omitempty"`
	// Fix, when set, is a rename --fix applies: Old becomes New.
	Fix *Fix `json:"fix,omitempty"`
}

// Fix is one name replacement.
type Fix struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// Report is the result of checking inputs.
type Report struct {
	// Against describes the store ("offline" without one).
	Against  string    `json:"against"`
	Mode     string    `json:"mode"`
	Queries  int       `json:"queries"`
	Broken   int       `json:"broken"`
	Errors   int       `json:"errors"`
	Warnings int       `json:"warnings"`
	Findings []Finding `json:"findings"`
	Notes    []Note    `json:"notes"`
	// UnknownLabels counts label matchers naming a label no series has.
	UnknownLabels int `json:"unknown_labels"`
	// Skipped counts selectors not checked (templated names).
	Skipped int `json:"skipped_selectors"`
}

// Checker checks queries against a store or, with Store nil, offline.
type Checker struct {
	Store Store
	// Catalog is the offline knowledge, also used for suggestions against a
	// store; nil means catalog.Default() plus kvwatch's own metrics.
	Catalog *catalog.Catalog

	names []string  // the catalog's sample names, for did-you-mean
	uses  []nameUse // this check's names under a Python engine's colon prefix
}

// targetLabels are labels a scraper or the usual relabelling adds, so an
// engine's page does not have them and the offline catalog cannot know them.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "node",
	"cluster", "region", "zone", "env", "environment", "prometheus", "prometheus_replica", "exported_job", "exported_instance", "team"}

// Check checks every query of in.
func (c *Checker) Check(ctx context.Context, in *Inputs) (*Report, error) {
	if c.Catalog == nil {
		c.Catalog = KVWatchCatalog()
	}
	c.uses = nil
	rep := &Report{Against: "offline: kvwatch's catalog of engine metrics", Mode: "offline", Notes: slices.Clone(in.Notes)}
	if c.Store != nil {
		rep.Against = c.Store.Describe()
		rep.Mode = "prometheus"
		if c.Store.Scraped() {
			rep.Mode = "metrics"
		}
	}
	for i := range in.Queries {
		q := &in.Queries[i]
		fs, skipped, err := c.checkQuery(ctx, q, in.Recorded)
		if err != nil {
			return nil, err
		}
		rep.Queries++
		rep.Skipped += skipped
		broken := false
		for _, f := range fs {
			switch f.Severity {
			case Error:
				rep.Errors++
				broken = true
			case Warning:
				rep.Warnings++
			}
			if (f.Kind == KindUnknownLabel || f.Kind == KindLabelValuesLabel) && f.Severity != Info {
				rep.UnknownLabels++
			}
		}
		if broken {
			rep.Broken++
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	if c.Store == nil {
		mixed := c.mixedFindings()
		rep.Warnings += len(mixed)
		rep.Findings = append(rep.Findings, mixed...)
	}
	notes, err := c.spellingNotes(ctx)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, notes...)
	return rep, nil
}

// selResult is the verdict on one selector.
type selResult struct {
	empty    bool // selects nothing (an error was found)
	findings []Finding
}

func (c *Checker) checkQuery(ctx context.Context, q *Query, recorded map[string]Recorded) ([]Finding, int, error) {
	base := Finding{File: q.File, Where: q.Where, Line: q.Line, Expr: q.Expr}
	if q.LabelValues && q.Expr == "" {
		return c.checkLabelName(ctx, base, q.Label, q.EmptyWhen)
	}
	text, sub := q.Expr, Substituted{}
	if q.Grafana {
		sub = Substitute(q.Expr, q.Vars, false)
		text = sub.Text
	}
	var out []Finding
	if q.Vars != nil {
		for _, u := range sub.Undefined {
			f := base
			f.Kind, f.Severity = KindUndefinedVar, Warning
			f.Message = "$" + u + " is not a variable of this dashboard; Grafana sends it to Prometheus as written"
			out = append(out, f)
		}
	}
	p := parser.NewParser(parser.Options{EnableExperimentalFunctions: true})
	expr, err := p.ParseExpr(text)
	if err != nil && q.Grafana && len(sub.Used) > 0 {
		// A variable in a numeric position (topk($n, ...)): retry with numbers.
		sub2 := Substitute(q.Expr, q.Vars, true)
		if e2, err2 := p.ParseExpr(sub2.Text); err2 == nil {
			expr, err, sub = e2, nil, sub2
		}
	}
	if err != nil {
		f := base
		f.Kind, f.Severity = KindParse, Error
		var pe parser.ParseErrors
		if errors.As(err, &pe) && len(pe) > 0 {
			f.Pos = mapPos(q, sub, int(pe[0].PositionRange.Start))
			f.Message = "does not parse: " + pe[0].Err.Error()
		} else {
			f.Message = "does not parse: " + err.Error()
		}
		if q.Grafana && len(sub.Used) > 0 {
			f.Message += " (after substituting Grafana variables)"
		}
		return append(out, f), 0, nil
	}
	results := map[*parser.VectorSelector]*selResult{}
	skipped := 0
	var inspectErr error
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || inspectErr != nil {
			return nil
		}
		inHQ := insideHistogramQuantile(vs, path)
		r, skip, err := c.checkSelector(ctx, base, q, sub, vs, inHQ, meantEmpty(vs, path), recorded)
		if err != nil {
			inspectErr = err
			return nil
		}
		if skip {
			skipped++
		}
		results[vs] = r
		out = append(out, r.findings...)
		return nil
	})
	if inspectErr != nil {
		return nil, 0, inspectErr
	}
	// A ratio whose one side selects nothing while the other does.
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		be, ok := n.(*parser.BinaryExpr)
		if !ok || be.Op != parser.DIV {
			return nil
		}
		l, r := sideState(be.LHS, results), sideState(be.RHS, results)
		for _, side := range []struct {
			empty, other bool
			node         parser.Expr
			name         string
		}{{l.allEmpty, r.anyFine, be.LHS, "numerator"}, {r.allEmpty, l.anyFine, be.RHS, "denominator"}} {
			if !side.empty || !side.other {
				continue
			}
			f := base
			f.Kind, f.Severity = KindEmptyRatio, Error
			pr := side.node.PositionRange()
			f.Pos = mapPos(q, sub, int(pr.Start))
			if e := mapPos(q, sub, int(pr.End)); e > f.Pos {
				f.Selector = q.Expr[f.Pos:e]
			}
			f.Message = "the ratio's " + side.name + " selects nothing, so the ratio is always empty although its other side has series"
			out = append(out, f)
		}
		return nil
	})
	if q.LabelValues {
		fs, _, err := c.checkLabelOf(ctx, base, expr, q.Label, q.EmptyWhen)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, fs...)
	}
	return out, skipped, nil
}

type side struct{ allEmpty, anyFine bool }

func sideState(e parser.Expr, results map[*parser.VectorSelector]*selResult) side {
	s := side{allEmpty: true}
	n := 0
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			if r := results[vs]; r != nil {
				n++
				if !r.empty {
					s.allEmpty, s.anyFine = false, true
				}
			}
		}
		return nil
	})
	if n == 0 {
		s.allEmpty = false
	}
	return s
}

func insideHistogramQuantile(vs *parser.VectorSelector, path []parser.Node) bool {
	for i := len(path) - 1; i >= 0; i-- {
		call, ok := path[i].(*parser.Call)
		if !ok {
			continue
		}
		if call.Func.Name == "histogram_quantile" || call.Func.Name == "histogram_fraction" {
			return len(call.Args) > 0 && !contains(call.Args[0], vs)
		}
		// A selector inside another function (e.g. rate) inside
		// histogram_quantile still counts: keep walking up.
	}
	return false
}

// meantEmpty says why a selector may rightly select nothing: it is inside
// absent() or absent_over_time() (the alert fires when it is empty), or on
// the right of unless (nothing to exclude); "" otherwise.
func meantEmpty(vs *parser.VectorSelector, path []parser.Node) string {
	for i := len(path) - 1; i >= 0; i-- {
		switch n := path[i].(type) {
		case *parser.Call:
			if n.Func.Name == "absent" || n.Func.Name == "absent_over_time" {
				return "inside " + n.Func.Name + "() that makes the expression true (an alert fires) now; intended only if this alert watches for the metric disappearing"
			}
		case *parser.BinaryExpr:
			if n.Op == parser.LUNLESS && contains(n.RHS, vs) {
				return "on the right of unless it excludes nothing now, which may be intended"
			}
		}
	}
	return ""
}

func contains(e parser.Expr, target parser.Node) bool {
	found := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if n == target {
			found = true
		}
		return nil
	})
	return found
}

// mapPos maps a parser offset in the substituted text to the original.
func mapPos(q *Query, sub Substituted, p int) int {
	if q.Grafana {
		p = sub.Orig(p)
	}
	if p < 0 {
		p = 0
	}
	if p > len(q.Expr) {
		p = len(q.Expr)
	}
	return p
}

// selectorName is the selector's metric name: its name, or an
// __name__="x" matcher's value.
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

func (c *Checker) checkSelector(ctx context.Context, base Finding, q *Query, sub Substituted,
	vs *parser.VectorSelector, inHQ bool, emptyOK string, recorded map[string]Recorded) (*selResult, bool, error) {
	pos := mapPos(q, sub, int(vs.PosRange.Start))
	end := mapPos(q, sub, int(vs.PosRange.End))
	if end < pos {
		end = pos
	}
	base.Pos, base.Selector = pos, q.Expr[pos:end]
	name := selectorName(vs)
	res := &selResult{}
	add := func(k Kind, s Severity, msg, suggestion string, fix *Fix) {
		if (k == KindNoSeries || k == KindRecordedMissing) && s != Info && q.EmptyWhen != "" && c.Store != nil && !c.engineUndefined(name) {
			// The panel says when it is empty: absence is what it
			// expects (a misspelt engine name stays an error).
			s, msg = Info, msg+"; the panel declares it: empty when "+q.EmptyWhen
		}
		if k == KindNoSeries && s == Error && emptyOK != "" && !c.engineUndefined(name) {
			// absent(x), a unless x: no series may be what the rule wants
			// (not of a name no engine version defines: it never has any).
			s, msg = Warning, msg+"; "+emptyOK
		}
		f := base
		f.Kind, f.Severity, f.Message, f.Suggestion, f.Fix = k, s, msg, suggestion, fix
		res.findings = append(res.findings, f)
		if s == Error && k != KindUnknownLabel && k != KindLabelValue {
			res.empty = true
		}
	}
	if name == "" {
		return res, true, nil // {__name__=~"..."}: no single name to check
	}
	if templated(name) {
		add(KindTemplatedName, Info, "metric name made of variables; not checked", "", nil)
		return res, true, nil
	}
	c.recordUse(base, name)
	var labelSet, storeLabels []string
	anyLabels := false
	if c.Store != nil {
		info, err := c.Store.Metric(ctx, name)
		if err != nil {
			return nil, false, err
		}
		if !info.Exists {
			if r, ok := recorded[name]; ok {
				if q, ok := c.Store.(interface {
					Evaluates(ctx context.Context, name string) (bool, error)
				}); ok {
					// Rules a store computes on demand (kvwatch serve) have
					// no stored series but answer queries.
					if yes, err := q.Evaluates(ctx, name); err != nil || yes {
						return res, false, err
					}
				}
				add(KindRecordedMissing, Warning, name+": no series; it is recorded by "+r.Rule+" in "+r.File+": is that rule file loaded where --against reads?", "", nil)
				return res, false, nil
			}
			if fam := c.Catalog.Family(name); len(fam) > 0 && fam[0].Engine == "prometheus" && fam[0].Conditional == "" {
				if c.Store.Scraped() {
					add(KindNoSeries, Info, name+": written by Prometheus itself, never on an engine's page; not checked", "", nil)
					return res, false, nil
				}
				if up, err := c.Store.Metric(ctx, "up"); err != nil || !up.Exists {
					add(KindNoSeries, Warning, name+": no series; this store holds no up series at all, so it does not scrape (kvwatch serve, a remote-write receiver): the query works only on the Prometheus that scrapes", "", nil)
					return res, false, err
				}
			}
			if ss := c.Catalog.Lookup(name); len(ss) > 0 && ss[0].Metric.Conditional != "" && len(c.Catalog.RenamesOf(name)) == 0 {
				// Absent by design most of the time: a warning, not an error.
				add(KindNoSeries, Warning, name+": no series now; it exists "+ss[0].Metric.Conditional, "", nil)
				return res, false, nil
			}
			if err := c.diagnoseLive(ctx, name, inHQ, add); err != nil {
				return nil, false, err
			}
			return res, false, nil
		}
		for _, r := range c.Catalog.RenamesOf(name) {
			msg := fmt.Sprintf("%s: still has series here, but %s", name, renameText(c.Catalog, r))
			add(KindDeprecated, Warning, msg, finalName(c.Catalog, r), renameFix(c.Catalog, name, r))
			break
		}
		c.meaningChanged(name, add)
		if inHQ && !strings.HasSuffix(name, "_bucket") && !slices.Contains(info.Labels, "le") {
			if b, err := c.Store.Metric(ctx, name+"_bucket"); err == nil && b.Exists {
				add(KindHistogramBucket, Error, name+": histogram_quantile needs the histogram's buckets; use "+name+"_bucket", name+"_bucket", &Fix{Old: name, New: name + "_bucket"})
			}
		}
		labelSet, storeLabels = info.Labels, info.Labels
		if name == "ALERTS" || name == "ALERTS_FOR_STATE" {
			anyLabels = true // labels and states change with every evaluation
		}
		if c.Store.Scraped() {
			labelSet = append(slices.Clone(labelSet), targetLabels...)
		}
	} else {
		var ok bool
		labelSet, anyLabels, ok = c.diagnoseOffline(name, inHQ, recorded, add)
		if !ok {
			return res, false, nil
		}
	}
	if anyLabels {
		return res, false, nil
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel || m.Matches("") {
			continue // matches series without the label too
		}
		if (m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp) && templated(m.Value) {
			continue // a multi-value or "All" variable may expand to .*
		}
		if !slices.Contains(labelSet, m.Name) {
			sev, msg := Error, fmt.Sprintf("%s: no series of %s has a label %s", m.Name, name, m.Name)
			switch {
			case c.Store == nil:
				sev = Warning
				msg = fmt.Sprintf("%s: %s carries %s (and the scraper's target labels); %s is none of them unless your relabelling adds it", m.Name, name, listOrNone(labelSet), m.Name)
			case c.Store.Scraped():
				sev = Warning
				msg += " on the engine's page; fine only if your scraper's relabelling adds it"
			}
			add(KindUnknownLabel, sev, msg, "", nil)
			continue
		}
		if c.Store != nil && m.Type == labels.MatchEqual && !templated(m.Value) && (!c.Store.Scraped() || slices.Contains(storeLabels, m.Name)) {
			vals, complete, err := c.Store.LabelValues(ctx, name, m.Name)
			if err != nil {
				return nil, false, err
			}
			if !slices.Contains(vals, m.Value) {
				sev := Error
				if !complete || c.Store.Scraped() {
					sev = Warning
				}
				add(KindLabelValue, sev, fmt.Sprintf("%s=%q: no series of %s has this value; it has %s", m.Name, Sanitize(m.Value), name, valuesText(vals)), "", nil)
			}
		}
	}
	return res, false, nil
}

// checkLabelName checks label_values(label): some series must carry it.
func (c *Checker) checkLabelName(ctx context.Context, base Finding, label, emptyWhen string) ([]Finding, int, error) {
	if c.Store == nil || templated(label) {
		return nil, 0, nil
	}
	api, ok := c.Store.(*API)
	if !ok {
		return nil, 0, nil
	}
	var names []string
	if err := api.get(ctx, "/api/v1/labels", map[string][]string{}, &names); err != nil {
		return nil, 0, err
	}
	if slices.Contains(names, label) {
		return nil, 0, nil
	}
	f := base
	f.Kind, f.Severity = KindLabelValuesLabel, Error
	f.Message = "label_values(" + label + "): no series has a label " + label + ", so the variable has no values"
	declaredEmpty(&f, emptyWhen)
	return []Finding{f}, 0, nil
}

// declaredEmpty makes f, a variable without values, info when the
// variable's description says when it is empty.
func declaredEmpty(f *Finding, emptyWhen string) {
	if emptyWhen != "" {
		f.Severity = Info
		f.Message += "; the variable declares it: empty when " + emptyWhen
	}
}

// checkLabelOf checks that label_values(selector, label)'s label exists on
// the selector's metric.
func (c *Checker) checkLabelOf(ctx context.Context, base Finding, expr parser.Expr, label, emptyWhen string) ([]Finding, int, error) {
	vs, ok := expr.(*parser.VectorSelector)
	if !ok || templated(label) {
		return nil, 0, nil
	}
	name := selectorName(vs)
	if name == "" || templated(name) {
		return nil, 0, nil
	}
	var have []string
	if c.Store != nil {
		info, err := c.Store.Metric(ctx, name)
		if err != nil || !info.Exists {
			return nil, 0, err
		}
		have = info.Labels
		if c.Store.Scraped() {
			have = append(have, targetLabels...)
		}
	} else {
		ss := c.Catalog.Lookup(name)
		if len(ss) == 0 || ss[0].Metric.Type == catalog.Info && ss[0].Metric.Labels == nil {
			return nil, 0, nil
		}
		for _, s := range ss {
			have = append(have, catalog.LabelsOf(s)...)
		}
		have = append(have, targetLabels...)
	}
	if slices.Contains(have, label) {
		return nil, 0, nil
	}
	f := base
	f.Pos, f.Selector = 0, base.Expr
	f.Kind, f.Severity = KindLabelValuesLabel, Error
	if c.Store == nil {
		f.Severity = Warning
	}
	f.Message = fmt.Sprintf("label_values(..., %s): %s has no label %s (it has %s), so the variable has no values", label, name, label, listOrNone(have))
	declaredEmpty(&f, emptyWhen)
	return []Finding{f}, 0, nil
}
