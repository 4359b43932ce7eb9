package serve

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerPool: a run returns after its function did; sequential runs
// share one worker; concurrent ones get a worker each, which stop once
// idle for the timeout; after close runs call their function themselves
// and no worker is left.
func TestWorkerPool(t *testing.T) {
	g0 := runtime.NumGoroutine()
	p := newWorkerPool(200 * time.Millisecond)

	var n atomic.Int64
	for range 100 {
		p.run(func() { time.Sleep(10 * time.Microsecond); n.Add(1) })
	}
	if n.Load() != 100 {
		t.Fatalf("%d of 100 functions had run when their runs returned", n.Load())
	}
	if got := p.size(); got != 1 {
		t.Errorf("%d idle workers after 100 sequential runs, want 1", got)
	}

	// 8 runs at once, each held until all 8 have started: 8 workers.
	var started, wg sync.WaitGroup
	started.Add(8)
	release := make(chan struct{})
	for range 8 {
		wg.Go(func() { p.run(func() { started.Done(); <-release }) })
	}
	started.Wait()
	close(release)
	wg.Wait()
	if got := p.size(); got != 8 {
		t.Errorf("%d idle workers after 8 concurrent runs, want 8", got)
	}
	// Idle past the timeout, they stop.
	waitFor(t, "idle workers to stop", func() bool { return p.size() == 0 })

	p.run(func() {})
	p.close()
	// The goroutine count is the whole test binary's (other tests'
	// goroutines come and go): the idle list says the workers retired.
	waitFor(t, "the workers to retire and exit after close", func() bool { return p.size() == 0 && runtime.NumGoroutine() <= g0 })
	ran := false
	p.run(func() { ran = true })
	if !ran {
		t.Error("a run after close did not call its function")
	}
	if got := p.size(); got != 0 {
		t.Errorf("%d idle workers after close, want 0", got)
	}
}

// TestWorkerPoolCloseWhileBusy: close during a job lets it finish and
// answer its run; the worker stops after it.
func TestWorkerPoolCloseWhileBusy(t *testing.T) {
	g0 := runtime.NumGoroutine()
	p := newWorkerPool(time.Minute)
	inJob, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		p.run(func() { close(inJob); <-release })
		close(done)
	}()
	<-inJob
	p.close()
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a run whose job was busy at close did not return")
	}
	waitFor(t, "the worker to exit", func() bool { return runtime.NumGoroutine() <= g0 })
}
