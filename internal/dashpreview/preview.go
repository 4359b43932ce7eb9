// Package dashpreview renders a preview of a Grafana dashboard for readers
// without Grafana: an SVG picture of the panel layout (each panel where
// Grafana's 24-column grid puts it, with its title, type and series) and a
// Markdown list of every panel with its PromQL queries. It reads the
// dashboard JSON that `kvwatch stack generate` writes, not the Go specs
// behind it, so the preview shows exactly what Grafana would import; its
// test keeps docs/dashboards.md and docs/dashboards/*.svg current.
package dashpreview

import (
	"encoding/json"
	"fmt"
	"html"
	"sort"
	"strings"
	"unicode/utf8"
)

// Dashboard is the part of Grafana's dashboard JSON the preview shows.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is a dashboard template variable.
type Variable struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Type  string `json:"type"`
	Query any    `json:"query"`
}

// Panel is one panel; rows carry their collapsed panels in Panels.
type Panel struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
		Instant      bool   `json:"instant"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []Panel `json:"panels"`
}

// Parse reads a dashboard's JSON.
func Parse(b []byte) (*Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		return nil, fmt.Errorf("dashboard JSON: no title or no panels; is this a Grafana dashboard?")
	}
	return &d, nil
}

// flat lists the panels in Grafana's reading order (top to bottom, left to
// right), with the panels of collapsed rows after their row.
func (d *Dashboard) flat() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].GridPos, out[j].GridPos
		if a.Y != b.Y {
			return a.Y < b.Y
		}
		return a.X < b.X
	})
	return out
}

// typeNames are Grafana's names of its visualizations, as its panel picker shows them.
var typeNames = map[string]string{"timeseries": "time series", "stat": "stat", "gauge": "gauge", "bargauge": "bar gauge", "table": "table", "row": "row", "text": "text"}

func typeName(t string) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return t
}

// Grid geometry of the picture: Grafana's grid is 24 columns wide and
// counts heights in rows of 30 px; the picture keeps that aspect.
const (
	colPx    = 40
	rowPx    = 30
	gapPx    = 6
	titlePx  = 14  // title font size
	linePx   = 12  // other lines' font size
	charTtl  = 8.2 // bold 14 px, an average character
	charLine = 6.8 // 12 px
	charMono = 6.7 // 11 px monospace: 0.6 em
	exprRows = 3   // lines of PromQL shown per query at most
)

// wrap cuts s into lines of at most n characters, breaking after spaces,
// commas and closing brackets where it can; more than rows lines end in "…".
func wrap(s string, n, rows int) []string {
	if n < 2 {
		return nil
	}
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		if len(out) == rows {
			last := []rune(out[rows-1])
			if len(last) >= n {
				last = last[:n-1]
			}
			out[rows-1] = string(last) + "…"
			break
		}
		if len(r) <= n {
			out = append(out, string(r))
			break
		}
		cut := n
		for i := n; i > n/2; i-- {
			if strings.ContainsRune(" ,)}", r[i-1]) {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		r = r[cut:]
	}
	return out
}

// fit cuts s to what fits in px at charPx per character, marking the cut.
func fit(s string, px, charPx float64) string {
	n := int(px / charPx)
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// SVG draws the layout: one box per panel at its grid position, with its
// number (as in Markdown's list), title, type and unit, and the legend and
// PromQL of each query, as much as the box holds.
func SVG(d *Dashboard) []byte {
	panels := d.flat()
	height := 0
	for _, p := range panels {
		height = max(height, p.GridPos.Y+p.GridPos.H)
	}
	w, h := 24*colPx, height*rowPx
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", w, h+28, w, h+28)
	fmt.Fprintf(&b, `<title>%s: panel layout</title>`+"\n", esc(d.Title))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#f4f5f5"/>`+"\n", w, h+28)
	fmt.Fprintf(&b, `<text x="%d" y="19" font-size="15" font-weight="bold" fill="#24292e">%s</text>`+"\n", gapPx, esc(fit(d.Title+" (layout preview: panel titles and queries; values appear in Grafana)", float64(w-2*gapPx), 7.8)))
	for i, p := range panels {
		g := p.GridPos
		x, y := g.X*colPx+gapPx/2, g.Y*rowPx+28+gapPx/2
		pw, ph := g.W*colPx-gapPx, g.H*rowPx-gapPx
		inner := float64(pw - 16)
		if p.Type == "row" {
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" font-weight="bold" fill="#24292e">%s</text>`+"\n", x+4, y+ph-8, titlePx, esc(fit(fmt.Sprintf("%d. %s", i+1, p.Title), inner, charTtl)))
			continue
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" rx="3" fill="#ffffff" stroke="#c7d0d9"/>`+"\n", x, y, pw, ph)
		ty := y + 20
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" font-weight="bold" fill="#24292e">%s</text>`+"\n", x+8, ty, titlePx, esc(fit(fmt.Sprintf("%d. %s", i+1, p.Title), inner, charTtl)))
		kind := typeName(p.Type)
		if u := p.FieldConfig.Defaults.Unit; u != "" {
			kind += " · " + u
		}
		ty += 18
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" fill="#6a737d">%s</text>`+"\n", x+8, ty, linePx, esc(fit(kind, inner, charLine)))
		bottom := y + ph - 6
		for _, t := range p.Targets {
			if ty+16 > bottom {
				break
			}
			ty += 16
			l := t.LegendFormat
			if l == "" {
				l = "(no legend)"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="%d" fill="#1f60c4">%s</text>`+"\n", x+8, ty, linePx, esc(fit("▪ "+l, inner, charLine)))
			for _, line := range wrap(t.Expr, int((inner-12)/charMono), exprRows) {
				if ty+13 > bottom {
					break
				}
				ty += 13
				fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" font-family="monospace" fill="#57606a">%s</text>`+"\n", x+20, ty, esc(line))
			}
		}
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func esc(s string) string { return html.EscapeString(s) }

// Markdown describes the dashboard: its variables, the picture (at
// svgPath, relative to the Markdown file) and every panel with its queries.
func Markdown(d *Dashboard, file, svgPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", d.Title)
	fmt.Fprintf(&b, "`grafana/dashboards/%s` (uid `%s`).", file, d.UID)
	if len(d.Templating.List) > 0 {
		b.WriteString(" Variables:")
		for i, v := range d.Templating.List {
			if i > 0 {
				b.WriteString(",")
			}
			q, _ := v.Query.(string)
			switch {
			case v.Type == "datasource":
				fmt.Fprintf(&b, " `$%s` (a %s data source)", v.Name, q)
			case q != "":
				fmt.Fprintf(&b, " `$%s` = `%s`", v.Name, q)
			default:
				fmt.Fprintf(&b, " `$%s`", v.Name)
			}
		}
		b.WriteString(".")
	}
	fmt.Fprintf(&b, "\n\n![%s: panel layout](%s)\n\n", d.Title, svgPath)
	for i, p := range d.flat() {
		g := p.GridPos
		kind := typeName(p.Type)
		if u := p.FieldConfig.Defaults.Unit; u != "" {
			kind += ", unit `" + u + "`"
		}
		fmt.Fprintf(&b, "%d. **%s** (%s; at column %d, row %d, %d×%d)", i+1, p.Title, kind, g.X, g.Y, g.W, g.H)
		if p.Description != "" {
			// One list item: the description's paragraphs (the
			// "Empty when:" line) run on in it.
			fmt.Fprintf(&b, ": %s", strings.Join(strings.Fields(p.Description), " "))
		}
		b.WriteString("\n")
		for _, t := range p.Targets {
			mode := "range"
			if t.Instant {
				mode = "instant"
			}
			fmt.Fprintf(&b, "   ```promql\n   %s\n   ```\n", strings.ReplaceAll(t.Expr, "\n", "\n   "))
			if t.LegendFormat != "" {
				fmt.Fprintf(&b, "   %s query, legend `%s`\n", mode, t.LegendFormat)
			} else {
				fmt.Fprintf(&b, "   %s query\n", mode)
			}
		}
	}
	return b.String()
}
