package history

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

// writeFilled writes a snapshot of fill's store (20 minutes, 6 series) to
// path and returns the end of its data and its series count.
func writeFilled(t *testing.T, path string) (time.Time, int) {
	t.Helper()
	st := New(Options{Retention: time.Hour, SnapshotFile: path})
	end := fill(t, st, 20)
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	return end, st.Stats().Series
}

// Every kind of damaged snapshot lets the store start: with what could be
// read, the file moved aside, a warning saying how much was recovered.
func TestSnapshotDamageNeverBlocksStart(t *testing.T) {
	for _, c := range []struct {
		name string
		// damage changes the written file; it returns the series
		// expected back (-1: any number from 0 to all but one).
		damage  func(t *testing.T, path string, series int) int
		problem string
	}{
		{"one flipped byte in a series", func(t *testing.T, path string, n int) int {
			b := mustRead(t, path)
			b[len(b)/2] ^= 0xff
			mustWrite(t, path, b)
			return n - 1
		}, "checksum mismatch"},
		{"truncated", func(t *testing.T, path string, n int) int {
			b := mustRead(t, path)
			mustWrite(t, path, b[:len(b)-10])
			return n - 1
		}, "truncated"},
		{"empty", func(t *testing.T, path string, n int) int { mustWrite(t, path, nil); return 0 }, "not a kvwatch history snapshot"},
		{"not a snapshot", func(t *testing.T, path string, n int) int {
			mustWrite(t, path, []byte("hello, this is some other file"))
			return 0
		}, "not a kvwatch history snapshot"},
		{"newer version", func(t *testing.T, path string, n int) int {
			b := mustRead(t, path)
			b[7] = 9
			mustWrite(t, path, b)
			return 0
		}, "unknown snapshot version 9"},
		{"a directory", func(t *testing.T, path string, n int) int {
			os.Remove(path)
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
			return 0
		}, "directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.snap")
			end, n := writeFilled(t, path)
			wantSeries := c.damage(t, path, n)
			var logs bytes.Buffer
			st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)})
			if err := st.Restore(end.Add(time.Minute)); err != nil {
				t.Fatalf("Restore = %v, want nil: a damaged snapshot never blocks a start", err)
			}
			if got := st.Stats().Series; got != wantSeries {
				t.Errorf("recovered %d series, want %d", got, wantSeries)
			}
			out := logs.String()
			for _, w := range []string{"level=WARN", "history snapshot is damaged", "recovered " + itoa(wantSeries) + " series", c.problem, "moved_to=" + path + ".corrupt-"} {
				if !strings.Contains(out, w) {
					t.Errorf("the warning lacks %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the damaged file is still at %s", path)
			}
			if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
				t.Errorf("set aside: %v, want one file", aside)
			}
			// The next write succeeds where the damaged file was.
			if err := st.WriteSnapshot(path); err != nil {
				t.Errorf("writing after a damaged restore: %v", err)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A flipped byte costs one series: the others come back exactly.
func TestSnapshotDamageKeepsOtherSeries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	orig := New(Options{Retention: time.Hour, SnapshotFile: path})
	end := fill(t, orig, 20)
	if err := orig.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	b := mustRead(t, path)
	b[len(b)-20] ^= 0x01 // inside the last series' record
	mustWrite(t, path, b)
	st := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st.Restore(end.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	want, got := contents(orig), contents(st)
	if len(got) != len(want)-1 {
		t.Fatalf("restored %d series, want %d", len(got), len(want)-1)
	}
	for k, vs := range got {
		if !sameValues(vs, want[k]) {
			t.Errorf("series %s differs after the restore", k)
		}
	}
}

// A target's 1 MiB label is left out of the snapshot: the file stays
// readable and every other series is restored.
func TestSnapshotHugeLabel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	var logs bytes.Buffer
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)})
	end := fill(t, st, 5)
	huge := labels.FromStrings(model.MetricNameLabel, "kvwatch_server_info", "model", strings.Repeat("m", 1<<20), "server", "evil")
	st.Append(huge, end.UnixMilli(), 1)
	n := st.Stats().Series
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "left_out=1") {
		t.Errorf("the write does not say a series was left out:\n%s", logs.String())
	}
	logs.Reset()
	st2 := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)})
	if err := st2.Restore(end.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := st2.Stats().Series; got != n-1 {
		t.Errorf("restored %d series, want %d (all but the huge one)", got, n-1)
	}
	if strings.Contains(logs.String(), "damaged") {
		t.Errorf("the snapshot was taken as damaged:\n%s", logs.String())
	}
}

// Temporary files of writes killed midway are removed at start; other
// files beside the snapshot are kept.
func TestRestoreRemovesTempFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.snap")
	end, _ := writeFilled(t, path)
	for _, name := range []string{"history.snap.tmp123", "history.snap.tmp9", "other.tmp1", "history.snap.corrupt-x"} {
		mustWrite(t, filepath.Join(dir, name), []byte("x"))
	}
	var logs bytes.Buffer
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)})
	if err := st.Restore(end); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "history.snap history.snap.corrupt-x other.tmp1" {
		t.Errorf("files after restore: %s, want the temporary files of the snapshot gone", got)
	}
	// Also without a snapshot (killed during the first write).
	os.Remove(path)
	mustWrite(t, filepath.Join(dir, "history.snap.tmp5"), []byte("x"))
	New(Options{SnapshotFile: path}).Restore(end)
	if _, err := os.Stat(filepath.Join(dir, "history.snap.tmp5")); !os.IsNotExist(err) {
		t.Errorf("the temporary file of a first write was kept")
	}
}

// Writes and restores are logged with series, bytes and time.
func TestSnapshotLogLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	var logs bytes.Buffer
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)})
	end := fill(t, st, 5)
	if err := st.WriteSnapshot(path); err != nil {
		t.Fatal(err)
	}
	size := itoa(len(mustRead(t, path)))
	n := itoa(st.Stats().Series)
	for _, w := range []string{"level=INFO", "history snapshot written", "series=" + n, "bytes=" + size, "duration="} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("write log lacks %q:\n%s", w, logs.String())
		}
	}
	logs.Reset()
	if err := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: logTo(&logs)}).Restore(end); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"level=INFO", "history snapshot restored", "series=" + n, "bytes=" + size, "duration="} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("restore log lacks %q:\n%s", w, logs.String())
		}
	}
}
