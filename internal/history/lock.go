package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrSnapshotInUse says that another process holds the lock of a snapshot
// file: another serve reads and writes it.
var ErrSnapshotInUse = errors.New("in use by another kvwatch serve")

// snapshotLock is the lock a Store holds on its snapshot file: an
// exclusive lock of <file>.lock (the snapshot itself is replaced by every
// write), which holds the locking process's id. f is nil when the lock
// file could not be made (the store then writes without a lock).
type snapshotLock struct {
	path string
	f    *os.File
}

func lockFile(path string) string { return path + ".lock" }

// lockSnapshot takes the lock of the snapshot file path. An error wraps
// ErrSnapshotInUse when another process holds it; any other error is the
// lock file's (a missing directory, permissions).
func lockSnapshot(path string) (*snapshotLock, error) {
	f, err := os.OpenFile(lockFile(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock history snapshot %s: %w", path, err)
	}
	if err := flock(f); err != nil {
		holder, _ := os.ReadFile(lockFile(path))
		f.Close()
		if errors.Is(err, errLocked) {
			pid := string(bytes.TrimSpace(holder))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("history snapshot %s is %w (process %s holds %s): give each serve a snapshot file of its own",
				path, ErrSnapshotInUse, pid, lockFile(path))
		}
		return nil, fmt.Errorf("lock history snapshot %s: %w", path, err)
	}
	// The holder's process id, for the message of the next one.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &snapshotLock{path: path, f: f}, nil
}

// release releases the lock (closing the file does).
func (l *snapshotLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}

// LockSnapshot takes the lock of the store's snapshot file, so that no
// other serve reads or writes it while this store runs; Reconfigure then
// takes the lock of a new file before it writes it, and Close releases
// the lock. An error wraps ErrSnapshotInUse when another process holds
// the lock; a lock file that cannot be made (a read-only directory) is
// logged and the file is written without a lock, as by a store that never
// calls LockSnapshot. Call it before Restore.
func (s *Store) LockSnapshot() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locking = true
	return s.relockLocked(s.opts.SnapshotFile)
}

// relockLocked makes the store hold the lock of path ("": none) instead of
// its current one.
func (s *Store) relockLocked(path string) error {
	if s.lock != nil && s.lock.path == path || s.lock == nil && path == "" {
		return nil
	}
	var l *snapshotLock
	if path != "" {
		var err error
		if l, err = lockSnapshot(path); errors.Is(err, ErrSnapshotInUse) {
			return err
		} else if err != nil {
			s.opts.Logger.Warn("history snapshot written without a lock: another serve could write it too", "file", path, "err", err)
			l = &snapshotLock{path: path}
		}
	}
	s.lock.release()
	s.lock = l
	return nil
}

// CheckSnapshotFile reports whether the store could take the lock of the
// snapshot file path (Reconfigure would): an error wrapping
// ErrSnapshotInUse when another process holds it. The store's own file
// and "" are always fine.
func (s *Store) CheckSnapshotFile(path string) error {
	s.mu.RLock()
	own := !s.locking || path == "" || s.lock != nil && s.lock.path == path
	s.mu.RUnlock()
	if own {
		return nil
	}
	l, err := lockSnapshot(path)
	if errors.Is(err, ErrSnapshotInUse) {
		return err
	}
	l.release()
	return nil
}

// Close releases the lock of the snapshot file (LockSnapshot). Call it
// once Run has returned; the store still answers queries.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lock.release()
	s.lock, s.locking = nil, false
}
