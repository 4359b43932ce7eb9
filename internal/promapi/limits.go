package promapi

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// MaxNesting bounds how deeply a query expression nests, as nesting counts
// it before the expression is parsed. Parsing takes time in proportion to
// length times depth, and formatting (format_query) to length times depth
// squared: a 16 KiB expression nested 64 levels formats in about 0.1 s, one
// nested 1,600 levels took 17 s. kvwatch's own rules and dashboards nest
// at most 15 levels.
const MaxNesting = 64

// nesting returns an upper bound of the depth of qs's syntax tree, read
// from its tokens in one pass, without parsing: every pair of parentheses
// or brackets is a level, and every operator, and every range or subquery
// bracket, adds a level to each term within the same pair (in `a + b * c`
// the parser nests all three terms up to two operators deep). Label
// matchers inside braces count nothing.
func nesting(qs string) int {
	// level is an open pair: the operators directly inside it and the
	// deepest pair closed inside it so far.
	type level struct{ ops, inner int }
	open := []level{{}}
	closeLevel := func() {
		l := open[len(open)-1]
		open = open[:len(open)-1]
		p := &open[len(open)-1]
		p.inner = max(p.inner, 1+l.ops+l.inner)
	}
	lex := parser.Lex(qs)
	var it parser.Item
	braces := 0
	for {
		lex.NextItem(&it)
		switch {
		case it.Typ == parser.EOF || it.Typ == parser.ERROR:
			// A lexical error is the parser's to report; the
			// pairs still open count as closed here.
			for len(open) > 1 {
				closeLevel()
			}
			return 1 + open[0].ops + open[0].inner
		case it.Typ == parser.LEFT_BRACE:
			braces++
		case it.Typ == parser.RIGHT_BRACE:
			braces--
		case braces > 0:
		case it.Typ == parser.LEFT_PAREN:
			open = append(open, level{})
		case it.Typ == parser.LEFT_BRACKET:
			open[len(open)-1].ops++ // the range or subquery node
			open = append(open, level{})
		case it.Typ == parser.RIGHT_PAREN || it.Typ == parser.RIGHT_BRACKET:
			if len(open) > 1 {
				closeLevel()
			}
		case it.Typ.IsOperator():
			open[len(open)-1].ops++
		}
	}
}

// checkNesting refuses an expression nested deeper than MaxNesting,
// before anything parses it.
func checkNesting(qs string) *apiError {
	if d := nesting(qs); d > MaxNesting {
		return badData("invalid parameter \"query\": the expression nests %d levels deep, over the limit of %d (parentheses, brackets and operators each add one); split it or write it flatter", d, MaxNesting)
	}
	return nil
}

// DefaultMaxLabelBytes is the default of Options.MaxLabelBytes: 256 MiB.
// A label_replace over 100,000 series of 300 bytes of labels builds 30 MB;
// label_join nested 18 times over 138 series took 1.7 GiB before the bound.
const DefaultMaxLabelBytes = 256 << 20

// maxFloatText is the longest text of a float64 as count_values writes it
// (strconv.FormatFloat(f, 'f', -1, 64)): -2.2250738585072014e-308 is 327
// bytes. The history holds no histograms, whose text count_values would
// write instead.
const maxFloatText = 327

// labelCost bounds what an expression's result holds: at most n series,
// each with at most t bytes of label names and values, and no label value
// longer than v bytes. Float64, so that a bound past any int saturates at
// +Inf instead of wrapping.
type labelCost struct{ n, t, v float64 }

// labelBudget adds up the bytes of the label sets that an expression's
// label_join and label_replace calls build, from the series its selectors
// read. Those are the only functions that make label values longer than
// the ones they read: nested, each can double a value (or more), and the
// engine's sample bound does not see it, since the series count stays.
type labelBudget struct {
	q     storage.Querier
	built float64
	err   error
}

// checkLabelBytes refuses a query whose label_join and label_replace
// calls would build more than MaxLabelBytes of label sets; points is the
// query's evaluation steps (1 for an instant query). Only a query with one
// of those calls reads the history here: the label sets of every series
// its selectors match over the whole history.
func (a *API) checkLabelBytes(ctx context.Context, expr parser.Expr, points int64) *apiError {
	if expr == nil || !hasLabelFunc(expr) {
		return nil
	}
	q, err := a.opts.Queryable.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return &apiError{errInternal, err}
	}
	defer q.Close()
	b := &labelBudget{q: q}
	b.walk(ctx, expr, float64(max(points, 1)))
	if err := ctx.Err(); err != nil {
		return queryError(err)
	}
	if b.err != nil {
		return &apiError{errInternal, b.err}
	}
	if b.built > float64(a.opts.MaxLabelBytes) {
		return &apiError{errExec, fmt.Errorf("the query's label_join and label_replace calls may build up to %s of labels, over the %s limit (query.max-label-bytes): each copies the labels of every series it gets, and nested ones can double a label each time; nest fewer of them or select fewer series",
			byteSize(b.built), byteSize(float64(a.opts.MaxLabelBytes)))}
	}
	return nil
}

// byteSize writes b bytes in MiB, GiB or TiB.
func byteSize(b float64) string {
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%.3g TiB", b/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", b/(1<<20))
}

func isLabelFunc(n parser.Node) bool {
	c, ok := n.(*parser.Call)
	return ok && (c.Func.Name == "label_join" || c.Func.Name == "label_replace")
}

func hasLabelFunc(expr parser.Expr) bool {
	found := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		found = found || isLabelFunc(n)
		return nil
	})
	return found
}

// walk finds the outermost label functions and has cost charge them and
// everything they read; points is the evaluation steps at n.
func (b *labelBudget) walk(ctx context.Context, n parser.Node, points float64) {
	if isLabelFunc(n) {
		b.cost(ctx, n, points)
		return
	}
	if sq, ok := n.(*parser.SubqueryExpr); ok {
		points *= subquerySteps(sq)
	}
	for c := range parser.ChildrenIter(n) {
		b.walk(ctx, c, points)
	}
}

// cost bounds n's result and charges the label sets that the label
// functions in it build; points is the evaluation steps at n.
func (b *labelBudget) cost(ctx context.Context, n parser.Node, points float64) labelCost {
	if b.err != nil || ctx.Err() != nil {
		return labelCost{n: 1}
	}
	switch n := n.(type) {
	case *parser.VectorSelector:
		return b.selected(ctx, n.LabelMatchers)
	case *parser.SubqueryExpr:
		return b.cost(ctx, n.Expr, points*subquerySteps(n))
	case *parser.Call:
		switch n.Func.Name {
		case "label_join", "label_replace":
			in := b.cost(ctx, n.Args[0], points)
			var value float64 // the new value's length
			if n.Func.Name == "label_join" {
				// Every source value, separators between them.
				srcs := float64(len(n.Args) - 3)
				value = srcs*in.v + max(srcs-1, 0)*float64(len(stringArg(n.Args[2])))
			} else {
				// The replacement; each $ reference at most the
				// whole source value.
				repl := stringArg(n.Args[2])
				value = float64(len(repl)) + float64(strings.Count(repl, "$"))*in.v
			}
			out := labelCost{n: in.n, t: in.t + float64(len(stringArg(n.Args[1]))) + value, v: max(in.v, value)}
			b.built += out.n * out.t
			return out
		case "absent", "absent_over_time":
			// One series, labelled from the argument's matchers.
			l := float64(len(n.Args[0].String()))
			return labelCost{n: 1, t: l, v: l}
		}
	case *parser.AggregateExpr:
		in := b.cost(ctx, n.Expr, points)
		if n.Op != parser.COUNT_VALUES {
			return in // groups of the input series, no new labels
		}
		// A series per group and value at each step, labelled with the
		// value.
		return labelCost{n: in.n * points, t: in.t + float64(len(stringArg(n.Param))) + maxFloatText, v: max(in.v, maxFloatText)}
	case *parser.BinaryExpr:
		l, r := b.cost(ctx, n.LHS, points), b.cost(ctx, n.RHS, points)
		if m := n.VectorMatching; m != nil && len(m.Include) > 0 {
			// group_left(labels), group_right(labels): each series of
			// the many side takes labels of the series it matches on
			// the other, which may be another one at each step.
			many, one := l, r
			if m.Card == parser.CardOneToMany {
				many, one = r, l
			}
			return labelCost{n: many.n * min(one.n, points), t: l.t + r.t, v: max(l.v, r.v)}
		}
	}
	// Anything else: at most the series of its operands together (one
	// when it has none: vector(1)), no label set larger than the
	// largest of theirs.
	var out labelCost
	for c := range parser.ChildrenIter(n) {
		cc := b.cost(ctx, c, points)
		out.n += cc.n
		out.t, out.v = max(out.t, cc.t), max(out.v, cc.v)
	}
	out.n = max(out.n, 1)
	return out
}

// selected bounds the series that ms select: every one in the history
// (one at least: unknown is not none).
func (b *labelBudget) selected(ctx context.Context, ms []*labels.Matcher) labelCost {
	var out labelCost
	ss := b.q.Select(ctx, false, &storage.SelectHints{Start: math.MinInt64, End: math.MaxInt64, Func: "series"}, ms...)
	for ss.Next() {
		out.n++
		var t float64
		ss.At().Labels().Range(func(l labels.Label) {
			t += float64(len(l.Name) + len(l.Value))
			out.v = max(out.v, float64(len(l.Value)))
		})
		out.t = max(out.t, t)
	}
	if err := ss.Err(); err != nil {
		b.err = err
	}
	out.n = max(out.n, 1)
	return out
}

// stringArg is a string argument's value.
func stringArg(e parser.Expr) string {
	for {
		switch x := e.(type) {
		case *parser.StringLiteral:
			return x.Val
		case *parser.ParenExpr:
			e = x.Expr
		case *parser.StepInvariantExpr:
			e = x.Expr
		default:
			return e.String()
		}
	}
}
