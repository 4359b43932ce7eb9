package tui

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

// styles are the lipgloss styles of one renderer.
type styles struct {
	ok, warn, crit, dim, bold, sel, bad, title lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	if r == nil {
		r = lipgloss.NewRenderer(io.Discard)
		r.SetColorProfile(termenv.Ascii)
	}
	s := r.NewStyle()
	return styles{
		ok:    s.Foreground(lipgloss.Color("2")),
		warn:  s.Foreground(lipgloss.Color("3")),
		crit:  s.Foreground(lipgloss.Color("1")).Bold(true),
		dim:   s.Faint(true),
		bold:  s.Bold(true),
		sel:   s.Reverse(true),
		bad:   s.Foreground(lipgloss.Color("1")),
		title: s.Bold(true).Foreground(lipgloss.Color("6")),
	}
}

// level is the style for a usage ratio under the thresholds.
func (m Model) level(ratio float64) lipgloss.Style {
	switch {
	case ratio >= m.opts.Crit:
		return m.st.crit
	case ratio >= m.opts.Warn:
		return m.st.warn
	}
	return m.st.ok
}

// View renders the model.
func (m Model) View() string {
	w := m.width
	if w <= 0 {
		w = 80
	}
	var lines []string
	switch {
	case m.help:
		lines = m.helpView(w)
	case m.drill != "":
		lines = m.drillView(w)
	default:
		lines = m.fleetView(w)
	}
	if m.height > 0 && len(lines) > m.height {
		lines = lines[:m.height]
	}
	for i, l := range lines {
		lines[i] = strings.TrimRight(ansi.Truncate(l, w, "…"), " ")
	}
	return strings.Join(lines, "\n")
}

// header is the first line of every screen.
func (m Model) header(w int, where string) string {
	left := m.st.title.Render("kvwatch top") + " " + where
	var clock []string
	if m.have {
		clock = append(clock, m.rep.Time.Format("15:04:05"))
	}
	every := "every " + m.opts.Refresh.String()
	var tail []string
	tail = append(tail, m.lateness()...)
	if m.paused {
		tail = append(tail, m.st.warn.Render("PAUSED"))
	}
	join := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, "  ")
	}
	r := join(clock, []string{every}, tail)
	if len(tail) > 0 && w-lipgloss.Width(left)-lipgloss.Width(r) < 2 {
		// Narrow: what is late matters more than the refresh interval.
		r = join(clock, tail)
	}
	gap := w - lipgloss.Width(left) - lipgloss.Width(r)
	if gap < 2 {
		return left + "  " + r
	}
	return left + strings.Repeat(" ", gap) + r
}

// lateness says what the refresh interval does not: how many targets were
// still scraping at the last fetch (their rows are older, AGE marked "…")
// and the oldest of those rows, and how old the report itself is once it
// is more than two refreshes old (a fetch that hangs or fails) while not
// paused.
func (m Model) lateness() []string {
	if !m.have || m.now.IsZero() {
		return nil
	}
	var out []string
	late := 0
	var oldest time.Duration
	for _, s := range m.rep.Servers {
		if !s.Late {
			continue
		}
		late++
		if !s.ScrapedAt.IsZero() {
			oldest = max(oldest, m.now.Sub(s.ScrapedAt))
		}
	}
	if late > 0 {
		msg := fmt.Sprintf("%d of %d late", late, len(m.rep.Servers))
		if oldest > 0 {
			msg += ", oldest " + textfmt.Duration(oldest.Seconds())
		}
		out = append(out, m.st.warn.Render(msg))
	}
	if age := m.now.Sub(m.rep.Time); !m.paused && age > 2*m.opts.Refresh {
		out = append(out, m.st.warn.Render("report "+textfmt.Duration(age.Seconds())+" old"))
	}
	return out
}

// statusLines say that there is no report yet or the last fetch failed.
func (m Model) statusLines(w int) []string {
	var out []string
	if m.err != nil {
		age := ""
		if !m.errAt.IsZero() && !m.now.IsZero() {
			age = " " + textfmt.Duration(m.now.Sub(m.errAt).Seconds()) + " ago"
		}
		msg := wrap("fetch failed"+age+": "+m.err.Error(), w)
		if len(msg) > 3 {
			msg = msg[:3]
		}
		for _, l := range msg {
			out = append(out, m.st.bad.Render(l))
		}
	}
	if !m.have && m.err == nil {
		out = append(out, "waiting for the first report…")
	}
	return out
}

// ---- fleet table ----

// tableCol is one column of the fleet table.
type tableCol struct {
	col   column // sort column shown
	title string
	width int
	right bool
	prio  int // lower is kept first when the terminal is narrow
	cell  func(m Model, s report.Server) string
}

// layout picks the columns that fit in w and the width of the server column.
func (m Model) layout(w int) (cols []tableCol, nameW int) {
	full := w >= 128
	barW, headW := 6, 9
	if full {
		barW, headW = 10, 17
	}
	all := []tableCol{
		// The address beside the name where the name is another, on
		// terminals wide enough for every other column (as in status).
		{numColumns, "ADDRESS", 21, false, 11, func(m Model, s report.Server) string { return s.Address() }},
		{colRole, "ROLE", 7, false, 2, func(m Model, s report.Server) string { return string(s.Role) }},
		{colEngine, "ENGINE", 13, false, 9, func(m Model, s report.Server) string {
			if s.Server == nil {
				return textfmt.NA
			}
			return textfmt.Engine(s.Server.Engine, s.Server.EngineVersion)
		}},
		{colKV, "KV", barW + 8, false, 1, func(m Model, s report.Server) string { return m.kvCell(s, barW) }},
		{colUsed, "USED/CAP", 13, true, 7, func(m Model, s report.Server) string {
			if s.Server == nil || (!s.Server.Used.OK() && !s.Server.Capacity.OK()) {
				return textfmt.NA
			}
			return textfmt.Count(s.Server.Used) + "/" + textfmt.Count(s.Server.Capacity)
		}},
		{colHeadroom, "HEADROOM", headW, false, 3, func(m Model, s report.Server) string { return headroomCell(s, full) }},
		{colRunning, "RUN", 5, true, 4, func(m Model, s report.Server) string {
			if s.Server == nil {
				return textfmt.NA
			}
			return textfmt.Count(s.Server.Running)
		}},
		{colQueued, "QUEUE", 5, true, 4, func(m Model, s report.Server) string {
			if s.Server == nil {
				return textfmt.NA
			}
			return textfmt.Count(s.Server.Queued.QueuedTotal())
		}},
		{numColumns, "DEMAND", 6, true, 8, func(m Model, s report.Server) string {
			if s.Server == nil {
				return textfmt.NA
			}
			return textfmt.Times(s.Server.DemandRatio)
		}},
		stateCol(),
		limitCol(),
		{colHit, "HIT", 6, true, 6, func(m Model, s report.Server) string {
			h := s.PrefixHit()
			return textfmt.Hit(h.Ratio, h.SinceStart)
		}},
		{colPreempt, "PRE/S", 6, true, 5, func(m Model, s report.Server) string { return textfmt.Rate(numberOf(s, colPreempt, m.now)) }},
		{colTokens, "TOK/S", 7, true, 8, func(m Model, s report.Server) string { return textfmt.Rate(numberOf(s, colTokens, m.now)) }},
		{colAge, "AGE", 5, true, 4, func(m Model, s report.Server) string {
			v := numberOf(s, colAge, m.now)
			if !v.OK() {
				return textfmt.NA
			}
			if s.Late { // its scrape is still running: the row is the previous one
				return m.st.warn.Render(textfmt.Duration(v.V) + "…")
			}
			return textfmt.Duration(v.V)
		}},
		// 15 wide, so that at 160 columns it fits beside DEMAND and LIMIT.
		{numColumns, "USAGE HISTORY", 15, false, 10, func(m Model, s report.Server) string {
			return spark(m.hist[s.Name], 15)
		}},
	}
	const nameMin, nameMax = 16, 32
	avail := w - 2 // selection marker
	byPrio := make([]int, len(all))
	for i := range all {
		byPrio[i] = i
	}
	sort.SliceStable(byPrio, func(a, b int) bool { return all[byPrio[a]].prio < all[byPrio[b]].prio })
	keep := make([]bool, len(all))
	used := nameMin
	for _, i := range byPrio {
		if used+1+all[i].width <= avail {
			keep[i] = true
			used += 1 + all[i].width
		}
	}
	for i, c := range all {
		if keep[i] {
			cols = append(cols, c)
		}
	}
	nameW = min(nameMax, nameMin+avail-used)
	return cols, nameW
}

// fit pads or truncates a styled string to exactly w cells.
func fit(s string, w int, right bool) string {
	n := lipgloss.Width(s)
	if n > w {
		return ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", w-n)
	if right {
		return pad + s
	}
	return s + pad
}

func (m Model) fleetView(w int) []string {
	where := m.opts.Title
	if m.filter != "" || m.editing {
		where += "  filter /" + m.filter
		if m.editing {
			where += "▏"
		}
	}
	lines := []string{m.header(w, where)}
	lines = append(lines, m.statusLines(w)...)
	if !m.have {
		return lines
	}
	lines = append(append(lines, m.fleetLines(w)...), m.hybridLines(w)...)
	cols, nameW := m.layout(w)
	arrow := "▲"
	if m.desc {
		arrow = "▼"
	}
	head := "  " + fit(sortTitle("SERVER", colName, m.sortCol, arrow), nameW, false)
	for _, c := range cols {
		head += " " + fit(sortTitle(c.title, c.col, m.sortCol, arrow), c.width, c.right)
	}
	lines = append(lines, m.st.bold.Render(head))

	rows := m.rows()
	cur := m.cursor(rows)
	if m.static {
		cur = -1
	}
	footer := m.st.dim.Render("↑↓ select  enter ranks  s/S sort  1-0 column  / filter  p pause  ? help  q quit")
	room := len(rows)
	if m.height > 0 {
		room = max(1, m.height-len(lines)-1)
	}
	start := 0
	if len(rows) > room {
		room-- // for the "more" line
		room = max(1, room)
		start = max(0, min(cur-room/2, len(rows)-room))
	}
	if len(rows) == 0 {
		lines = append(lines, m.st.dim.Render("  no server matches the filter; Esc clears it"))
	}
	for i := start; i < len(rows) && i < start+room; i++ {
		lines = append(lines, m.rowLine(rows[i], i == cur, cols, nameW, w))
	}
	if hidden := len(rows) - room; hidden > 0 {
		lines = append(lines, m.st.dim.Render(fmt.Sprintf("  … %d of %d servers shown; ↑↓ scroll", room, len(rows))))
	}
	if m.static {
		return lines
	}
	if m.height > 0 {
		for len(lines) < m.height-1 {
			lines = append(lines, "")
		}
	}
	return append(lines, footer)
}

func sortTitle(title string, c, sorted column, arrow string) string {
	if c == sorted {
		return title + arrow
	}
	return title
}

// rowLine renders one server; a failed one shows its reason and error.
func (m Model) rowLine(s report.Server, selected bool, cols []tableCol, nameW, w int) string {
	mark := "  "
	if selected {
		mark = "› "
	}
	name := fit(s.Name, nameW, false)
	warned := s.Server != nil && len(s.Server.Warnings) > 0
	if warned {
		// A server with warnings: its numbers cannot all be taken at face
		// value (Enter shows why).
		name = fit("!"+s.Name, nameW, false)
	}
	switch {
	case selected:
		name = m.st.sel.Render(name)
	case warned:
		name = m.st.bad.Render(name)
	}
	line := mark + name
	if !s.OK {
		line += " " + fit(string(s.Role), 7, false)
		msg := "DOWN"
		if s.Reason != "" {
			msg += " " + s.Reason
		}
		if s.Error != "" {
			msg += ": " + s.Error
		}
		rest := w - lipgloss.Width(line) - 1
		return line + " " + m.st.bad.Render(ansi.Truncate(msg, max(rest, 1), "…"))
	}
	for _, c := range cols {
		line += " " + fit(c.cell(m, s), c.width, c.right)
	}
	return line
}

// kvCell is a usage bar with its percentage, the router's workers, or a
// cache server's tiers (it has no KV pool of its own).
func (m Model) kvCell(s report.Server, barW int) string {
	if s.Server == nil {
		return textfmt.NA
	}
	if r := s.Server.Router; r != nil {
		return "workers " + textfmt.Count(r.WorkersHealthy) + "/" + textfmt.Count(r.WorkersTotal)
	}
	if s.Role == kv.RoleCache {
		return m.st.dim.Render(textfmt.Tiers(s.Server))
	}
	return m.bar(s.Server.UsageRatio, barW) + " " + fit(textfmt.Percent(s.Server.UsageRatio), 7, true)
}

// bar draws a ratio 0–1 in w cells, coloured by the thresholds.
func (m Model) bar(v kv.Value, w int) string {
	if !v.OK() {
		return m.st.dim.Render(strings.Repeat("·", w))
	}
	if v.Prov == kv.Implausible {
		return m.st.bad.Render(strings.Repeat("!", w))
	}
	// Eighths of a cell: 1 % and 11 % of a 10-cell bar differ.
	n := int(math.Round(math.Max(0, math.Min(1, v.V)) * float64(w*8)))
	if v.V > 0 && n == 0 {
		n = 1 // some use is never drawn as none
	}
	full, part := n/8, n%8
	fill := strings.Repeat("█", full)
	empty := w - full
	if part > 0 {
		fill += string(eighths[part])
		empty--
	}
	return m.level(v.V).Render(fill) + m.st.dim.Render(strings.Repeat("░", empty))
}

// eighths are the left-aligned partial blocks, 1/8 to 7/8 of a cell.
var eighths = []rune(" ▏▎▍▌▋▊▉")

// fleetLines are the fleet summary: with one pool its capacity-weighted
// totals on one line; with more (prefill and decode, or several clusters)
// the limiting pool named, then a line per pool: never a blend of roles.
func (m Model) fleetLines(w int) []string {
	f := m.rep.Fleet
	up := 0
	for _, s := range m.rep.Servers {
		if s.OK && s.Role.HoldsKV() {
			up++
		}
	}
	parts := []string{m.st.bold.Render("FLEET"), fmt.Sprintf("%d up", up)}
	if f.Failed > 0 {
		parts = append(parts, m.st.bad.Render(fmt.Sprintf("%d down", f.Failed)))
	}
	if n := warnedServers(m.rep); n > 0 {
		parts = append(parts, m.st.bad.Render(fmt.Sprintf("%d with warnings (!)", n)))
	}
	// What the HIT column is over, said once, as status and the web UI
	// say it.
	var windows []string
	for _, s := range m.rep.Servers {
		if ph := s.PrefixHit(); ph.Ratio.OK() && s.Role != kv.RoleRouter {
			windows = append(windows, textfmt.HitWindow(ph.WindowSeconds, ph.SinceStart))
		}
	}
	hit := textfmt.HitWindows(windows)
	pools := m.rep.Pools
	if len(pools) <= 1 {
		var p report.Pool
		if len(pools) == 1 {
			p = pools[0]
		}
		parts = append(parts, m.poolParts(p)...)
		if hit != "" {
			parts = append(parts, m.st.dim.Render(hit))
		}
		return flow(parts, w, "       ")
	}
	if f.LimitIndex >= 0 {
		l := pools[f.LimitIndex]
		parts = append(parts, "limit: "+m.st.bold.Render(l.Name)+" pool "+m.level(l.UsageRatio.V).Render(textfmt.Percent(l.UsageRatio)))
	}
	if hit != "" {
		parts = append(parts, m.st.dim.Render(hit))
	}
	out := flow(parts, w, "       ")
	for _, p := range pools {
		out = append(out, flow(append([]string{"  " + m.st.bold.Render(fit(p.Name, 8, false))}, m.poolParts(p)...), w, "           ")...)
	}
	return out
}

// warnedServers counts the servers whose page drew warnings.
func warnedServers(r report.Report) int {
	n := 0
	for _, s := range r.Servers {
		if s.Server != nil && len(s.Server.Warnings) > 0 {
			n++
		}
	}
	return n
}

// poolParts are one pool's KV bar, tokens, headroom, requests and demand.
func (m Model) poolParts(p report.Pool) []string {
	parts := []string{"KV " + m.bar(p.UsageRatio, 10) + " " + textfmt.Percent(p.UsageRatio), textfmt.UsedOf(p.Used, p.Capacity)}
	if p.Counted < p.Servers {
		parts = append(parts, fmt.Sprintf("(%d of %d report KV)", p.Counted, p.Servers))
	}
	if h, ok := p.FirstHeadroom(); ok {
		parts = append(parts, "headroom "+textfmt.Headroom(h.Requests, h.Tokens))
	}
	parts = append(parts, "running "+textfmt.Count(p.Running), "queued "+textfmt.Count(p.Queued))
	if p.DemandRatio.OK() {
		parts = append(parts, "demand "+textfmt.Times(p.DemandRatio))
	}
	return append(parts, m.poolPlanParts(p.PoolKey)...)
}

// headroomCell shows how many requests of the smallest configured size
// fit and, in the full layout, how many of the server's context length.
func headroomCell(s report.Server, full bool) string {
	first, ok := s.FirstHeadroom()
	if !ok || !first.Requests.OK() {
		return textfmt.NA
	}
	out := textfmt.Headroom(first.Requests, first.Tokens)
	if !full {
		return out
	}
	for _, h := range s.Headroom {
		if h.Context && h != first {
			return out + " " + textfmt.Headroom(h.Requests, h.Tokens)
		}
	}
	return out
}

// ---- drill-down ----

func (m Model) drillView(w int) []string {
	var s *report.Server
	for i := range m.rep.Servers {
		if m.rep.Servers[i].Name == m.drill {
			s = &m.rep.Servers[i]
		}
	}
	lines := []string{m.header(w, "› "+m.drill)}
	lines = append(lines, m.statusLines(w)...)
	if s == nil {
		return append(lines, m.st.bad.Render(m.drill+" is no longer in the report"), m.st.dim.Render("esc back"))
	}
	lines = append(lines, m.st.bold.Render(s.Name)+"  "+s.URL+"  "+string(s.Role)+"  scraped "+m.ageOf(*s)+" ago")
	if len(s.Labels) > 0 {
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kvs []string
		for _, k := range keys {
			kvs = append(kvs, k+"="+s.Labels[k])
		}
		lines = append(lines, "labels  "+strings.Join(kvs, " "))
	}
	if !s.OK {
		lines = append(lines, m.st.bad.Render("DOWN "+s.Reason))
		for _, l := range wrap(s.Error, w) {
			lines = append(lines, m.st.bad.Render(l))
		}
		return append(lines, "", m.st.dim.Render("esc back  ↑↓ other server  q quit"))
	}
	sv := s.Server
	eng := textfmt.Engine(sv.Engine, sv.EngineVersion)
	if sv.Generation != "" {
		eng += " (" + sv.Generation + ")"
	}
	ctxLen := textfmt.Count(sv.ContextLength)
	if c := sv.ContextLength; c.Trusted() && c.V >= 1 && c.V <= kv.MaxExact && c.V == math.Trunc(c.V) {
		ctxLen = textfmt.Size(int(c.V)) // named as request sizes are: 128k
	}
	lines = append(lines, flow([]string{"engine " + eng, "model " + orNA(sv.Model), "context " + ctxLen + " tok"}, w, "  ")...)
	if r := sv.Router; r != nil {
		lines = append(lines, "workers healthy "+textfmt.Count(r.WorkersHealthy)+" of "+textfmt.Count(r.WorkersTotal))
	}
	if s.Role == kv.RoleCache {
		lines = append(lines, wrap("a cache server: it holds tiers for engines and no KV pool of its own, and is in no pool's KV sums; its tiers are below", w)...)
	} else {
		lines = append(lines, flow([]string{"KV " + m.bar(sv.UsageRatio, 20) + " " + textfmt.Percent(sv.UsageRatio),
			"used " + textfmt.UsedOf(sv.Used, sv.Capacity), "evictable " + textfmt.Count(sv.Evictable),
			"reserved " + textfmt.Percent(sv.ReservedRatio), "demand " + textfmt.Times(sv.DemandRatio) + " (" + textfmt.Count(sv.Demand) + " tok)",
			"DP spread " + textfmt.Percent(sv.Spread)}, w, "   ")...)
	}
	for _, x := range sv.Warnings {
		for _, l := range wrap("warning "+x.Reason+": "+x.Detail, w) {
			lines = append(lines, m.st.bad.Render(l))
		}
	}
	for _, x := range sv.Unavailable {
		for _, l := range wrap("unavailable "+x.Reason+": "+x.Detail, w) {
			lines = append(lines, m.st.dim.Render(l))
		}
	}
	if sv.UsageRatio.Prov == kv.Reserved {
		lines = append(lines, m.st.dim.Render("   "+textfmt.ReservedMark+" "+textfmt.ReservedNote))
	}
	hr := []string{"headroom"}
	for _, h := range s.Headroom {
		t := textfmt.Headroom(h.Requests, h.Tokens)
		if h.Context {
			t += " (context length)"
		}
		hr = append(hr, t)
	}
	if len(hr) == 1 {
		hr = append(hr, textfmt.NA)
	}
	lines = append(lines, flow(hr, w, "  ")...)
	lines = append(lines, m.planLines(*s, w)...)
	q := sv.Queued
	lines = append(lines, flow([]string{"running " + textfmt.Count(sv.Running), "queued " + textfmt.Count(q.QueuedTotal()) + ":",
		"waiting " + textfmt.Count(q.Waiting), "prealloc " + textfmt.Count(q.Prealloc), "bootstrap " + textfmt.Count(q.Bootstrap),
		"transfer " + textfmt.Count(q.Transfer), "inflight " + textfmt.Count(q.Inflight)}, w, "  ")...)
	// A windowed hit ratio is over the rates' window, said once at the end.
	ph := s.PrefixHit()
	hit := "prefix hit " + textfmt.Hit(ph.Ratio, ph.SinceStart)
	if ph.SinceStart {
		hit += " " + textfmt.SinceStart
	}
	if r := s.Rates; r != nil {
		items := []string{hit, "preemptions " + textfmt.Rate(r.PreemptionsPerSec) + "/s",
			"prompt " + textfmt.Rate(r.PromptTokensPS) + " tok/s", "generation " + textfmt.Rate(r.GenTokensPS) + " tok/s",
			"rates " + textfmt.Window(r.WindowSeconds)}
		if r.Reset {
			items = append(items, m.st.warn.Render("counters reset: engine restarted"))
		}
		lines = append(lines, flow(items, w, "  ")...)
	} else {
		lines = append(lines, flow([]string{hit, "preemptions " + textfmt.NA, "tokens/s " + textfmt.NA, "(rates need two scrapes)"}, w, "  ")...)
	}
	lines = append(lines, "usage history "+spark(m.hist[s.Name], min(60, max(10, w-14))))
	lines = append(lines, "")
	lines = append(lines, m.rankLines(*s, w)...)
	lines = append(lines, m.cachePoolLines(*s, w)...)
	return append(lines, "", m.st.dim.Render("esc back  ↑↓ other server  p pause  ? help  q quit"))
}

// rankLines are the per-rank table of a server.
func (m Model) rankLines(s report.Server, w int) []string {
	ranks := s.Server.Ranks
	if len(ranks) == 0 {
		return []string{m.st.dim.Render("no per-rank series: the engine reports this server as a whole")}
	}
	barW, sparkW := 10, max(0, min(40, w-74))
	head := fmt.Sprintf("%-4s %-4s %-4s %10s %10s %-*s %5s %5s", "DP", "TP", "PP", "USED", "CAP", barW+8, "USAGE", "RUN", "QUEUE")
	if sparkW >= 8 {
		head += " HISTORY"
	}
	out := []string{m.st.bold.Render(head)}
	for _, r := range ranks {
		if !r.Capacity.OK() && !r.Used.OK() && !r.UsageRatio.OK() && !r.Running.OK() && !r.Queued.QueuedTotal().OK() {
			continue // a series set without any KV or scheduler value: nothing to show
		}
		l := fmt.Sprintf("%-4s %-4s %-4s %10s %10s ", orNA(r.DP), orNA(r.TP), orNA(r.PP), textfmt.Count(r.Used), textfmt.Count(r.Capacity))
		l += m.bar(r.UsageRatio, barW) + " " + fit(textfmt.Percent(r.UsageRatio), 7, true)
		l += fmt.Sprintf(" %5s %5s", textfmt.Count(r.Running), textfmt.Count(r.Queued.QueuedTotal()))
		if sparkW >= 8 {
			l += " " + spark(m.rankHist[rankKey(s.Name, r.RankID)], sparkW)
		}
		out = append(out, l)
	}
	return out
}

func (m Model) ageOf(s report.Server) string {
	v := numberOf(s, colAge, m.now)
	if !v.OK() {
		return textfmt.NA
	}
	return textfmt.Duration(v.V)
}

// ---- help ----

func (m Model) helpView(w int) []string {
	lines := []string{m.header(w, "help"), ""}
	keys := [][2]string{
		{"↑ ↓ j k, PgUp PgDn, g G", "select a server (rank view: previous or next server)"},
		{"Enter → l", "drill into the server: per-rank rows, usage history"},
		{"Esc ← Backspace", "back to the fleet; Esc in the fleet clears the filter"},
		{"s / S", "sort by the next column / reverse the order"},
		{"1 … 9, 0", "sort by the Nth column, 0 the tenth (again: reverse)"},
		{"/  Enter  Esc", "filter: name, URL, role, engine, model, labels, reason"},
		{"p Space", "pause or resume refreshing"},
		{"r", "refresh now"},
		{"? h", "this help (? h Esc Enter close it)"},
		{"q Ctrl+C", "quit"},
	}
	for _, k := range keys {
		for i, l := range wrap(k[1], max(20, w-27)) {
			if i == 0 {
				lines = append(lines, fmt.Sprintf("  %-24s %s", k[0], l))
			} else {
				lines = append(lines, strings.Repeat(" ", 27)+l)
			}
		}
	}
	legend := [][2]string{
		{"KV", "used / capacity KV tokens, " + m.st.ok.Render("green") + " below " + textfmt.PercentOf(m.opts.Warn) + ", " +
			m.st.warn.Render("yellow") + " from " + textfmt.PercentOf(m.opts.Warn) + ", " + m.st.crit.Render("red") + " from " + textfmt.PercentOf(m.opts.Crit) +
			"; " + textfmt.ReservedMark + " marks " + textfmt.ReservedNote},
		{"HEADROOM", "requests that still fit, N×size: the smallest configured size, then the server's context length (as in status)"},
		{"HIT", "prefix-cache hit ratio since the last refresh (the FLEET line names the window); " + textfmt.SinceStartMark + " " + textfmt.SinceStart},
		{"PRE/S", "preemptions (vLLM) or retractions (SGLang) per second"},
		{"TOK/S", "prompt plus generation tokens per second"},
		{"AGE", "time since the last scrape of the server; … : its scrape is still running (a slow server), the row is the previous one"},
		{"--", "not reported by the engine, or not measurable yet: unknown, never 0"},
	}
	lines = append(lines, "")
	for _, k := range legend {
		for i, l := range wrap(k[1], max(20, w-12)) {
			if i == 0 {
				lines = append(lines, fmt.Sprintf("  %-9s %s", k[0], l))
			} else {
				lines = append(lines, strings.Repeat(" ", 12)+l)
			}
		}
	}
	return lines
}

// ---- formatting ----

func orNA(s string) string {
	if s == "" {
		return textfmt.NA
	}
	return s
}

// sparkChars draw a ratio 0–1 on an absolute scale.
var sparkChars = []rune("▁▂▃▄▅▆▇█")

// spark draws the last w values (ratios 0–1, NaN unknown as a blank).
func spark(vals []float64, w int) string {
	if len(vals) > w {
		vals = vals[len(vals)-w:]
	}
	var b strings.Builder
	for _, v := range vals {
		if math.IsNaN(v) {
			b.WriteRune(' ')
			continue
		}
		i := int(math.Round(math.Max(0, math.Min(1, v)) * float64(len(sparkChars)-1)))
		b.WriteRune(sparkChars[i])
	}
	return b.String()
}

// flow joins items with two spaces into lines of at most w cells; an item
// that does not fit on the current line starts the next, indented.
func flow(items []string, w int, indent string) []string {
	var out []string
	line := ""
	for _, it := range items {
		switch {
		case line == "":
			line = it
		case lipgloss.Width(line)+2+lipgloss.Width(it) <= w:
			line += "  " + it
		default:
			out = append(out, line)
			line = indent + it
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

// wrap breaks s into lines of at most w cells.
func wrap(s string, w int) []string {
	if w <= 0 || s == "" {
		return nil
	}
	return strings.Split(ansi.Wrap(s, w, " "), "\n")
}
