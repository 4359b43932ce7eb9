package tui

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// BenchmarkView renders the fleet table of 1,000 servers sorted by KV
// (each View filters and sorts every server).
func BenchmarkView(b *testing.B) {
	m := drive(New(Options{}), tea.WindowSizeMsg{Width: 160, Height: 40},
		ReportMsg{Report: bigFleet(1000), At: t0}, key("4"))
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkReport records one report of 1,000 servers (usage history).
func BenchmarkReport(b *testing.B) {
	m := New(Options{})
	r := bigFleet(1000)
	b.ReportAllocs()
	for b.Loop() {
		m = drive(m, ReportMsg{Report: r, At: t0})
	}
}
