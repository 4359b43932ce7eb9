package promapi

import (
	"github.com/prometheus/prometheus/promql/parser"
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
