package tui

import (
	"errors"
	"flag"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/google/go-cmp/cmp"
	"github.com/muesli/termenv"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/textfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run go test ./internal/tui -update to create it", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("View() differs from %s (-want +got):\n%s", path, diff)
	}
}

// drive feeds msgs to m's Update in order.
func drive(m Model, msgs ...tea.Msg) Model {
	for _, msg := range msgs {
		next, _ := m.Update(msg)
		m = next.(Model)
	}
	return m
}

// key is one key press: a name bubbletea uses ("enter", "down") or runes.
func key(k string) tea.Msg {
	special := map[string]tea.KeyType{"enter": tea.KeyEnter, "esc": tea.KeyEsc, "up": tea.KeyUp,
		"down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight, "backspace": tea.KeyBackspace,
		"ctrl+c": tea.KeyCtrlC, "pgdown": tea.KeyPgDown}
	if t, ok := special[k]; ok {
		return tea.KeyMsg{Type: t}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typed is one key press per rune of s.
func typed(s string) []tea.Msg {
	var out []tea.Msg
	for _, r := range s {
		out = append(out, key(string(r)))
	}
	return out
}

// loaded is a model that received the three reports of the test fleet.
func loaded(o Options) Model {
	o.Title = "7 targets"
	m := New(o)
	for i, r := range reports(3) {
		m = drive(m, ReportMsg{Report: r, At: stepTime(i).Add(300 * time.Millisecond)})
	}
	return m
}

var sizes = []struct {
	name          string
	width, height int
}{
	{"80x24", 80, 24},
	{"160x40", 160, 40},
}

func TestViewGolden(t *testing.T) {
	later := stepTime(2).Add(12 * time.Second)
	cases := []struct {
		name string
		msgs []tea.Msg
	}{
		{"fleet", nil},
		{"sort-kv", []tea.Msg{key("4")}},                     // KV, fullest first
		{"sort-kv-reversed", []tea.Msg{key("4"), key("S")}},  // emptiest first, unknown still last
		{"sort-cycle-engine", []tea.Msg{key("s"), key("s")}}, // server → role → engine
		{"sort-preempt", []tea.Msg{key("0")}},                // 0 is the tenth column
		{"filter", append(append([]tea.Msg{key("/")}, typed("decode")...), key("enter"))},
		{"filter-typing", append([]tea.Msg{key("/")}, typed("vll")...)},
		{"filter-one-message", []tea.Msg{key("/vll")}}, // typed fast: one message
		{"filter-none", append(append([]tea.Msg{key("/")}, typed("nothing")...), key("enter"))},
		{"select", []tea.Msg{key("down"), key("down"), key("j")}},
		{"drill", []tea.Msg{key("enter")}},                                       // decode-0: DP 2 × TP 2
		{"drill-next", []tea.Msg{key("enter"), key("down")}},                     // decode-1: no ranks
		{"drill-down-target", []tea.Msg{key("down"), key("down"), key("enter")}}, // llama-0 is down
		{"drill-back", []tea.Msg{key("enter"), key("esc")}},
		{"help", []tea.Msg{key("?")}},
		{"paused-stale", []tea.Msg{key("p"), TickMsg{At: later}}},
		{"fetch-error", []tea.Msg{ReportMsg{Err: errors.New("read http://127.0.0.1:9477/api/kvwatch/v1/report: connection refused; is kvwatch serve running there?"), At: later}}},
	}
	for _, sz := range sizes {
		for _, c := range cases {
			t.Run(c.name+"/"+sz.name, func(t *testing.T) {
				m := drive(loaded(Options{}), tea.WindowSizeMsg{Width: sz.width, Height: sz.height})
				m = drive(m, c.msgs...)
				got := m.View()
				checkFrame(t, got, sz.width, sz.height)
				golden(t, c.name+"-"+sz.name, got)
			})
		}
	}
}

// checkFrame checks what every frame must hold: it fits the terminal.
func checkFrame(t *testing.T, frame string, w, h int) {
	t.Helper()
	lines := strings.Split(frame, "\n")
	if h > 0 && len(lines) > h {
		t.Errorf("frame has %d lines, terminal %d", len(lines), h)
	}
	for i, l := range lines {
		if n := lipgloss.Width(l); n > w {
			t.Errorf("line %d is %d cells wide, terminal %d: %q", i+1, n, w, l)
		}
	}
}

func TestViewWaiting(t *testing.T) {
	m := drive(New(Options{Title: "1 target"}), tea.WindowSizeMsg{Width: 80, Height: 24})
	golden(t, "waiting-80x24", m.View())
}

func TestViewScroll(t *testing.T) {
	m := drive(New(Options{Title: "30 targets"}), tea.WindowSizeMsg{Width: 80, Height: 24},
		ReportMsg{Report: bigFleet(30), At: t0})
	m = drive(m, key("pgdown"), key("down"))
	got := m.View()
	checkFrame(t, got, 80, 24)
	golden(t, "scroll-80x24", got)
}

// TestViewColor pins the colours: a fixed 256-colour profile.
func TestViewColor(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI256)
	for _, c := range []struct {
		name string
		msgs []tea.Msg
	}{
		{"color-fleet-160x40", nil},
		{"color-drill-160x40", []tea.Msg{key("enter")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := drive(loaded(Options{Renderer: r}), tea.WindowSizeMsg{Width: 160, Height: 40})
			got := drive(m, c.msgs...).View()
			if !strings.Contains(got, "\x1b[") {
				t.Fatalf("no ANSI sequences in a coloured frame:\n%s", got)
			}
			checkFrame(t, got, 160, 40)
			golden(t, c.name, got)
		})
	}
}

// TestNoColorHasNoEscapes: without a renderer nothing but text is written.
func TestNoColorHasNoEscapes(t *testing.T) {
	m := drive(loaded(Options{}), tea.WindowSizeMsg{Width: 160, Height: 40})
	for _, msgs := range [][]tea.Msg{nil, {key("enter")}, {key("?")}} {
		if got := drive(m, msgs...).View(); strings.Contains(got, "\x1b") {
			t.Errorf("escape sequence in a no-colour frame after %v:\n%q", msgs, got)
		}
	}
}

func TestUnknownIsNotZero(t *testing.T) {
	// TGI reports no prefix-cache, preemption or prompt-token counters and
	// a server without capacity has no headroom: all unknown, shown as --.
	m := drive(loaded(Options{}), tea.WindowSizeMsg{Width: 160, Height: 40})
	cols, _ := m.layout(160)
	want := map[column]bool{colHit: true, colPreempt: true, colTokens: true}
	var found bool
	for _, s := range m.rep.Servers {
		if s.Name != "tgi-0" {
			continue
		}
		found = true
		for _, c := range cols {
			if got := c.cell(m, s); want[c.col] && got != textfmt.NA {
				t.Errorf("tgi-0 %s = %q, want %q", c.title, got, textfmt.NA)
			}
		}
	}
	if !found {
		t.Fatal("tgi-0 not in the report")
	}
	if got := headroomCell(report.Server{Headroom: []report.Headroom{{Tokens: 8192}}}, true); got != textfmt.NA {
		t.Errorf("headroomCell(unknown requests) = %q, want %q", got, textfmt.NA)
	}
}

// TestImplausibleAndDemand: a server with a negative capacity shows no
// plausible percentage and is marked with its warning; demand above 1 is a
// column and a pool figure of its own, never on the usage bar.
func TestImplausibleAndDemand(t *testing.T) {
	bad := &kv.Server{Engine: "sglang", Role: kv.RoleUnified,
		Signals: kv.Signals{Capacity: kv.Of(-100000), Used: kv.Of(-5000)}}
	bad.Rollup()
	bad.Check()
	dec := &kv.Server{Engine: "sglang", Role: kv.RoleDecode,
		Signals: kv.Signals{Capacity: kv.Of(2581504), Used: kv.Of(2578300), DemandRatio: kv.Of(17.6)}}
	dec.Rollup()
	mk := func(name string, s *kv.Server) scrape.Result {
		u, _ := url.Parse("http://" + name + "/metrics")
		return scrape.Result{Target: &scrape.Target{Name: name, URL: u}, Time: t0, Server: s}
	}
	r := report.NewTracker([]int{8192}).Update(t0, []scrape.Result{mk("bad", bad), mk("dec", dec)})
	m := drive(New(Options{Title: "t"}), tea.WindowSizeMsg{Width: 160, Height: 30},
		ReportMsg{Report: r, At: t0})
	v := m.View()
	for _, want := range []string{"!bad", "!!!!!!!!!!", "1 with warnings (!)", "17.6×", "demand 17.6×", "limit: decode pool 99.9%"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "5.0%") {
		t.Errorf("the implausible server shows a plausible 5.0%%:\n%s", v)
	}
	m = drive(m, key("enter"))
	if v := m.View(); !strings.Contains(v, "warning negative: capacity is -100000") || !strings.Contains(v, "implausible") {
		t.Errorf("drill-down lacks the warning:\n%s", v)
	}
}

// TestBarEighths: a 10-cell bar draws eighths of a cell, so 1 % and 11 %
// differ, and any use shows.
func TestBarEighths(t *testing.T) {
	m := New(Options{})
	for _, c := range []struct {
		ratio float64
		want  string
	}{
		{0, "░░░░░░░░░░"},
		{0.001, "▏░░░░░░░░░"}, // 0.08 eighths: drawn as one, never as none
		{0.01, "▏░░░░░░░░░"},  // 0.8 → 1 eighth
		{0.11, "█▏░░░░░░░░"},  // 8.8 → 9 eighths: a cell and one eighth
		{0.5, "█████░░░░░"},
		{0.3, "███░░░░░░░"},  // 24 eighths
		{0.33, "███▎░░░░░░"}, // 26.4 → 26: 3 cells and a quarter
		{0.999, "██████████"},
		{1.5, "██████████"},
	} {
		if got := m.bar(kv.Of(c.ratio), 10); got != c.want {
			t.Errorf("bar(%v) = %q, want %q", c.ratio, got, c.want)
		}
	}
}

// TestAddressWhereThereIsRoom: a server named other than its address shows
// its address beside its name once the terminal is wide enough for every
// other column (as status does), and not before; a server named by its
// address shows it once.
func TestAddressWhereThereIsRoom(t *testing.T) {
	srv := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, Signals: kv.Signals{Capacity: kv.Of(1000), Used: kv.Of(10)}}
	srv.Rollup()
	mk := func(name, host string) scrape.Result {
		u, _ := url.Parse("http://" + host + "/metrics")
		return scrape.Result{Target: &scrape.Target{Name: name, URL: u}, Time: t0, Server: srv}
	}
	r := report.NewTracker([]int{8192}).Update(t0, []scrape.Result{mk("decode", "10.0.0.12:30002"), mk("10.0.0.13:30002", "10.0.0.13:30002")})
	for _, tt := range []struct {
		width int
		addr  bool
	}{{160, false}, {200, true}} {
		v := drive(New(Options{Title: "t"}), tea.WindowSizeMsg{Width: tt.width, Height: 30}, ReportMsg{Report: r, At: t0}).View()
		if got := strings.Contains(v, "ADDRESS") && regexp.MustCompile(`decode +10\.0\.0\.12:30002 +decode`).MatchString(v); got != tt.addr {
			t.Errorf("%d columns: the address beside the name: %v, want %v:\n%s", tt.width, got, tt.addr, v)
		}
		if n := strings.Count(v, "10.0.0.13:30002"); n != 1 {
			t.Errorf("%d columns: the server named by its address shows it %d times, want once:\n%s", tt.width, n, v)
		}
	}
}

// TestDrillDownSaysWhyUnavailable: the server's drill-down says why the
// page leaves its KV unavailable (an asleep engine), as status does.
func TestDrillDownSaysWhyUnavailable(t *testing.T) {
	s := &kv.Server{Engine: "vllm", Role: kv.RoleUnified, Ranks: []kv.Rank{{Signals: kv.Signals{Running: kv.Of(0)}}}}
	s.Explain(kv.UnknownAsleep, "KV unavailable: the engine is asleep (engine 0 weights_offloaded)")
	s.Rollup()
	u, _ := url.Parse("http://sleep/metrics")
	r := report.NewTracker([]int{8192}).Update(t0, []scrape.Result{{Target: &scrape.Target{Name: "sleep", URL: u}, Time: t0, Server: s}})
	m := drive(New(Options{Title: "t"}), tea.WindowSizeMsg{Width: 160, Height: 30}, ReportMsg{Report: r, At: t0}, key("enter"))
	if v := m.View(); !strings.Contains(v, "unavailable asleep: KV unavailable: the engine is asleep (engine 0 weights_offloaded)") {
		t.Errorf("drill-down lacks why KV is unavailable:\n%s", v)
	}
}
