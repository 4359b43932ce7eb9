// Package freelist keeps reusable buffers up to a budget in bytes. Unlike
// a sync.Pool, which the garbage collector empties every other cycle, a
// List keeps what it is given: buffers used in bursts (a scrape round, a
// rule evaluation) that a collection in between would have dropped are
// found again instead of allocated anew. It frees nothing itself and knows
// nothing of what the buffers hold; callers empty a buffer before putting
// it back.
package freelist

import "sync"

// List keeps buffers of type T for reuse, at most Budget bytes of them as
// Size counts them. Its zero value with Budget and Size set is ready to
// use; it is safe for concurrent use.
type List[T any] struct {
	// Budget bounds the bytes kept (Size of every buffer held).
	Budget int
	// Size is a buffer's size in bytes, as counted against Budget.
	Size func(T) int

	mu    sync.Mutex
	items []T
	bytes int
}

// Get returns a kept buffer, the one put last, or false when none is left.
func (f *List[T]) Get() (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	n := len(f.items)
	if n == 0 {
		return zero, false
	}
	x := f.items[n-1]
	f.items[n-1] = zero
	f.items = f.items[:n-1]
	f.bytes -= f.Size(x)
	return x, true
}

// Put keeps x for a later Get, unless that would exceed the budget (then
// x is left to the garbage collector).
func (f *List[T]) Put(x T) {
	sz := f.Size(x)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bytes+sz > f.Budget {
		return
	}
	f.items = append(f.items, x)
	f.bytes += sz
}

// Bytes returns the bytes the list holds now.
func (f *List[T]) Bytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}
