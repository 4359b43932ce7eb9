package tui

import (
	"net/url"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/report"
	"github.com/kvwatch/kvwatch/internal/scrape"
)

// fillReport is a one-server fleet (capacity 100,000) at t0 + s seconds
// with used tokens.
func fillReport(tr *report.Tracker, s int, used float64) report.Report {
	u, _ := url.Parse("http://10.0.2.1:30000/metrics")
	srv := &kv.Server{Engine: "sglang", Role: kv.RoleUnified, Signals: kv.Signals{
		Capacity: of(100000), Used: of(used), Running: of(4), Queued: kv.Queues{Waiting: of(0)}}}
	srv.Rollup()
	at := t0.Add(time.Duration(s) * time.Second)
	return tr.Update(at, []scrape.Result{{Target: &scrape.Target{Name: "unified-0", URL: u}, Time: at, Server: srv}})
}

// TestTopTimeToFull: top keeps its own trend of used tokens and shows the
// pool's time to full once it has 3 samples over 30 s, in the fleet line
// and the drill-down.
func TestTopTimeToFull(t *testing.T) {
	tests := []struct {
		name string
		used func(s int) float64
		want string
	}{
		// 10,000 + 10 tokens/s: 10,300 used at 30 s, 89,700 free: 8,970 s.
		{"filling", func(s int) float64 { return 10000 + 10*float64(s) }, "full in 2h29m"},
		{"flat", func(int) float64 { return 50000 }, "not filling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := report.NewTracker([]int{8192})
			m := New(Options{Title: "1 target"})
			m = drive(m, tea.WindowSizeMsg{Width: 160, Height: 40})
			for _, s := range []int{0, 10, 20} {
				m = drive(m, ReportMsg{Report: fillReport(tr, s, tt.used(s)), At: t0.Add(time.Duration(s) * time.Second)})
			}
			// Three samples over 20 s: not yet.
			if v := m.View(); !strings.Contains(v, "trend after 10s") || strings.Contains(v, tt.want) {
				t.Errorf("after 20s: want \"trend after 10s\" and no %q:\n%s", tt.want, v)
			}
			m = drive(m, ReportMsg{Report: fillReport(tr, 30, tt.used(30)), At: t0.Add(30 * time.Second)})
			if v := m.View(); !strings.Contains(v, tt.want) {
				t.Errorf("after 30s: want %q:\n%s", tt.want, v)
			}
			m = drive(m, key("enter"))
			if v := m.View(); !strings.Contains(v, "pool unified") || !strings.Contains(v, tt.want) {
				t.Errorf("drill-down: want the pool's %q:\n%s", tt.want, v)
			}
		})
	}
}
