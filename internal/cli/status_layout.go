package cli

import (
	"io"
	"strings"
	"unicode/utf8"
)

// textWidth is the width status writes its text to: the terminal's when
// stdout is one, else $COLUMNS, else 100 (defaultTextWidth).
func textWidth(e *env) int { return termWidth(e, defaultTextWidth) }

// defaultTextWidth is status's text width when stdout is no terminal and
// $COLUMNS is not set.
const defaultTextWidth = 100

// gap is the space between two columns.
const gap = "  "

// grid is status's table laid out in columns: every row has its cells by
// column, and columns are shortened or dropped, in the order of its steps,
// until the rows fit the width. A row may end in a prose text that starts
// at a column and wraps within the width, and in a note after its last
// cell that neither counts for the width nor wraps.
type grid struct {
	cols int
	// steps are the shortenings and drops, in order.
	steps []fitStep
	// min are the columns' least widths (nil: none).
	min  []int
	rows []gridRow
}

// fitStep shortens a column (its rows' short cells) or drops it.
type fitStep struct {
	col     int
	shorten bool
}

// drop and shorten are the steps of a grid.
func drop(col int) fitStep    { return fitStep{col: col} }
func shorten(col int) fitStep { return fitStep{col: col, shorten: true} }

type gridRow struct {
	cells []string
	// short are shorter cells by column, for a shorten step.
	short map[int]string
	// prose starts at column proseAt (the row's cells stop there).
	prose   string
	proseAt int
	note    string
}

func newGrid(cols int, steps ...fitStep) *grid { return &grid{cols: cols, steps: steps} }

// add appends a row of cells (fewer than the columns: the rest empty).
func (g *grid) add(cells ...string) *gridRow {
	c := make([]string, g.cols)
	copy(c, cells)
	g.rows = append(g.rows, gridRow{cells: c, proseAt: -1})
	return &g.rows[len(g.rows)-1]
}

// addProse appends a row of cells up to column at and prose from there.
func (g *grid) addProse(at int, prose string, cells ...string) {
	r := g.add(cells...)
	r.prose, r.proseAt = prose, at
}

// setShort sets the shorter form of a row's cell.
func (r *gridRow) setShort(col int, s string) {
	if r.short == nil {
		r.short = map[int]string{}
	}
	r.short[col] = s
}

// widths are the widths of the columns over every row; a column no row
// fills is 0 wide (unless min says otherwise).
func (g *grid) widths() []int {
	w := make([]int, g.cols)
	copy(w, g.min)
	for _, r := range g.rows {
		for c, s := range r.cells {
			if r.proseAt >= 0 && c >= r.proseAt {
				break
			}
			w[c] = max(w[c], utf8.RuneCountInString(s))
		}
	}
	return w
}

// span is the width of the kept columns of w: widths and gaps.
func span(w []int, keep []bool) int {
	n, cols := 0, 0
	for c, x := range w {
		if keep[c] && x > 0 {
			n += x
			cols++
		}
	}
	if cols > 1 {
		n += len(gap) * (cols - 1)
	}
	return n
}

// layout shortens and drops columns in the order of the steps until the
// rows fit width (0: no limit, every column kept whole), and returns the
// columns' widths and which are kept.
func (g *grid) layout(width int) (w []int, keep []bool) {
	w = g.widths()
	keep = make([]bool, g.cols)
	for c := range keep {
		keep[c] = true
	}
	for _, st := range g.steps {
		if width <= 0 || span(w, keep) <= width {
			break
		}
		if !st.shorten {
			keep[st.col] = false
			continue
		}
		for i := range g.rows {
			if s, ok := g.rows[i].short[st.col]; ok {
				g.rows[i].cells[st.col] = s
			}
		}
		w = g.widths()
	}
	return w, keep
}

// alignFirst gives the first n columns of a and b the same widths, so
// that two grids written one after the other line up there.
func alignFirst(a, b *grid, n int) {
	wa, wb := a.widths(), b.widths()
	a.min, b.min = make([]int, n), make([]int, n)
	for c := range n {
		a.min[c] = max(wa[c], wb[c])
		b.min[c] = a.min[c]
	}
}

// write lays the rows out to width (0: no limit) and writes them; it
// returns which columns it kept.
func (g *grid) write(out io.Writer, width int) (kept []bool) {
	w, keep := g.layout(width)
	var b strings.Builder
	for _, r := range g.rows {
		b.Reset()
		end := g.cols
		if r.proseAt >= 0 {
			end = r.proseAt
		}
		last := -1 // the last kept, filled cell before the prose
		for c := 0; c < end; c++ {
			if keep[c] && w[c] > 0 && r.cells[c] != "" {
				last = c
			}
		}
		col := 0 // where the text ends
		for c := 0; c < end; c++ {
			if !keep[c] || w[c] == 0 {
				continue
			}
			if c > last && r.proseAt < 0 {
				break
			}
			if col > 0 {
				b.WriteString(gap)
				col += len(gap)
			}
			b.WriteString(r.cells[c])
			n := utf8.RuneCountInString(r.cells[c])
			if c < last || r.proseAt >= 0 {
				b.WriteString(strings.Repeat(" ", w[c]-n))
				n = w[c]
			}
			col += n
		}
		switch {
		case r.proseAt >= 0:
			if col > 0 {
				b.WriteString(gap)
				col += len(gap)
			}
			lines := wrapText(r.prose, width-col)
			for i, l := range lines {
				if i > 0 {
					b.WriteString("\n" + strings.Repeat(" ", col))
				}
				b.WriteString(l)
			}
		case r.note != "":
			if col > 0 {
				b.WriteString(gap)
			}
			b.WriteString(r.note)
		}
		io.WriteString(out, strings.TrimRight(b.String(), " ")+"\n")
	}
	return keep
}

// minProse is the narrowest a wrapped text gets: past it, it starts
// further left would be better, but it still wraps at this width.
const minProse = 30

// wrapText breaks s at spaces into lines of at most width characters (a
// word longer than that stands alone); width 0 or less means no limit.
func wrapText(s string, width int) []string {
	if width <= 0 {
		return []string{s}
	}
	width = max(width, minProse)
	var lines []string
	line := ""
	for _, word := range strings.Split(s, " ") {
		switch {
		case line == "":
			line = word // an empty word (a double space) at a line's start is dropped
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
			line += " " + word
		default:
			lines = append(lines, strings.TrimRight(line, " "))
			line = word
		}
	}
	return append(lines, line)
}
