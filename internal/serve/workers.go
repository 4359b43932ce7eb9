package serve

import (
	"slices"
	"sync"
	"time"
)

// workerPool runs the targets' scrapes on long-lived goroutines, the most
// recently idle one first. A scrape (fetch, parse, normalize, record)
// needs a deep stack. Each target's own goroutine idles between its
// scrapes, and the garbage collector shrinks an idle goroutine's stack, so
// at 2,000 targets every scrape grew its goroutine's stack again (3 % of
// serve's CPU). A handful of hot workers serve most scrapes and keep their
// stacks. A worker idle for idleTimeout stops: the pool shrinks back after
// a burst (a reload, a first round). At most as many workers run as
// scrapes are in flight, which MaxConcurrentScrapes bounds.
type workerPool struct {
	idleTimeout time.Duration

	mu      sync.Mutex
	idle    []*poolWorker // a stack: the last one idle is the first taken
	stopped bool
	stop    chan struct{}
}

type poolWorker struct{ jobs chan poolJob }

type poolJob struct {
	fn   func()
	done chan struct{}
}

func newWorkerPool(idleTimeout time.Duration) *workerPool {
	return &workerPool{idleTimeout: idleTimeout, stop: make(chan struct{})}
}

var doneChans = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

// run calls fn on a worker and returns when it has returned. After close,
// fn runs on the calling goroutine.
func (p *workerPool) run(fn func()) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		fn()
		return
	}
	var w *poolWorker
	if n := len(p.idle); n > 0 {
		w = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
	}
	p.mu.Unlock()
	if w == nil {
		w = &poolWorker{jobs: make(chan poolJob, 1)}
		go p.loop(w)
	}
	job := poolJob{fn: fn, done: doneChans.Get().(chan struct{})}
	w.jobs <- job
	<-job.done
	doneChans.Put(job.done)
}

func (p *workerPool) loop(w *poolWorker) {
	t := time.NewTimer(p.idleTimeout)
	defer t.Stop()
	for {
		select {
		case job := <-w.jobs:
			job.fn()
			// Idle again before the caller learns it is done, so that its
			// next run finds this worker rather than starting another.
			p.mu.Lock()
			p.idle = append(p.idle, w)
			p.mu.Unlock()
			job.done <- struct{}{}
			t.Reset(p.idleTimeout)
		case <-t.C:
			if p.retire(w) {
				return
			}
			t.Reset(p.idleTimeout) // taken just now: its job is on the way
		case <-p.stop:
			if p.retire(w) {
				return
			}
			// Taken just before close: serve the job, then stop.
			job := <-w.jobs
			job.fn()
			job.done <- struct{}{}
			return
		}
	}
}

// retire takes w off the idle stack; false when run has just taken it.
func (p *workerPool) retire(w *poolWorker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, w)
	if i < 0 {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	return true
}

// close stops the idle workers, and each busy one when its job is done;
// later runs call fn themselves.
func (p *workerPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.stop)
	}
}

// size returns the number of idle workers.
func (p *workerPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
