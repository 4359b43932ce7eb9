package history

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// snapshotV1 builds a format 1 file by hand: one tier, no types.
func snapshotV1(t *testing.T, version byte, samples []sample) []byte {
	t.Helper()
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		app.Append(0, s.T*1000, s.V)
	}
	var buf bytes.Buffer
	buf.WriteString("KVWHIST")
	buf.WriteByte(version)
	putUvarint(&buf, 1) // series
	putUvarint(&buf, 2) // labels
	putString(&buf, "__name__")
	putString(&buf, "kvwatch_prompt_tokens_total")
	putString(&buf, "server")
	putString(&buf, "a")
	putUvarint(&buf, 1) // chunks
	putVarint(&buf, samples[0].T*1000)
	putVarint(&buf, samples[len(samples)-1].T*1000)
	putUvarint(&buf, uint64(len(c.Bytes())))
	buf.Write(c.Bytes())
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(buf.Bytes(), castagnoli))
	buf.Write(sum[:])
	return buf.Bytes()
}

func TestRestoreVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	base := t0.Unix()
	in := []sample{{base, 10}, {base + 5, 20}, {base + 10, 3}}
	mustWrite(t, path, snapshotV1(t, 1, in))
	st := New(Options{Retention: time.Hour, SnapshotFile: path})
	if err := st.Restore(t0.Add(time.Minute)); err != nil {
		t.Fatalf("Restore(format 1) = %v", err)
	}
	list := st.sortedSeriesLocked()
	if len(list) != 1 || !list[0].counter {
		t.Fatalf("restored %d series (counter %v), want 1 counter (the name ends in _total)", len(list), len(list) == 1 && list[0].counter)
	}
	if diff := cmp.Diff(in, samplesOf(t, list[0].view(minInt64, maxInt64))); diff != "" {
		t.Errorf("restored samples (-want +got):\n%s", diff)
	}
}

func TestRestoreNewerVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.snap")
	base := t0.Unix()
	mustWrite(t, path, snapshotV1(t, 9, []sample{{base, 1}}))
	var logs bytes.Buffer
	st := New(Options{Retention: time.Hour, SnapshotFile: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := st.Restore(t0); err != nil {
		t.Fatalf("Restore(format 9) = %v, want nil: a newer file never keeps serve from starting", err)
	}
	if !strings.Contains(logs.String(), "unknown snapshot version 9") {
		t.Errorf("log does not name the version:\n%s", logs.String())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the newer file was not moved aside: %v", err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("moved aside: %v, want one %s.corrupt-<time>", aside, path)
	}
}
