package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/kvwatch/kvwatch/internal/report"
)

// Run shows the live view on the terminal out (alternate screen, keys read
// from in) until the user quits or ctx ends.
func Run(ctx context.Context, m Model, in io.Reader, out io.Writer) error {
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err := p.Run()
	if err != nil && errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // stopped by a signal: a normal end
	}
	return err
}

// Frames writes the fleet view of width cells to w without entering the
// alternate screen: once, or every refresh until ctx ends, frames separated
// by a blank line. It returns the last report read. A failed fetch ends it
// with the error when once is set; otherwise the frame shows the error.
func Frames(ctx context.Context, m Model, w io.Writer, width int, once bool) (report.Report, error) {
	next, _ := m.Update(tea.WindowSizeMsg{Width: width})
	m = next.(Model)
	m.static = true
	if once {
		m.trend = nil // one frame: no trend to wait for
	}
	for first := true; ; first = false {
		r, err := m.opts.Source.Fetch(ctx)
		if ctx.Err() != nil {
			return m.rep, nil
		}
		if err != nil && once {
			return r, err
		}
		next, _ := m.Update(ReportMsg{Report: r, Err: err, At: time.Now()})
		m = next.(Model)
		if !first {
			fmt.Fprintln(w)
		}
		if _, err := fmt.Fprintln(w, m.View()); err != nil {
			return m.rep, err
		}
		if once {
			return m.rep, nil
		}
		t := time.NewTimer(m.opts.Refresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return m.rep, nil
		case <-t.C:
		}
	}
}
