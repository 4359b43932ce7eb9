package scrape

import "sync"

// freeList keeps buffers for reuse up to a budget in bytes. Unlike a
// sync.Pool, which the garbage collector empties every other cycle, it
// keeps them: at 2,000 targets a collection every second or so dropped the
// pooled body and read buffers, and scrapes grew new ones (a tenth of the
// bytes serve allocated). Buffers come back as many as were in use at
// once, at most budget bytes of them; the rest are dropped.
type freeList[T any] struct {
	mu     sync.Mutex
	items  []T
	bytes  int
	budget int
	size   func(T) int
}

// get returns a kept buffer, or false when none is left.
func (f *freeList[T]) get() (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.items)
	if n == 0 {
		var zero T
		return zero, false
	}
	x := f.items[n-1]
	var zero T
	f.items[n-1] = zero
	f.items = f.items[:n-1]
	f.bytes -= f.size(x)
	return x, true
}

// put keeps x for a later get, unless that would exceed the budget.
func (f *freeList[T]) put(x T) {
	sz := f.size(x)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bytes+sz > f.budget {
		return
	}
	f.items = append(f.items, x)
	f.bytes += sz
}
