//go:build unix

package history

import "syscall"

// allocSlab maps n bytes of anonymous memory outside the Go heap; it falls
// back to the heap (reporting false) if the mapping fails.
func allocSlab(n int) ([]byte, bool) {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n), false
	}
	return mem, true
}

// freeSlab unmaps a slab's memory; nothing refers to it any more.
func freeSlab(mem []byte) error { return syscall.Munmap(mem) }
