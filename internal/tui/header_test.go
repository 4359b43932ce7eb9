package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// TestHeaderLate: the header does not just say "every 2s" while targets
// are late (issue 17 item 7): it says how many and the oldest row's age,
// and how old the report is once a fetch hangs. Goldens late-* and
// late-stale-*; the numbers are checked apart from them.
func TestHeaderLate(t *testing.T) {
	r := reports(4)[3] // at stepTime(3)
	// Two targets were still scraping: their rows are from step 0 and 1.
	r.Servers[1].Late, r.Servers[1].ScrapedAt = true, stepTime(0)
	r.Servers[4].Late, r.Servers[4].ScrapedAt = true, stepTime(1)
	at := stepTime(3).Add(300 * time.Millisecond)
	cases := []struct {
		name   string
		msgs   []tea.Msg
		header []string // in the first line
		not    []string
	}{
		// 6.3s since step 0: "oldest 6s"; the report is fresh.
		{"late", []tea.Msg{ReportMsg{Report: r, At: at}}, []string{"every 2s", "2 of 7 late, oldest 6s"}, []string{"report "}},
		// The next fetch hangs: ticks move the clock 10s on, the report
		// (made at stepTime(3)) is 10s old, the oldest late row 16s.
		{"late-stale", []tea.Msg{ReportMsg{Report: r, At: at}, TickMsg{At: stepTime(3).Add(10 * time.Second)}},
			[]string{"2 of 7 late, oldest 16s", "report 10s old"}, nil},
		// Paused, the report is old on purpose: no "report … old".
		{"late-paused", []tea.Msg{ReportMsg{Report: r, At: at}, key("p"), TickMsg{At: stepTime(3).Add(10 * time.Second)}},
			[]string{"PAUSED"}, []string{"report "}},
	}
	for _, sz := range sizes {
		for _, c := range cases {
			t.Run(c.name+"/"+sz.name, func(t *testing.T) {
				m := drive(loaded(Options{}), tea.WindowSizeMsg{Width: sz.width, Height: sz.height})
				m = drive(m, c.msgs...)
				got := m.View()
				checkFrame(t, got, sz.width, sz.height)
				head, _, _ := strings.Cut(got, "\n")
				for _, w := range c.header {
					if !strings.Contains(head, w) {
						t.Errorf("header %q lacks %q", head, w)
					}
				}
				for _, w := range c.not {
					if strings.Contains(head, w) {
						t.Errorf("header %q has %q", head, w)
					}
				}
				if c.name != "late-paused" {
					golden(t, c.name+"-"+sz.name, got)
				}
			})
		}
	}
}
