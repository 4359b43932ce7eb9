package testenv

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a program started by a test, stopped at the test's end.
type Proc struct {
	dir  string
	bin  string
	args []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs bin with args, its output appended to logPath; the test's
// cleanup stops it.
func Start(t testing.TB, logPath, bin string, args ...string) *Proc {
	t.Helper()
	return StartIn(t, "", logPath, bin, args...)
}

// StartIn is Start with dir as the working directory.
func StartIn(t testing.TB, dir, logPath, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{dir: dir, bin: bin, args: args, log: logPath}
	if err := p.start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

func (p *Proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// Stop interrupts the program (SIGINT, so a store flushes what it holds)
// and waits for it; after 20 s it is killed.
func (p *Proc) Stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart starts the program again with the same arguments.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		t.Fatalf("restart %s: %v", p.bin, err)
	}
}

// exited reports whether the program was started and has ended by itself
// (false after Stop, which clears it).
func (p *Proc) exited() bool {
	p.mu.Lock()
	done := p.done
	running := p.cmd != nil
	p.mu.Unlock()
	if !running {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Pid returns the process id of the running program, 0 when stopped.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Log returns the path of the program's log.
func (p *Proc) Log() string { return p.log }

// WaitOK polls url until it answers 200, failing the test when ctx ends.
func WaitOK(ctx context.Context, t testing.TB, url string) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not answer 200 in time (last error: %v)", url, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
