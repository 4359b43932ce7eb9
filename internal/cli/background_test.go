package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/kvwatch/kvwatch/internal/testenv"
)

// background is a kvwatch command that runs while the test does, as
// serve, demo or simulate run in an operator's terminal: Run in a
// goroutine, its output kept.
type background struct {
	Stdout, Stderr testenv.Buffer
	cancel         context.CancelFunc
	done           chan int
	code           int
	exited         bool
}

// runBackground starts kvwatch with args; at the test's end it is stopped
// and the test fails unless it exits 0 (a test that stops it itself
// checks Stop's code).
func runBackground(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, done: make(chan int, 1)}
	go func() {
		b.done <- Run(ctx, args, Streams{Stdin: strings.NewReader(""), Stdout: &b.Stdout, Stderr: &b.Stderr})
	}()
	t.Cleanup(func() {
		if code := b.Stop(); code != exitOK {
			t.Errorf("kvwatch %s exit code %d; stderr:\n%s", args[0], code, b.Stderr.String())
		}
	})
	return b
}

// Stop cancels the command and returns its exit code (the same code on
// every call).
func (b *background) Stop() int {
	b.cancel()
	if !b.exited {
		b.code, b.exited = <-b.done, true
	}
	return b.code
}

// Exited reports, without waiting, whether the command has exited, and
// its code.
func (b *background) Exited() (int, bool) {
	if b.exited {
		return b.code, true
	}
	select {
	case b.code = <-b.done:
		b.exited = true
		return b.code, true
	default:
		return 0, false
	}
}
