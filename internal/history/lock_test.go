package history

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two stores (two serves) never share a snapshot file: the second one's
// LockSnapshot and a Reconfigure onto a file in use fail with
// ErrSnapshotInUse, naming the holder; Close and Reconfigure release it.
func TestSnapshotLock(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "one.snapshot"), filepath.Join(dir, "two.snapshot")
	store := func(path string) *Store {
		return New(Options{Retention: time.Hour, SnapshotFile: path, SnapshotInterval: time.Minute})
	}
	settings := func(path string) Settings {
		return Settings{Retention: time.Hour, Interval: 15 * time.Second, SnapshotFile: path, SnapshotInterval: time.Minute}
	}
	a, b, c := store(p1), store(p1), store(p2)
	inUse := fmt.Sprintf("is in use by another kvwatch serve (process %d holds ", os.Getpid())
	for _, step := range []struct {
		name string
		do   func() error
		want string // part of the error; "" for none
	}{
		{"a takes one", a.LockSnapshot, ""},
		{"b cannot take one", b.LockSnapshot, p1 + " " + inUse + p1 + ".lock)"},
		{"c takes two", c.LockSnapshot, ""},
		{"a cannot move to two", func() error { return a.Reconfigure(settings(p2)) }, p2 + " " + inUse},
		{"a still has one", func() error {
			return errIf(a.Settings().SnapshotFile != p1, "a's file is %s", a.Settings().SnapshotFile)
		}, ""},
		{"a's own file checks fine", func() error { return a.CheckSnapshotFile(p1) }, ""},
		{"two does not", func() error { return a.CheckSnapshotFile(p2) }, inUse},
		{"c closes", func() error { c.Close(); return nil }, ""},
		{"a moves to two", func() error { return a.Reconfigure(settings(p2)) }, ""},
		{"b takes one, which a left", b.LockSnapshot, ""},
		{"c cannot take two back", c.LockSnapshot, inUse},
		{"a turns snapshots off", func() error { return a.Reconfigure(settings("")) }, ""},
		{"c takes two", c.LockSnapshot, ""},
	} {
		err := step.do()
		switch {
		case step.want == "" && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.want != "" && (err == nil || !strings.Contains(err.Error(), step.want) || !errors.Is(err, ErrSnapshotInUse)):
			t.Fatalf("%s: error %v, want ErrSnapshotInUse with %q", step.name, err, step.want)
		}
	}
	b.Close()
	c.Close()
}

func errIf(cond bool, format string, args ...any) error {
	if cond {
		return fmt.Errorf(format, args...)
	}
	return nil
}

// A lock file that cannot be made (here: its directory is missing) does
// not keep the store from running: it says so and writes without a lock.
func TestSnapshotLockUnavailable(t *testing.T) {
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "missing", "h.snapshot")
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := st.LockSnapshot(); err != nil {
		t.Fatalf("LockSnapshot = %v, want nil", err)
	}
	if !strings.Contains(logs.String(), "history snapshot written without a lock") || !strings.Contains(logs.String(), "no such file or directory") {
		t.Errorf("logs:\n%s\nwant the warning with the lock file's error", logs.String())
	}
	st.Close()
}
