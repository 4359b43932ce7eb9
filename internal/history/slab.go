package history

import (
	"bytes"
	"log/slog"
	"runtime"
	"sync/atomic"
)

// slabStats account for one Store's slabs. Its arenas and the cleanups of
// its slabs share it; a Store's numbers are its own, whatever other Stores
// the process runs.
type slabStats struct {
	// offHeap is the memory of the slabs mapped outside the Go heap.
	offHeap atomic.Int64
	// unmapFailures counts slabs the operating system refused to unmap;
	// their memory stays mapped (and counted in offHeap).
	unmapFailures atomic.Int64
	log           *slog.Logger
}

// unmap returns a slab's memory to the operating system; a variable so
// that tests can make it fail.
var unmap = freeSlab

// free runs in a slab's cleanup, on a goroutine of the runtime's own: a
// failure there cannot be returned, and a panic would end the process, so
// it is logged and counted.
func (st *slabStats) free(mem []byte) {
	if err := unmap(mem); err != nil {
		st.unmapFailures.Add(1)
		st.log.Error("history: cannot unmap a chunk slab; its memory stays mapped", "bytes", len(mem), "err", err)
		return
	}
	st.offHeap.Add(-int64(len(mem)))
}

// slabSize is the size of an arena's slabs.
const slabSize = 64 << 10

// slab is a block of memory outside the Go heap (see allocSlab) that closed
// chunks take their bytes from (or, for chunks on the Go heap, the bytes of
// one chunk or of a reader's copies). Every chunk cut from a slab points to it;
// once none does, the garbage collector runs the slab's cleanup, which
// returns the memory to the operating system. Chunk bytes are only read
// under the Store's lock, or copied out of it (tier.view), so no reader
// holds them after their chunk is gone.
//
// Keeping chunk bytes out of the Go heap matters for memory: the garbage
// collector lets the heap grow to (1+GOGC/100) times its live size between
// collections, and closed chunks, most of the history, would count in that
// live size although they never change and hold no pointers. Outside the
// heap they cost their size once (docs/benchmarks.md, "serve with
// history").
type slab struct {
	mem []byte
}

// newSlab maps a slab, accounted in st.
func newSlab(st *slabStats) *slab {
	mem, offHeap := allocSlab(slabSize)
	s := &slab{mem: mem}
	if offHeap {
		st.offHeap.Add(int64(len(mem)))
		runtime.AddCleanup(s, st.free, mem)
	}
	return s
}

// bump hands out the bytes of one slab in order, each at its exact size.
type bump struct {
	cur *slab
	off int
}

func (b *bump) copy(p []byte, st *slabStats) (*slab, uint32) {
	if b.cur == nil || len(b.cur.mem)-b.off < len(p) {
		b.cur, b.off = newSlab(st), 0
	}
	n := b.off
	b.off += copy(b.cur.mem[n:], p)
	return b.cur, uint32(n)
}

// arena hands out the bytes of closed chunks from slabs. Chunks closed at
// about the same time are dropped at about the same time (the window moves
// on for every series alike, and series are gathered together, so their
// chunks fill up together), so they share a slab, which is freed once the
// last of them is gone. Chunks re-encoded by trim live only until the next
// trim, so they come from a slab of their own instead of pinning one of
// long-lived chunks. The Store keeps one arena per tier; callers hold the
// Store's lock. A nil arena allocates each chunk on the Go heap, as do
// chunks larger than a sixteenth of a slab.
type arena struct {
	// stats is the Store's: set by newArena, kept by reset.
	stats           *slabStats
	closed, trimmed bump
	// restored, while a snapshot is read, groups the chunks read by when
	// they end (see copyRestored).
	restored map[int64]*bump
}

// restoreBucket is the span of chunk end times that share slabs while a
// snapshot is restored.
const restoreBucket = int64(30 * 60 * 1000)

// copy copies a closed chunk's bytes into a slab and returns the slab and
// their offset in it.
func (a *arena) copy(p []byte) (*slab, uint32) {
	if a == nil || len(p) > slabSize/16 {
		return &slab{mem: bytes.Clone(p)}, 0
	}
	return a.closed.copy(p, a.stats)
}

// copyRestored is copy for a chunk read from a snapshot that ends at
// maxt. A snapshot lists every chunk of one series before the next
// series, so taking them in file order would put a day of one series'
// chunks in one slab, pinned until the newest of them is dropped; instead
// chunks that end in the same restoreBucket share slabs, as they do when
// the store fills as it runs. endRestore drops the grouping.
func (a *arena) copyRestored(p []byte, maxt int64) (*slab, uint32) {
	if a == nil || len(p) > slabSize/16 {
		return a.copy(p)
	}
	if a.restored == nil {
		a.restored = map[int64]*bump{}
	}
	k := floorDiv(maxt, restoreBucket)
	b := a.restored[k]
	if b == nil {
		b = &bump{}
		a.restored[k] = b
	}
	return b.copy(p, a.stats)
}

func (a *arena) endRestore() { a.restored = nil }

// newArena returns an arena accounting its slabs in st.
func newArena(st *slabStats) arena { return arena{stats: st} }

// copyTrimmed is copy for the chunks trim re-encodes.
func (a *arena) copyTrimmed(p []byte) (*slab, uint32) {
	if a == nil || len(p) > slabSize/16 {
		return a.copy(p)
	}
	return a.trimmed.copy(p, a.stats)
}
