package querycheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// diagnoseLive explains a name the store does not hold, with the catalog's
// knowledge and the store's own names.
func (c *Checker) diagnoseLive(ctx context.Context, name string, inHQ bool, add func(Kind, Severity, string, string, *Fix)) error {
	has := func(n string) (bool, error) {
		i, err := c.Store.Metric(ctx, n)
		return i.Exists, err
	}
	if rs := c.Catalog.RenamesOf(name); len(rs) > 0 {
		r := rs[0] // the first rename of the name decides
		to := finalName(c.Catalog, r)
		if to == "" {
			add(KindRemoved, Error, name+": no series; "+renameText(c.Catalog, r), "", nil)
			return nil
		}
		ok, err := has(to)
		if err != nil {
			return err
		}
		msg := name + ": no series; " + renameText(c.Catalog, r)
		if !ok {
			msg += " (" + to + " has no series here either)"
			hint, _, err := c.normalizedHint(ctx, to, r.Engine)
			if err != nil {
				return err
			}
			if hint != "" {
				msg += "; " + hint
			}
		}
		add(KindRenamed, Error, msg, to, renameFix(c.Catalog, name, r))
		return nil
	}
	if inHQ && !strings.HasSuffix(name, "_bucket") {
		if ok, err := has(name + "_bucket"); err != nil || ok {
			if ok {
				add(KindHistogramBucket, Error, name+": no series; histogram_quantile needs the histogram's buckets: "+name+"_bucket", name+"_bucket", &Fix{Old: name, New: name + "_bucket"})
			}
			return err
		}
	}
	if ok, err := has(name + "_total"); err != nil || ok {
		if ok {
			add(KindCounterTotal, Error, name+": no series; the counter is exposed as "+name+"_total", name+"_total", &Fix{Old: name, New: name + "_total"})
		}
		return err
	}
	if base, cut := strings.CutSuffix(name, "_total"); cut {
		if ok, err := has(base); err != nil || ok {
			if ok {
				add(KindCounterNoTotal, Error, name+": no series; this counter has no _total suffix: "+base, base, &Fix{Old: name, New: base})
			}
			return err
		}
	}
	for _, alt := range swapSeparator(name) {
		ok, err := has(alt)
		if err != nil {
			return err
		}
		if ok {
			add(KindWrongPrefix, Error, name+": no series; this store holds "+alt+" ("+escapingNote()+")", alt, &Fix{Old: name, New: alt})
			return nil
		}
	}
	msg, sug := name+": no series", ""
	if ss := c.Catalog.Lookup(name); len(ss) > 0 {
		e, _ := c.Catalog.Engine(ss[0].Metric.Engine)
		hint, as, err := c.normalizedHint(ctx, name, ss[0].Metric.Engine)
		if err != nil {
			return err
		}
		if hint != "" {
			msg, sug = name+": no series; "+hint, as
		} else {
			msg += " (a " + displayName(e) + " name: is that engine scraped by this store, and does it run a version that exposes it?)"
		}
	} else if e, ok := c.engineUndefinedOf(name); ok {
		why, s := c.undefinedText(name, e)
		msg, sug = name+": no series; "+strings.TrimPrefix(why, name+": "), s
	}
	add(KindNoSeries, Error, msg, sug, nil)
	return nil
}

// normalizedHint explains an engine's own name that a store of kvwatch's
// series lacks: "sglang:token_usage is not scraped here: kvwatch exports
// kvwatch_kv_usage_ratio"; as is that kvwatch_* series. Both are "" when
// the store holds no kvwatch series (it is not kvwatch's) or the name is
// kvwatch's own or Prometheus'.
func (c *Checker) normalizedHint(ctx context.Context, name, engine string) (hint, as string, err error) {
	if engine == "kvwatch" || engine == "prometheus" {
		return "", "", nil
	}
	own, err := c.Store.Metric(ctx, signal.TargetUp.Name)
	if err != nil || !own.Exists {
		return "", "", err
	}
	as = normalizedAs()[name]
	hint = name + " is not scraped here: this store holds kvwatch's normalized series, not " + displayEngine(c.Catalog, engine) + "'s own"
	if as != "" {
		hint = name + " is not scraped here: kvwatch exports " + as
	}
	return hint + " (or scrape the engines too, as the engines-<role> jobs of `kvwatch stack generate` do)", as, nil
}

// diagnoseOffline checks name against the catalog. It returns the labels
// the name carries (any is true when they cannot be known, e.g. an info
// metric's or a recorded series'), and ok false when the name itself is
// a finding.
func (c *Checker) diagnoseOffline(name string, inHQ bool, recorded map[string]Recorded, add func(Kind, Severity, string, string, *Fix)) (labelSet []string, anyLabels bool, ok bool) {
	if _, rec := recorded[name]; rec {
		return nil, true, true
	}
	res, ok := c.offlineLookup(name, inHQ, add, true)
	if ok {
		return res.labels, res.any, true
	}
	if res.reported {
		return nil, false, false
	}
	for _, alt := range swapSeparator(name) {
		r2, ok2 := c.offlineLookup(alt, inHQ, add, false)
		if !ok2 && !r2.found {
			continue
		}
		if r2.python && strings.Contains(alt, ":") {
			add(KindEscapedName, Info, name+": the engine exposes "+alt+"; "+escapingNote(), "", nil)
			// Report what is wrong with the canonical spelling (or what
			// it warns of), suggesting the fix in the spelling the query
			// uses.
			colonP := alt[:strings.IndexByte(alt, ':')+1]
			escaped := func(k Kind, sev Severity, msg, sug string, fix *Fix) {
				msg = strings.ReplaceAll(msg, colonP, strings.Replace(colonP, ":", "_", 1))
				if sug != "" {
					sug = strings.Replace(sug, ":", "_", 1)
				}
				if fix != nil {
					fix = &Fix{Old: name, New: strings.Replace(fix.New, ":", "_", 1)}
				}
				add(k, sev, msg, sug, fix)
			}
			c.offlineLookup(alt, inHQ, escaped, true)
			if ok2 {
				return r2.labels, r2.any, true
			}
			return nil, false, false
		}
		add(KindWrongPrefix, Error, name+": no such name; the engine exposes "+alt, alt, &Fix{Old: name, New: alt})
		return nil, false, false
	}
	if e, ok := c.engineUndefinedOf(name); ok {
		msg, sug := c.undefinedText(name, e)
		add(KindUnknownMetric, Error, msg, sug, nil)
		return nil, false, false
	}
	msg := name + ": not in kvwatch's catalog of engine metrics; check it against a live store with --against"
	sug := c.didYouMean(name)
	if sug != "" {
		msg += " (did you mean " + sug + "?)"
	}
	add(KindUnknownMetric, Warning, msg, sug, nil)
	return nil, false, false
}

// undefinedText is the message and suggestion for a name under engine e's
// prefix that no version of e defines.
func (c *Checker) undefinedText(name string, e catalog.Engine) (msg, suggestion string) {
	msg = name + ": no " + displayName(e) + " version defines this name"
	if e.Name == "kvwatch" {
		msg = name + ": kvwatch exports no such metric (docs/metrics.md)"
	}
	suggestion = c.didYouMean(name)
	if suggestion != "" {
		msg += "; did you mean " + suggestion + "?"
	}
	return msg, suggestion
}

// engineUndefined reports whether name carries the prefix of an engine the
// catalog knows whole, in either spelling, while no version of that engine
// defines it: a misspelt name, not a series that may be absent.
func (c *Checker) engineUndefined(name string) bool {
	_, ok := c.engineUndefinedOf(name)
	return ok
}

func (c *Checker) engineUndefinedOf(name string) (catalog.Engine, bool) {
	e, ok := c.engineOfPrefix(name)
	if !ok || e.Name == "prometheus_client" || e.Name == "prometheus" {
		// prometheus_client's python_ and process_ are every Python or
		// Go program's too: the catalog does not know them all.
		return catalog.Engine{}, false
	}
	if c.catalogKnows(name) {
		return catalog.Engine{}, false
	}
	for _, alt := range swapSeparator(name) {
		if c.catalogKnows(alt) {
			return catalog.Engine{}, false
		}
	}
	return e, true
}

// catalogKnows reports whether the catalog has name as a sample, a rename,
// or with a counter's _total, a histogram's _bucket added or removed (the
// findings of those say what is wrong).
func (c *Checker) catalogKnows(name string) bool {
	if len(c.Catalog.Lookup(name)) > 0 || len(c.Catalog.RenamesOf(name)) > 0 || len(c.Catalog.Family(name+"_total")) > 0 {
		return true
	}
	for _, suf := range []string{"_total", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suf); ok && len(c.Catalog.Family(base)) > 0 {
			return true
		}
	}
	return false
}

// didYouMean returns the catalog's sample name nearest to name by edit
// distance, spelt as name spells its prefix separator, when it is close
// enough to be a typo of it; "" otherwise.
func (c *Checker) didYouMean(name string) string {
	limit := min(3, max(1, len(name)/6))
	best, bestD := "", limit+1
	escaped := !strings.Contains(name, ":")
	for _, cand := range c.sampleNames() {
		if escaped && strings.Contains(cand, ":") {
			cand = strings.Replace(cand, ":", "_", 1)
		}
		if d := editDistance(name, cand, bestD); d < bestD {
			best, bestD = cand, d
		}
	}
	if bestD > limit || best == name {
		return ""
	}
	return best
}

// sampleNames are the sample names of every catalog entry: a histogram's
// _bucket, _sum and _count, a summary's too.
func (c *Checker) sampleNames() []string {
	if c.names != nil {
		return c.names
	}
	seen := map[string]bool{}
	for _, m := range c.Catalog.Metrics() {
		names := []string{m.Name}
		switch m.Type {
		case catalog.Histogram:
			names = []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
		case catalog.Summary:
			names = append(names, m.Name+"_sum", m.Name+"_count")
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				c.names = append(c.names, n)
			}
		}
	}
	slices.Sort(c.names)
	return c.names
}

// editDistance is the Levenshtein distance between a and b (bytes), or
// any value of at least bound once it cannot be less.
func editDistance(a, b string, bound int) int {
	if d := len(a) - len(b); d >= bound || -d >= bound {
		return bound
	}
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= bound {
			return bound
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type offlineResult struct {
	found, reported, any, python bool
	labels                       []string
}

// offlineLookup resolves name in the catalog. With report false it only
// looks (for the alternative spelling).
func (c *Checker) offlineLookup(name string, inHQ bool, add func(Kind, Severity, string, string, *Fix), report bool) (offlineResult, bool) {
	var res offlineResult
	emit := func(k Kind, s Severity, msg, sug string, fix *Fix) {
		res.reported = true
		if report {
			add(k, s, msg, sug, fix)
		}
	}
	if rs := c.Catalog.RenamesOf(name); len(rs) > 0 {
		r := rs[0] // the first rename of the name decides
		res.found = true
		res.python = c.Catalog.PythonClient(r.Engine)
		to := finalName(c.Catalog, r)
		switch {
		case r.Deprecated:
			// Still exposed: a warning, and its labels are checked below.
			emit(KindDeprecated, Warning, name+": "+renameText(c.Catalog, r), to, renameFix(c.Catalog, name, r))
		case to == "":
			emit(KindRemoved, Error, name+": "+renameText(c.Catalog, r), "", nil)
			return res, false
		default:
			emit(KindRenamed, Error, name+": "+renameText(c.Catalog, r), to, renameFix(c.Catalog, name, r))
			return res, false
		}
	}
	ss := c.Catalog.Lookup(name)
	if len(ss) > 0 {
		res.found = true
		res.python = c.Catalog.PythonClient(ss[0].Metric.Engine)
		for _, s := range ss {
			if s.Metric.Type == catalog.Info && s.Metric.Labels == nil || s.Metric.Engine == "prometheus" && strings.HasPrefix(name, "ALERTS") {
				res.any = true
			}
			res.labels = append(res.labels, catalog.LabelsOf(s)...)
		}
		res.labels = append(res.labels, targetLabels...)
		hist := ss[0].Metric.Type == catalog.Histogram && ss[0].Suffix == ""
		if hist && inHQ {
			emit(KindHistogramBucket, Error, name+": histogram_quantile needs the histogram's buckets; use "+name+"_bucket", name+"_bucket", &Fix{Old: name, New: name + "_bucket"})
			return res, false
		}
		if hist {
			emit(KindNoSeries, Error, name+": a histogram has no series of its own name; query "+name+"_bucket, "+name+"_sum or "+name+"_count", name+"_bucket", nil)
			return res, false
		}
		if ss[0].Suffix == "" {
			c.meaningChanged(name, emit)
		}
		return res, true
	}
	if base, ok := strings.CutSuffix(name, "_bucket"); ok {
		if fam := c.Catalog.Family(base); len(fam) > 0 && fam[0].Type == catalog.Summary {
			res.found = true
			emit(KindNoSeries, Error, name+": "+base+" is a summary: it has no buckets, only "+base+`{quantile="..."}`+", "+base+"_sum and "+base+"_count", "", nil)
			return res, false
		}
	}
	if fam := c.Catalog.Family(name + "_total"); len(fam) > 0 && fam[0].Type == catalog.Counter {
		res.found, res.python = true, c.Catalog.PythonClient(fam[0].Engine)
		emit(KindCounterTotal, Error, name+": no such series; "+displayEngine(c.Catalog, fam[0].Engine)+" exposes the counter as "+name+"_total", name+"_total", &Fix{Old: name, New: name + "_total"})
		return res, false
	}
	if base, cut := strings.CutSuffix(name, "_total"); cut {
		if fam := c.Catalog.Family(base); len(fam) > 0 && fam[0].Type == catalog.Counter {
			res.found = true
			emit(KindCounterNoTotal, Error, name+": no such series; "+displayEngine(c.Catalog, fam[0].Engine)+" counters carry no _total suffix: "+base, base, &Fix{Old: name, New: base})
			return res, false
		}
	}
	return res, false
}

// engineOfPrefix returns the engine whose prefix name starts with, also in
// the underscore spelling a store may hold for a Python engine's colon.
func (c *Checker) engineOfPrefix(name string) (catalog.Engine, bool) {
	for _, e := range c.Catalog.Engines() {
		for _, p := range e.Prefixes {
			if strings.HasPrefix(name, p) || e.PythonClient && strings.HasPrefix(name, strings.Replace(p, ":", "_", 1)) {
				return e, true
			}
		}
	}
	return catalog.Engine{}, false
}

// swapSeparator returns name with its prefix separator flipped: sglang:x ↔
// sglang_x (first ':' becomes '_', or the first '_' becomes ':').
func swapSeparator(name string) []string {
	if i := strings.IndexByte(name, ':'); i > 0 {
		return []string{name[:i] + "_" + name[i+1:]}
	}
	if i := strings.IndexByte(name, '_'); i > 0 && i < len(name)-1 {
		return []string{name[:i] + ":" + name[i+1:]}
	}
	return nil
}

// escapingNote says where the two spellings of a Python engine's colon
// names come from. Prometheus stores names as the page spells them (3.16
// included, whatever escaping the answer declares); the page's spelling is
// prometheus_client's (openmetrics/exposition.py: sample names are escaped
// with the label-name character set, so ':' becomes '_', unless the
// scraper asked for allow-utf-8).
func escapingNote() string {
	return "a store holds a name as the page it scraped spelt it: prometheus_client ≥ 0.23.0 spells ':' as '_' in OpenMetrics sample names unless the scraper asks for escaping=allow-utf-8, " +
		"which Prometheus 3 does and Prometheus 2.x does not, and SGLang 0.5.16 answers with escaping=underscores (verl-project/rl-insight#160)"
}

// renameText explains r, following later renames of its new name.
func renameText(cat *catalog.Catalog, r catalog.Rename) string {
	s := displayEngine(cat, r.Engine)
	chain := cat.Final(r)
	var parts []string
	differs := ""
	for i, step := range chain {
		switch {
		case step.New == "" && i == 0 && step.Deprecated:
			parts = append(parts, "deprecated in "+s+" "+step.Version)
		case step.New == "" && i == 0:
			parts = append(parts, "removed in "+s+" "+step.Version)
		case step.New == "":
			parts = append(parts, "then removed in "+step.Version)
		case i == 0 && step.Deprecated:
			parts = append(parts, "deprecated for "+step.New+" in "+s+" "+step.Version)
		case i == 0 && step.Differs != "":
			parts = append(parts, "removed in "+s+" "+step.Version)
		case i == 0:
			parts = append(parts, "renamed "+step.New+" in "+s+" "+step.Version)
		default:
			parts = append(parts, "then "+step.New+" in "+step.Version)
		}
		if step.Note != "" {
			parts[len(parts)-1] += " (" + step.Note + ")"
		}
		if step.Differs != "" {
			differs = step.Differs
		}
	}
	msg := strings.Join(parts, ", ")
	switch last := chain[len(chain)-1]; {
	case last.New != "" && differs != "":
		msg += "; the closest is " + last.New + ", which is not the same series: " + differs + " (not rewritten by --fix)"
	case last.New != "":
		msg += "; use " + last.New
	}
	return msg
}

// renameFix is the --fix of name renamed by r's chain: nil when the chain
// ends in a removal or passes a name that means something else.
func renameFix(cat *catalog.Catalog, name string, r catalog.Rename) *Fix {
	chain := cat.Final(r)
	for _, step := range chain {
		if step.Differs != "" {
			return nil
		}
	}
	return fixOf(name, chain[len(chain)-1].New)
}

// meaningChanged reports a name (either spelling) whose meaning the engine
// changed, suggesting what to query for the old meaning in the query's
// spelling; never a --fix.
func (c *Checker) meaningChanged(name string, add func(Kind, Severity, string, string, *Fix)) {
	canonical := name
	chs := c.Catalog.ChangesOf(name)
	if len(chs) == 0 {
		for _, alt := range swapSeparator(name) {
			if chs = c.Catalog.ChangesOf(alt); len(chs) > 0 {
				canonical = alt
			}
		}
	}
	if len(chs) == 0 {
		return
	}
	ch := chs[0]
	msg := fmt.Sprintf("%s: its meaning changed in %s %s: %s", name, displayEngine(c.Catalog, ch.Engine), ch.Version, ch.Note)
	use := ch.Use
	if use != "" {
		if canonical != name {
			use = strings.Replace(use, ":", "_", 1)
		}
		msg += "; query " + use + " for what it meant before (not rewritten by --fix: check what the query means)"
	}
	add(KindMeaningChanged, Warning, msg, use, nil)
}

// finalName is the name r's chain of renames ends at ("" if removed).
func finalName(cat *catalog.Catalog, r catalog.Rename) string {
	chain := cat.Final(r)
	return chain[len(chain)-1].New
}

func displayEngine(cat *catalog.Catalog, engine string) string {
	e, ok := cat.Engine(engine)
	if !ok {
		return engine
	}
	return displayName(e)
}

func displayName(e catalog.Engine) string {
	if e.Display != "" {
		return e.Display
	}
	return e.Name
}

func fixOf(old, new string) *Fix {
	if new == "" {
		return nil
	}
	return &Fix{Old: old, New: new}
}

func listOrNone(l []string) string {
	var out []string
	for _, x := range l {
		if x == model.MetricNameLabel || slices.Contains(targetLabels, x) || slices.Contains(out, x) {
			continue
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return "no labels of its own"
	}
	return strings.Join(out, ", ")
}

func valuesText(vals []string) string {
	if len(vals) == 0 {
		return "no values"
	}
	var q []string
	for i, v := range vals {
		if i == 5 {
			q = append(q, fmt.Sprintf("and %d more", len(vals)-5))
			break
		}
		q = append(q, fmt.Sprintf("%q", Sanitize(v)))
	}
	return strings.Join(q, ", ")
}
