package history

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

func slogJSON(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }

// logLine is one JSON log record: its message and attributes.
type logLine map[string]any

// jsonLogs returns the records of a JSON slog handler's output.
func jsonLogs(t *testing.T, b *bytes.Buffer) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m logLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// counts picks the counting attributes of a record (absent ones are left
// out, so a missing count shows in the diff).
func counts(l logLine) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"series", "expired", "lost", "left_out", "bytes"} {
		if v, ok := l[k]; ok {
			out[k] = v
		}
	}
	return out
}

// recordEnds returns the offsets where each series record of a version 3
// file ends, read from the framing by hand (not by the restore code).
func recordEnds(file []byte) []int {
	off := len(snapshotMagic)
	_, n := uvarint(file[off:])
	off += n
	var ends []int
	for off < len(file) {
		l, n := uvarint(file[off:])
		off += n + int(l) + 4
		ends = append(ends, off)
	}
	return ends
}

// Every number a snapshot write or restore logs is the real count: a
// store of 12 series (fill's 3 servers × 4 families) plus one with a label
// over the snapshot's limit (left out) and one whose only sample is 2h old
// (written, then out of the window at the restore: expired). The series a
// write logs are the restore's series + expired + lost.
func TestSnapshotLogCounts(t *testing.T) {
	const (
		filled  = 12 // fill: 3 servers × 4 families
		written = filled + 1
	)
	for _, c := range []struct {
		name string
		// damage changes the file; ends are its records' end offsets.
		damage func(t *testing.T, file []byte, ends []int) []byte
		// want: the restore log's counts (bytes added by the test), and
		// the series the restored store holds.
		want    map[string]any
		problem string
	}{
		{"intact", nil, map[string]any{"series": float64(filled), "expired": float64(1)}, ""},
		{"one record's byte flipped", func(t *testing.T, b []byte, ends []int) []byte {
			b[ends[2]-6] ^= 0xff // inside the third record
			return b
		}, map[string]any{"series": float64(filled - 1), "expired": float64(1), "lost": float64(1)}, "series 3: checksum mismatch"},
		{"cut after 5 records", func(t *testing.T, b []byte, ends []int) []byte {
			return b[:ends[4]]
		}, map[string]any{"series": float64(5), "expired": float64(0), "lost": float64(written - 5)}, "the file ends after 5 of 13 series"},
		{"cut inside the 6th record", func(t *testing.T, b []byte, ends []int) []byte {
			return b[:ends[5]-3]
		}, map[string]any{"series": float64(5), "expired": float64(0), "lost": float64(written - 5)}, "the file ends inside series 6 of 13"},
		{"4th record's length beyond the file", func(t *testing.T, b []byte, ends []int) []byte {
			off := ends[2]
			_, n := uvarint(b[off:])
			huge := binary.AppendUvarint(nil, 1<<40)
			return append(append(append([]byte{}, b[:off]...), huge...), b[off+n:]...)
		}, map[string]any{"series": float64(3), "expired": float64(0), "lost": float64(written - 3)}, "series 4 has a record length of 1099511627776 bytes, beyond the file"},
		{"not a snapshot", func(t *testing.T, b []byte, ends []int) []byte {
			return []byte("some other file")
		}, map[string]any{"series": float64(0), "expired": float64(0), "lost": "unknown"}, "not a kvwatch history snapshot"},
		{"newer version", func(t *testing.T, b []byte, ends []int) []byte {
			b[len(snapshotMagic)-1] = 9
			return b
		}, map[string]any{"series": float64(0), "expired": float64(0), "lost": "unknown"}, "unknown snapshot version 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "history.snap")
			var logs bytes.Buffer
			log := slogJSON(&logs)
			st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: log})
			end := fill(t, st, 5)
			st.Append(labels.FromStrings(model.MetricNameLabel, "kvwatch_server_info", "model", strings.Repeat("m", maxSnapshotLabel+1), "server", "evil"), end.UnixMilli(), 1)
			st.Append(labels.FromStrings(model.MetricNameLabel, "zz_expired", "server", "a"), end.Add(-2*time.Hour).UnixMilli(), 1)
			if n := st.Stats().Series; n != filled+2 {
				t.Fatalf("the store holds %d series, want %d", n, filled+2)
			}
			if err := st.WriteSnapshot(path); err != nil {
				t.Fatal(err)
			}
			file := mustRead(t, path)
			ends := recordEnds(file)
			if len(ends) != written {
				t.Fatalf("the file holds %d records, want %d", len(ends), written)
			}
			wrote := jsonLogs(t, &logs)
			if diff := cmp.Diff(map[string]any{"series": float64(written), "left_out": float64(1), "bytes": float64(len(file))}, counts(wrote[len(wrote)-1])); diff != "" {
				t.Errorf("write log counts (-want +got):\n%s", diff)
			}
			if c.damage != nil {
				file = c.damage(t, file, ends)
				mustWrite(t, path, file)
			}
			logs.Reset()
			back := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: log})
			if err := back.Restore(end.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			got := jsonLogs(t, &logs)
			last := got[len(got)-1]
			want := map[string]any{"bytes": float64(len(file))}
			for k, v := range c.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, counts(last)); diff != "" {
				t.Errorf("restore log counts (-want +got):\n%s\n%v", diff, last)
			}
			if n := back.Stats().Series; float64(n) != c.want["series"] {
				t.Errorf("the restored store holds %d series, the log says %v", n, c.want["series"])
			}
			if msg := last["msg"].(string); c.damage != nil {
				wantMsg := "recovered " + itoa(int(c.want["series"].(float64))) + " series, "
				if l, ok := c.want["lost"].(float64); ok {
					wantMsg += itoa(int(l)) + " unreadable"
				} else {
					wantMsg += "an unknown number unreadable"
				}
				if !strings.Contains(msg, wantMsg) {
					t.Errorf("restore message %q lacks %q", msg, wantMsg)
				}
				if p, _ := last["problem"].(string); !strings.Contains(p, c.problem) {
					t.Errorf("problem %q lacks %q", p, c.problem)
				}
			}
		})
	}
}

// A damaged format 2 file (one checksum at the end) counts the series it
// could not read: the one the read stopped at and those after it.
func TestSnapshotLogCountsVersion2(t *testing.T) {
	base := t0.Unix()
	file := snapshotV1(t, 1, []sample{{base, 10}, {base + 5, 20}, {base + 10, 3}})
	// Cut inside the chunk bytes (the checksum and 3 bytes of the chunk).
	file = file[:len(file)-7]
	path := filepath.Join(t.TempDir(), "history.snap")
	mustWrite(t, path, file)
	var logs bytes.Buffer
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: slogJSON(&logs)})
	if err := st.Restore(t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	got := jsonLogs(t, &logs)
	want := map[string]any{"series": float64(0), "expired": float64(0), "lost": float64(1), "bytes": float64(len(file))}
	if diff := cmp.Diff(want, counts(got[len(got)-1])); diff != "" {
		t.Errorf("restore log counts (-want +got):\n%s", diff)
	}
}
