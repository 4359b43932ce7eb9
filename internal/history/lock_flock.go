//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package history

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is flock's error when another process holds the lock.
var errLocked = syscall.EWOULDBLOCK

// flock takes an exclusive lock of f without waiting; it is released when
// f is closed (or the process ends, a kill -9 included).
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
