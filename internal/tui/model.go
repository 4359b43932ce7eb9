// Package tui is `kvwatch top`: a live terminal view of the fleet's KV cache
// built with bubbletea and lipgloss. The Model is a value; Update is the
// only place it changes and every fetch runs in a command on a timer. It
// reads reports from a Source (scraping directly, or a `kvwatch serve`
// daemon) and renders them; it computes no signal itself beyond formatting
// and keeps only a short usage history for sparklines. It parses no flags
// and never exits the process.
package tui

import (
	"cmp"
	"context"
	"math"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
)

// historyLen is how many refreshes of usage the sparklines remember.
const historyLen = 120

// Options configure a Model.
type Options struct {
	// Source gives the reports.
	Source Source
	// Refresh is the time between fetches; default 2s.
	Refresh time.Duration
	// FetchTimeout bounds one fetch; default 30s.
	FetchTimeout time.Duration
	// Warn and Crit are the KV usage ratios (0–1) at which bars turn
	// yellow and red (the config's alerts.kv_usage_warning/critical).
	Warn, Crit float64
	// FullWithin is the time to full under which a pool's forecast turns
	// red (the config's alerts.kv_full_within); 0: the default.
	FullWithin time.Duration
	// Renderer styles the output; nil renders without colour or attributes.
	Renderer *lipgloss.Renderer
	// Title says what is watched, e.g. "3 targets" or the serve URL.
	Title string
}

// ReportMsg carries the result of one fetch, received at At.
type ReportMsg struct {
	Report report.Report
	Err    error
	At     time.Time
}

// TickMsg is the refresh timer firing at At.
type TickMsg struct{ At time.Time }

// column is a sortable column of the fleet table.
type column int

const (
	colName column = iota
	colRole
	colEngine
	colKV
	colUsed
	colHeadroom
	colRunning
	colQueued
	colHit
	colPreempt
	colTokens
	colAge
	numColumns
)

var columnNames = [numColumns]string{"server", "role", "engine", "kv", "used", "headroom",
	"running", "queued", "hit", "preempt/s", "tok/s", "age"}

func (c column) String() string { return columnNames[c] }

// Model is the state of the view. It is a value: Update returns a new one.
type Model struct {
	opts Options
	st   styles

	width, height int
	now           time.Time

	rep      report.Report
	have     bool
	err      error
	errAt    time.Time
	fetching bool
	paused   bool

	sortCol column
	desc    bool
	filter  string
	editing bool

	selected string // name of the selected server
	drill    string // server drilled into; "" shows the fleet
	help     bool
	static   bool // a printed frame: no selection, no key hints

	// hist is the usage ratio per refresh by server name (NaN: unknown);
	// rankHist the same by rankKey. Both are replaced, never mutated.
	hist     map[string][]float64
	rankHist map[string][]float64
	// trend is each server's used tokens over the last FillWindow (at
	// most trendLen samples), for the pools' time to full. Only record
	// changes it.
	trend *kv.UsedTrend
}

// trendLen bounds the samples a server keeps for the time to full: 15
// minutes at the refresh, at most 1,000.
func trendLen(refresh time.Duration) int {
	return min(int(kv.FillWindow/refresh)+2, 1000)
}

// New returns a model that fetches as soon as it starts.
func New(o Options) Model {
	if o.Refresh <= 0 {
		o.Refresh = 2 * time.Second
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 30 * time.Second
	}
	if o.FullWithin <= 0 {
		o.FullWithin = time.Duration(config.Default().Alerts.KVFullWithin)
	}
	if def := config.Default().Alerts; o.Warn <= 0 || o.Crit <= 0 { // unset: the config's defaults
		o.Warn, o.Crit = cmp.Or(o.Warn, def.KVUsageWarning), cmp.Or(o.Crit, def.KVUsageCritical)
	}
	return Model{opts: o, st: newStyles(o.Renderer), fetching: true, sortCol: colName,
		hist: map[string][]float64{}, rankHist: map[string][]float64{}, trend: kv.NewUsedTrend(kv.FillWindow, trendLen(o.Refresh))}
}

// Init starts the first fetch and the refresh timer.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.fetch(), m.tick())
}

// fetch returns the command reading one report.
func (m Model) fetch() tea.Cmd {
	src, timeout := m.opts.Source, m.opts.FetchTimeout
	if src == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		r, err := src.Fetch(ctx)
		return ReportMsg{Report: r, Err: err, At: time.Now()}
	}
}

func (m Model) tick() tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(t time.Time) tea.Msg { return TickMsg{At: t} })
}

// Update applies one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case TickMsg:
		m.now = msg.At
		cmds := []tea.Cmd{m.tick()}
		if !m.paused && !m.fetching {
			m.fetching = true
			cmds = append(cmds, m.fetch())
		}
		return m, tea.Batch(cmds...)
	case ReportMsg:
		m.fetching = false
		m.now = msg.At
		if msg.Err != nil {
			m.err, m.errAt = msg.Err, msg.At
			return m, nil
		}
		m.err = nil
		m = m.record(msg.Report)
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

// record takes a new report and extends the usage histories.
func (m Model) record(r report.Report) Model {
	if m.trend != nil {
		r.ApplyTrend(m.trend, kv.TrendMinTop)
	}
	m.rep, m.have = r, true
	hist := make(map[string][]float64, len(r.Servers))
	rankHist := make(map[string][]float64, len(m.rankHist))
	for _, s := range r.Servers {
		v := math.NaN()
		if s.Server != nil && s.Server.UsageRatio.OK() {
			v = s.Server.UsageRatio.V
		}
		hist[s.Name] = appendHist(m.hist[s.Name], v)
		if s.Server == nil {
			continue
		}
		for _, rk := range s.Server.Ranks {
			k := rankKey(s.Name, rk.RankID)
			v := math.NaN()
			if rk.UsageRatio.OK() {
				v = rk.UsageRatio.V
			}
			rankHist[k] = appendHist(m.rankHist[k], v)
		}
	}
	m.hist, m.rankHist = hist, rankHist
	return m
}

// appendHist returns a new slice: old plus v, at most historyLen long.
func appendHist(old []float64, v float64) []float64 {
	if len(old) >= historyLen {
		old = old[len(old)-historyLen+1:]
	}
	out := make([]float64, 0, len(old)+1)
	return append(append(out, old...), v)
}

func rankKey(server string, id kv.RankID) string {
	return server + "\x00" + id.DP + "\x00" + id.TP + "\x00" + id.PP
}

// key handles one key press.
func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if k.Type == tea.KeyCtrlC {
		return m, tea.Quit
	}
	if k.Type == tea.KeyRunes && len(k.Runes) > 1 && !k.Paste && !m.editing {
		// Keys typed quickly arrive as one message ("/dec"): one at a time.
		var cmds []tea.Cmd
		for i, r := range k.Runes {
			if m.editing { // "/" started a filter: the rest is its text
				m.filter += string(k.Runes[i:])
				break
			}
			next, cmd := m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			m, cmds = next.(Model), append(cmds, cmd)
		}
		return m, tea.Batch(cmds...)
	}
	if m.editing {
		switch k.Type {
		case tea.KeyEnter:
			m.editing = false
		case tea.KeyEsc:
			m.editing, m.filter = false, ""
		case tea.KeyBackspace:
			if r := []rune(m.filter); len(r) > 0 {
				m.filter = string(r[:len(r)-1])
			}
		case tea.KeyRunes, tea.KeySpace:
			m.filter += string(k.Runes)
		}
		return m, nil
	}
	if m.help {
		switch k.String() {
		case "q":
			return m, tea.Quit
		case "?", "esc", "enter", "h":
			m.help = false
		}
		return m, nil
	}
	switch s := k.String(); s {
	case "q":
		return m, tea.Quit
	case "?", "h":
		m.help = true
	case "p", " ":
		m.paused = !m.paused
		if !m.paused && !m.fetching {
			m.fetching = true
			return m, m.fetch()
		}
	case "r":
		if !m.fetching {
			m.fetching = true
			return m, m.fetch()
		}
	case "/":
		m.editing, m.filter = true, ""
		m.drill = ""
	case "esc", "left", "backspace":
		if m.drill != "" {
			m.drill = ""
		} else if s == "esc" {
			m.filter = ""
		}
	case "enter", "right", "l":
		if m.drill == "" {
			if rows := m.rows(); len(rows) > 0 {
				m.drill = rows[m.cursor(rows)].Name
				m.selected = m.drill
			}
		}
	case "up", "k", "down", "j", "home", "g", "end", "G", "pgup", "pgdown":
		m = m.move(s)
	case "s":
		m.sortCol = (m.sortCol + 1) % numColumns
		m.desc = defaultDesc(m.sortCol)
	case "S":
		m.desc = !m.desc
	default:
		if len(s) == 1 && s[0] >= '0' && s[0] <= '9' {
			c := column(s[0] - '1')
			if s == "0" {
				c = 9
			}
			if c == m.sortCol {
				m.desc = !m.desc
			} else {
				m.sortCol, m.desc = c, defaultDesc(c)
			}
		}
	}
	return m, nil
}

// defaultDesc is the first direction of a column: numbers largest first.
func defaultDesc(c column) bool { return c > colEngine }

// move changes the selected server.
func (m Model) move(key string) Model {
	rows := m.rows()
	if len(rows) == 0 {
		return m
	}
	i := m.cursor(rows)
	page := max(1, m.tableRows()-1)
	switch key {
	case "up", "k":
		i--
	case "down", "j":
		i++
	case "home", "g":
		i = 0
	case "end", "G":
		i = len(rows) - 1
	case "pgup":
		i -= page
	case "pgdown":
		i += page
	}
	i = max(0, min(i, len(rows)-1))
	m.selected = rows[i].Name
	if m.drill != "" {
		m.drill = m.selected
	}
	return m
}

// cursor is the index of the selected server among rows (0 if it is not
// among them).
func (m Model) cursor(rows []report.Server) int {
	for i, r := range rows {
		if r.Name == m.selected {
			return i
		}
	}
	return 0
}

// rows are the report's servers that match the filter, sorted.
func (m Model) rows() []report.Server {
	out := make([]report.Server, 0, len(m.rep.Servers))
	f := strings.ToLower(m.filter)
	for _, s := range m.rep.Servers {
		if f == "" || strings.Contains(searchText(s), f) {
			out = append(out, s)
		}
	}
	sortRows(out, m.sortCol, m.desc, m.now)
	return out
}

// searchText is what the filter matches, lower case.
func searchText(s report.Server) string {
	parts := []string{s.Name, s.URL, string(s.Role), s.Reason}
	if s.Server != nil {
		parts = append(parts, s.Server.Engine, s.Server.EngineVersion, s.Server.Model)
	}
	for _, v := range s.Labels {
		parts = append(parts, v)
	}
	return strings.ToLower(strings.Join(parts, " "))
}

// tableRows is about how many servers the fleet table shows at once.
func (m Model) tableRows() int {
	if m.height <= 0 {
		return len(m.rep.Servers)
	}
	return max(1, m.height-5)
}
