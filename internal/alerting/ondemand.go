package alerting

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// On-demand recording rules.
//
// A recording rule whose expression preserves labels (every output series
// has exactly the labels, apart from __name__, of the input series it was
// computed from) produces one output series per input series: storing it
// costs as much memory as its inputs, while it can be recomputed from them
// at any time. Such a rule is "on demand": the manager does not evaluate or
// store it, and every query (rules, the query API) has references to its
// name replaced by its expression. Label matchers on the reference can then
// be pushed down to every selector of the expression, because they select
// the same series on either side.

// rangeFuncs are the range-vector functions that keep each series' labels
// (they drop only __name__, or keep it) and take at most a number besides
// their one matrix argument.
var rangeFuncs = map[string]bool{
	"rate": true, "irate": true, "increase": true, "delta": true, "idelta": true, "deriv": true,
	"predict_linear": true, "changes": true, "resets": true,
	"avg_over_time": true, "min_over_time": true, "max_over_time": true, "sum_over_time": true,
	"count_over_time": true, "stddev_over_time": true, "stdvar_over_time": true,
	"last_over_time": true, "present_over_time": true, "quantile_over_time": true, "mad_over_time": true,
}

// labelPreserving reports whether expr is built only from plain vector
// selectors, number literals, parentheses, unary minus or plus, the
// label-keeping range functions of plain matrix selectors, arithmetic or
// comparison operators with default one-to-one matching (no on,
// ignoring, group_left or group_right) or with a scalar side, and unless
// with default matching: it keeps the left side's series whose labels
// (__name__ aside) no right-side series has, so it filters as a comparison
// does (the stack's counter rates, `rate(X[5m]) unless resets(X[5m]) > 0`).
func labelPreserving(expr parser.Expr) bool {
	switch n := expr.(type) {
	case *parser.NumberLiteral:
		return true
	case *parser.ParenExpr:
		return labelPreserving(n.Expr)
	case *parser.VectorSelector:
		return plainSelector(n)
	case *parser.UnaryExpr:
		return (n.Op == parser.SUB || n.Op == parser.ADD) && labelPreserving(n.Expr)
	case *parser.Call:
		if !rangeFuncs[n.Func.Name] {
			return false
		}
		for _, a := range n.Args {
			switch a := a.(type) {
			case *parser.MatrixSelector:
				vs, ok := a.VectorSelector.(*parser.VectorSelector)
				if !ok || a.RangeExpr != nil || !plainSelector(vs) {
					return false
				}
			case *parser.NumberLiteral:
			default:
				return false
			}
		}
		return true
	case *parser.BinaryExpr:
		if n.Op.IsSetOperator() {
			vm := n.VectorMatching
			if n.Op != parser.LUNLESS || vm != nil && (vm.On || len(vm.MatchingLabels) > 0) {
				return false
			}
			return labelPreserving(n.LHS) && labelPreserving(n.RHS)
		}
		if vm := n.VectorMatching; vm != nil {
			if vm.Card != parser.CardOneToOne || vm.On || len(vm.MatchingLabels) > 0 || len(vm.Include) > 0 ||
				vm.FillValues.LHS != nil || vm.FillValues.RHS != nil {
				return false
			}
		}
		return labelPreserving(n.LHS) && labelPreserving(n.RHS)
	}
	return false
}

// plainSelector reports whether vs has no modifier beyond a fixed offset
// or @ (no duration expression, no experimental anchored or smoothed).
func plainSelector(vs *parser.VectorSelector) bool {
	return vs.OriginalOffsetExpr == nil && !vs.Anchored && !vs.Smoothed
}

// selectorName returns the metric name vs selects by equality, if any.
func selectorName(vs *parser.VectorSelector) (string, bool) {
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value, true
		}
	}
	return "", false
}

// onDemand is one on-demand rule.
type onDemand struct {
	// expanded is the rule's expression with the references to other
	// on-demand rules already expanded, wrapped in a label_replace that
	// sets __name__ to the rule's name as a stored series would have it.
	expanded string
	// interval is the rule group's evaluation interval: the step of the
	// subquery that replaces a range selector over the rule's name.
	interval time.Duration
	// inputs are the label matchers of every selector of expanded
	// (Inputs), found once when the rule is classified.
	inputs [][]*labels.Matcher
}

// Expander replaces references to on-demand recording rules by their
// expressions. It is immutable after NewExpander and safe for concurrent
// use.
type Expander struct {
	rules  map[string]*onDemand
	parser parser.Parser
}

// RecordingRule is what NewExpander needs of a recording rule.
type RecordingRule struct {
	// Name is the recorded metric name.
	Name string
	// Expr is the rule's expression.
	Expr parser.Expr
	// Labels are the labels the rule adds (its own and its group's).
	Labels labels.Labels
	// Interval is the evaluation interval of its group.
	Interval time.Duration
}

// NewExpander classifies rules: a rule is on demand when its expression is
// label-preserving (see labelPreserving), it adds no labels, its name is
// recorded by no other rule, and every recording rule it references is on
// demand too (rules in a reference cycle, and rules that read a stored
// rule's output, stay stored).
func NewExpander(rules []RecordingRule) *Expander {
	e := &Expander{rules: map[string]*onDemand{}, parser: parser.NewParser(parser.Options{})}
	byName := map[string][]RecordingRule{}
	for _, r := range rules {
		byName[r.Name] = append(byName[r.Name], r)
	}
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var resolve func(name string) bool
	resolve = func(name string) bool {
		switch state[name] {
		case visiting:
			return false // a cycle
		case done:
			return e.rules[name] != nil
		}
		state[name] = visiting
		defer func() { state[name] = done }()
		rs := byName[name]
		if len(rs) != 1 || rs[0].Labels.Len() > 0 || rs[0].Expr.Type() != parser.ValueTypeVector || !labelPreserving(rs[0].Expr) {
			return false
		}
		ok := true
		parser.Inspect(rs[0].Expr, func(n parser.Node, _ []parser.Node) error {
			if vs, isVS := n.(*parser.VectorSelector); isVS {
				if ref, named := selectorName(vs); named && byName[ref] != nil && !resolve(ref) {
					ok = false
				}
			}
			return nil
		})
		if !ok {
			return false
		}
		// Expand a copy: the caller's expression stays as written.
		expr, err := e.parser.ParseExpr(rs[0].Expr.String())
		if err != nil {
			return false
		}
		expr = e.rewrite(expr)
		r := &onDemand{interval: rs[0].Interval,
			expanded: fmt.Sprintf("label_replace(%s, %q, %q, \"\", \"\")", expr, model.MetricNameLabel, name)}
		parser.Inspect(e.parse(r), func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				r.inputs = append(r.inputs, vs.LabelMatchers)
			}
			return nil
		})
		e.rules[name] = r
		return true
	}
	for _, r := range rules {
		resolve(r.Name)
	}
	return e
}

// OnDemand reports whether name is an on-demand rule.
func (e *Expander) OnDemand(name string) bool { return e != nil && e.rules[name] != nil }

// Inputs returns the label matchers of every selector in on-demand rule
// name's expression (other on-demand rules it reads expanded), nil when
// name is not one. The rule keeps its inputs' labels and matches two
// vectors one-to-one, so a series of it exists only where every input has
// a series with its labels (its name aside): what /api/v1/series lists
// for it. Offsets and @ are not applied. The slices are shared: callers
// must not modify them.
func (e *Expander) Inputs(name string) [][]*labels.Matcher {
	if e == nil || e.rules[name] == nil {
		return nil
	}
	return e.rules[name].inputs
}

// Names returns the on-demand rules' names, sorted.
func (e *Expander) Names() []string {
	if e == nil {
		return nil
	}
	out := make([]string, 0, len(e.rules))
	for n := range e.rules {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Expand returns expr with every selector of an on-demand rule's name
// replaced by the rule's expression: the selector's other label matchers
// are added to every selector inside, its offset and @ modifiers applied
// to them, and a range selector becomes a subquery of the expression over
// the same range, at the rule group's interval as step. expr is rewritten
// in place; use the returned root. A nil Expander returns expr.
func (e *Expander) Expand(expr parser.Expr) parser.Expr {
	if e == nil || len(e.rules) == 0 {
		return expr
	}
	return e.rewrite(expr)
}

// ExpandString parses q, expands it and returns its text; a query without
// on-demand names is returned unchanged.
func (e *Expander) ExpandString(q string) (string, error) {
	if e == nil || len(e.rules) == 0 {
		return q, nil
	}
	expr, err := e.parser.ParseExpr(q)
	if err != nil {
		return "", err
	}
	if !e.references(expr) {
		return q, nil
	}
	return e.rewrite(expr).String(), nil
}

// references reports whether expr names an on-demand rule.
func (e *Expander) references(expr parser.Expr) bool {
	found := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && e.match(vs) != nil {
			found = true
		}
		return nil
	})
	return found
}

// match returns the on-demand rule vs selects, or nil: vs must name it by
// equality, and any other matcher on __name__ must accept the name.
func (e *Expander) match(vs *parser.VectorSelector) *onDemand {
	name, ok := selectorName(vs)
	if !ok || !plainSelector(vs) {
		return nil
	}
	r := e.rules[name]
	if r == nil {
		return nil
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && !m.Matches(name) {
			return nil
		}
	}
	return r
}

// rewrite replaces the on-demand selectors below (and at) n.
func (e *Expander) rewrite(n parser.Expr) parser.Expr {
	switch n := n.(type) {
	case *parser.VectorSelector:
		if r := e.match(n); r != nil {
			return e.substitute(r, n, true)
		}
	case *parser.MatrixSelector:
		vs, ok := n.VectorSelector.(*parser.VectorSelector)
		if !ok || n.RangeExpr != nil {
			return n
		}
		if r := e.match(vs); r != nil {
			return &parser.SubqueryExpr{Expr: e.substitute(r, vs, false), Range: n.Range, Step: r.interval,
				OriginalOffset: vs.OriginalOffset, Timestamp: vs.Timestamp, StartOrEnd: vs.StartOrEnd}
		}
	case *parser.SubqueryExpr:
		n.Expr = e.rewrite(n.Expr)
	case *parser.ParenExpr:
		n.Expr = e.rewrite(n.Expr)
	case *parser.UnaryExpr:
		n.Expr = e.rewrite(n.Expr)
	case *parser.StepInvariantExpr:
		n.Expr = e.rewrite(n.Expr)
	case *parser.BinaryExpr:
		n.LHS, n.RHS = e.rewrite(n.LHS), e.rewrite(n.RHS)
	case *parser.AggregateExpr:
		n.Expr = e.rewrite(n.Expr)
		if n.Param != nil {
			n.Param = e.rewrite(n.Param)
		}
	case *parser.Call:
		for i, a := range n.Args {
			n.Args[i] = e.rewrite(a)
		}
	}
	return n
}

// substitute returns a fresh copy of r's expression for the reference vs:
// vs's matchers other than on __name__ added to every selector inside, and,
// when withTime, vs's offset and @ applied to every selector and subquery
// that is not inside a subquery (a subquery's inside is relative to it).
func (e *Expander) substitute(r *onDemand, vs *parser.VectorSelector, withTime bool) parser.Expr {
	expr := e.parse(r)
	var extra []*labels.Matcher
	for _, m := range vs.LabelMatchers {
		if m.Name != model.MetricNameLabel {
			extra = append(extra, m)
		}
	}
	var walk func(n parser.Node, inSubquery bool)
	walk = func(n parser.Node, inSubquery bool) {
		switch n := n.(type) {
		case *parser.VectorSelector:
			n.LabelMatchers = append(n.LabelMatchers, extra...)
			if withTime && !inSubquery {
				shift(&n.OriginalOffset, &n.Timestamp, &n.StartOrEnd, vs)
			}
			return
		case *parser.SubqueryExpr:
			if withTime && !inSubquery {
				shift(&n.OriginalOffset, &n.Timestamp, &n.StartOrEnd, vs)
			}
			walk(n.Expr, true)
			return
		}
		for c := range parser.ChildrenIter(n) {
			walk(c, inSubquery)
		}
	}
	walk(expr, false)
	return expr
}

// parse returns a fresh parse of r's expanded expression.
func (e *Expander) parse(r *onDemand) parser.Expr {
	expr, err := e.parser.ParseExpr(r.expanded)
	if err != nil {
		// r.expanded is the String() of a parsed expression.
		panic(fmt.Sprintf("alerting: on-demand rule expansion %q does not parse: %v", r.expanded, err))
	}
	return expr
}

// shift applies the reference's offset and @ to one inner selector or
// subquery: one with an @ of its own is evaluated at that time whatever
// the outer time, so it is left alone; otherwise the offsets add up and
// the outer @ applies.
func shift(off *time.Duration, ts **int64, startOrEnd *parser.ItemType, ref *parser.VectorSelector) {
	if *ts != nil || *startOrEnd != 0 {
		return
	}
	*off += ref.OriginalOffset
	if ref.Timestamp != nil {
		t := *ref.Timestamp
		*ts = &t
	}
	*startOrEnd = ref.StartOrEnd
}
