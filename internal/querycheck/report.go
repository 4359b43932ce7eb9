package querycheck

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WriteText writes the findings for people: one block per query with a
// finding (file, panel or rule, the expression line with a caret under
// the selector, the message), then notes and the summary line. Info
// findings are shown only with verbose.
func (r *Report) WriteText(w io.Writer, verbose bool) {
	lastHead := ""
	for _, f := range r.Findings {
		if f.Severity == Info && !verbose {
			continue
		}
		head := f.File
		if f.Line > 0 {
			head += fmt.Sprintf(":%d", f.Line)
		}
		head += "  " + f.Where
		if head+f.Expr != lastHead {
			fmt.Fprintln(w, Sanitize(head))
			lastHead = head + f.Expr
		}
		line, col := caretLine(f.Expr, f.Pos)
		fmt.Fprintf(w, "  %s\n", line)
		fmt.Fprintf(w, "  %s^ %s: %s [%s]\n", strings.Repeat(" ", col), f.Severity, Sanitize(f.Message), f.Kind)
	}
	for _, n := range r.Notes {
		where := n.File
		if n.Where != "" {
			where += "  " + n.Where
		}
		fmt.Fprintf(w, "note: %s: %s\n", Sanitize(where), Sanitize(n.Message))
	}
	fmt.Fprintln(w, r.Summary())
}

// Summary is the one-line result.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d of %d queries select nothing", r.Broken, r.Queries)
	if r.UnknownLabels > 0 {
		word := "matchers name labels"
		if r.UnknownLabels == 1 {
			word = "matcher names a label"
		}
		s += fmt.Sprintf("; %d label %s that no series has", r.UnknownLabels, word)
	}
	s += "; " + plural(r.Errors, "error") + ", " + plural(r.Warnings, "warning")
	if r.Skipped > 0 {
		s += fmt.Sprintf("; %d selectors not checked (names made of variables or regexes)", r.Skipped)
	}
	return s + " (against " + Sanitize(r.Against) + ")"
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.Notes == nil {
		r.Notes = []Note{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// caretLine returns the line of expr holding byte offset pos, made safe for
// a terminal, and the caret's column in it (in characters).
func caretLine(expr string, pos int) (string, int) {
	if pos > len(expr) {
		pos = len(expr)
	}
	start := strings.LastIndexByte(expr[:pos], '\n') + 1
	end := strings.IndexByte(expr[pos:], '\n')
	if end < 0 {
		end = len(expr)
	} else {
		end += pos
	}
	return Sanitize(expr[start:end]), utf8.RuneCountInString(expr[start:pos])
}

// Sanitize replaces control characters (and invalid UTF-8) so that text
// from files and stores cannot drive a terminal; a tab becomes a space to
// keep carets aligned.
func Sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r == utf8.RuneError, unicode.IsControl(r), r == 0x2028, r == 0x2029:
			return '?'
		}
		return r
	}, s)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
