package history

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// snapshotMagic starts every snapshot file; the last byte is the format
// version: 1 held one tier, 2 both tiers and the downsampler's state under
// one checksum at the end, 3 (written now) the same series encoding with a
// length and a checksum per series, so that a damaged byte costs one
// series, not the whole history. Restore reads all three.
var snapshotMagic = []byte("KVWHIST\x03")

// Flags of a series in a version 2 or 3 snapshot.
const (
	snapCounter = 1 << iota
	snapPending
	snapHasPrev
)

// maxSnapshotLabel is the longest label name or value a snapshot holds, in
// bytes. Targets' label values are bounded far below it by the scrape
// limits (config label_value_length_limit); a series over it is left out
// of the snapshot (and counted in the write's log line) instead of making
// the file unreadable.
const maxSnapshotLabel = 1 << 16

// maxSnapshotRecord bounds one series record of a version 3 snapshot, in
// bytes: a series holds at most a few MiB of chunks.
const maxSnapshotRecord = 256 << 20

// ErrNoSnapshot is returned by Restore when the snapshot file does not exist
// yet (the first start).
var ErrNoSnapshot = errors.New("no history snapshot yet")

// The series encoders (put*) write to a *bytes.Buffer, one series record
// at a time: a concrete type, so their scratch arrays stay on the stack.

// snapshotBufSize is the buffer between the encoder and the file, in both
// directions: the snapshot is streamed, never held in memory as a whole.
const snapshotBufSize = 1 << 16

// snapshotTempPattern is the name of the temporary file a write renames
// over the snapshot; Restore removes leftovers (a write killed midway).
func snapshotTempPattern(path string) string { return filepath.Base(path) + ".tmp*" }

// WriteSnapshot writes every series to path atomically (a temporary file
// renamed over path). The format is the magic, the number of series, then
// per series a record: its length, the series (labels, a flags byte for
// counter, pending sample and previous counter value, the downsampler's
// pending sample and previous value when flagged, the coarse then the
// full-resolution tier's chunks as time range and bytes, all
// length-prefixed) and a CRC32 (Castagnoli) of the record.
//
// The file is written through a 64 KiB buffer, one series encoded at a
// time, so writing costs no memory proportional to the history. The
// store's read lock is taken per series, not for the whole write: appends
// wait for at most one series' encoding, and each series is written as it
// was at that moment. Each write is logged (series, bytes, time).
func (s *Store) WriteSnapshot(path string) error {
	start := time.Now()
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, snapshotTempPattern(path))
	if err != nil {
		return fmt.Errorf("write history snapshot: %w (check that the directory of history.snapshot_file exists and is writable)", err)
	}
	tmp := f.Name()
	cw := &countWriter{w: f}
	st, err := s.writeSnapshot(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write history snapshot %s: %w", path, err)
	}
	attrs := []any{"file", path, "series", st.written, "bytes", cw.n, "duration", time.Since(start).Round(time.Millisecond)}
	if st.skipped > 0 {
		s.opts.Logger.Warn("history snapshot written without series whose labels are too long", append(attrs, "left_out", st.skipped, "limit_bytes", maxSnapshotLabel)...)
	} else {
		s.opts.Logger.Info("history snapshot written", attrs...)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeStats counts the series a snapshot write wrote and left out.
type writeStats struct{ written, skipped int }

// writeSnapshot streams the snapshot to f.
func (s *Store) writeSnapshot(f io.Writer) (writeStats, error) {
	var st writeStats
	w := bufio.NewWriterSize(f, snapshotBufSize)
	w.Write(snapshotMagic)
	var num [binary.MaxVarintLen64]byte
	s.mu.RLock()
	list := s.sortedSeriesLocked()
	s.mu.RUnlock()
	keep := list[:0:0]
	for _, ms := range list {
		if labelsFit(ms.lset) {
			keep = append(keep, ms)
		} else {
			st.skipped++
		}
	}
	w.Write(binary.AppendUvarint(num[:0], uint64(len(keep))))
	var rec bytes.Buffer
	var sum [4]byte
	for _, ms := range keep {
		rec.Reset()
		s.mu.RLock()
		putSeries(&rec, ms)
		s.mu.RUnlock()
		// A series truncated away after the list was taken is written
		// with no samples; Restore skips it.
		w.Write(binary.AppendUvarint(num[:0], uint64(rec.Len())))
		w.Write(rec.Bytes())
		binary.BigEndian.PutUint32(sum[:], crc32.Checksum(rec.Bytes(), castagnoli))
		w.Write(sum[:])
		st.written++
	}
	return st, w.Flush()
}

// labelsFit reports whether every label name and value of lset is short
// enough for a snapshot.
func labelsFit(lset labels.Labels) bool {
	ok := true
	lset.Range(func(l labels.Label) {
		if len(l.Name) > maxSnapshotLabel || len(l.Value) > maxSnapshotLabel {
			ok = false
		}
	})
	return ok
}

// putSeries encodes one series; callers hold s.mu (read).
func putSeries(w *bytes.Buffer, ms *memSeries) {
	putUvarint(w, uint64(ms.lset.Len()))
	ms.lset.Range(func(l labels.Label) {
		putString(w, l.Name)
		putString(w, l.Value)
	})
	var flags byte
	if ms.counter {
		flags |= snapCounter
	}
	if ms.ds.pending {
		flags |= snapPending
	}
	if ms.ds.hasPrev {
		flags |= snapHasPrev
	}
	w.WriteByte(flags)
	if ms.ds.pending {
		putVarint(w, ms.ds.t)
		putFloat(w, ms.ds.v)
	}
	if ms.ds.hasPrev {
		putFloat(w, ms.ds.prev)
	}
	putTier(w, &ms.coarse)
	putTier(w, &ms.raw)
}

// putTier writes tr's closed chunks and its open head, as chunks. Unlike
// tier.view it does not copy the head: callers hold the lock that keeps
// it from changing.
func putTier(w *bytes.Buffer, tr *tier) {
	n := len(tr.closed)
	if tr.open() {
		n++
	}
	putUvarint(w, uint64(n))
	for _, c := range tr.closed {
		putChunk(w, c.mint, c.maxt, c.bytes())
	}
	if tr.open() {
		putChunk(w, tr.hmint, tr.hmaxt, tr.head.Bytes())
	}
}

func putChunk(w *bytes.Buffer, mint, maxt int64, b []byte) {
	putVarint(w, mint)
	putVarint(w, maxt)
	putUvarint(w, uint64(len(b)))
	w.Write(b)
}

const (
	minInt64 = -1 << 63
	maxInt64 = 1<<63 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Restore reads the snapshot file into an empty store, keeping only chunks
// that still hold samples inside the retention window before now. It
// returns ErrNoSnapshot when the file does not exist, and otherwise nil: a
// snapshot never keeps serve from starting. A damaged file (truncated,
// flipped bytes, empty, written by a newer kvwatch, not a snapshot, a
// directory) gives the store every series that could still be read; the
// file is then moved aside to <file>.corrupt-<time> and a warning says how
// much was recovered. Temporary files of writes that never finished are
// removed first. Each restore is logged (series restored, series expired,
// bytes, time); the series written are those restored, expired and lost.
func (s *Store) Restore(now time.Time) error {
	path := s.opts.SnapshotFile
	if path == "" {
		return ErrNoSnapshot
	}
	s.removeTemps(path)
	start := time.Now()
	log := s.opts.Logger
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoSnapshot
	}
	if err != nil {
		log.Error("history snapshot cannot be read; starting with an empty history (fix the file's permissions; the next snapshot write replaces it)", "file", path, "err", err)
		return nil
	}
	st := restoreStats{lost: -1} // a directory: restore does not run
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = errors.New("it is a directory, not a file")
	default:
		st, err = s.restore(f, fi.Size(), now.UnixMilli()-s.opts.Retention.Milliseconds())
	}
	f.Close()
	attrs := []any{"file", path, "series", st.series, "expired", st.expired, "bytes", st.bytes, "duration", time.Since(start).Round(time.Millisecond)}
	if err == nil {
		log.Info("history snapshot restored", attrs...)
		return nil
	}
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if rerr := os.Rename(path, aside); rerr != nil {
		log.Error("history snapshot is damaged and cannot be moved aside; delete it", append(attrs, "problem", err, "err", rerr)...)
		return nil
	}
	lost, unreadable := any(st.lost), fmt.Sprint(st.lost)
	if st.lost < 0 { // unknown is not 0: the file's count could not be read
		lost, unreadable = "unknown", "an unknown number"
	}
	log.Warn(fmt.Sprintf("history snapshot is damaged: recovered %d series, %s unreadable; the file was moved aside and serve starts with what was recovered (keep the file to report the problem, or delete it)", st.series, unreadable),
		append(attrs, "lost", lost, "moved_to", aside, "problem", err)...)
	return nil
}

// removeTemps removes the temporary files that writes of path left behind.
func (s *Store) removeTemps(path string) {
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), globEscape(snapshotTempPattern(path))))
	for _, t := range tmps {
		if err := os.Remove(t); err == nil {
			s.opts.Logger.Info("removed the temporary file of an unfinished history snapshot write", "file", t)
		}
	}
}

// globEscape escapes the glob metacharacters of a file name, keeping the
// trailing '*' of a pattern.
func globEscape(p string) string {
	base, star := strings.CutSuffix(p, "*")
	var b strings.Builder
	for _, r := range base {
		if strings.ContainsRune(`*?[\\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	if star {
		b.WriteByte('*')
	}
	return b.String()
}

// restoreStats says what a restore read.
type restoreStats struct {
	// series were restored; expired are the file's series read whole but
	// with no sample inside the window (not kept); lost are the series of
	// the file that could not be read (damaged records, or a count beyond
	// a truncation), -1 while the file's series count is unknown (not a
	// snapshot, a newer version, no count).
	series, expired, lost int
	bytes                 int64
}

// restore reads a snapshot of size bytes from f. On an error the store
// keeps the series read before it (version 1 and 2) or every series whose
// record is intact (version 3), and the error says what was wrong.
func (s *Store) restore(f io.ReaderAt, size int64, mint int64) (st restoreStats, err error) {
	st.bytes, st.lost = size, -1
	head := make([]byte, len(snapshotMagic))
	if _, err := f.ReadAt(head, 0); err != nil {
		return st, errNotSnapshot
	}
	magic := snapshotMagic[:len(snapshotMagic)-1]
	if !bytes.Equal(head[:len(magic)], magic) {
		return st, errNotSnapshot
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		s.rawArena.endRestore()
		s.coarseArena.endRestore()
		st.series = s.countLocked()
	}()
	switch v := head[len(magic)]; v {
	case 1, 2:
		return st, s.restoreV12(f, size, mint, &st)
	case 3:
		return st, s.restoreV3(f, size, mint, &st)
	default:
		return st, fmt.Errorf("unknown snapshot version %d (%w)", v, errNewerVersion)
	}
}

func (s *Store) countLocked() int {
	n := 0
	for _, list := range s.series {
		n += len(list)
	}
	return n
}

var (
	errNotSnapshot  = errors.New("not a kvwatch history snapshot")
	errNewerVersion = errors.New("written by a newer kvwatch")
)

// restoreV3 reads the series records of a version 3 snapshot, skipping
// those whose checksum or contents are wrong, and counts in st the file's
// series it could not read and those it read but did not keep.
func (s *Store) restoreV3(f io.ReaderAt, size int64, mint int64, st *restoreStats) error {
	r := bufio.NewReaderSize(io.NewSectionReader(f, int64(len(snapshotMagic)), size-int64(len(snapshotMagic))), snapshotBufSize)
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return fmt.Errorf("no series count: %w", err)
	}
	st.lost = 0
	var (
		rec, scratch []byte
		sum          [4]byte
		rr           = bufio.NewReaderSize(nil, 4096)
		first        error
		read         uint64
	)
	note := func(e error) {
		st.lost++
		if first == nil {
			first = e
		}
	}
	for ; read < n; read++ {
		l, err := binary.ReadUvarint(r)
		if err != nil {
			first = errors.Join(first, fmt.Errorf("the file ends after %d of %d series (truncated)", read, n))
			break
		}
		if l > maxSnapshotRecord || l > uint64(size) {
			first = errors.Join(first, fmt.Errorf("series %d has a record length of %d bytes, beyond the file", read+1, l))
			break
		}
		if uint64(cap(rec)) < l {
			rec = make([]byte, l)
		}
		rec = rec[:l]
		if _, err := io.ReadFull(r, rec); err != nil {
			first = errors.Join(first, fmt.Errorf("the file ends inside series %d of %d (truncated)", read+1, n))
			break
		}
		if _, err := io.ReadFull(r, sum[:]); err != nil {
			first = errors.Join(first, fmt.Errorf("the file ends inside series %d of %d (truncated)", read+1, n))
			break
		}
		if crc32.Checksum(rec, castagnoli) != binary.BigEndian.Uint32(sum[:]) {
			note(fmt.Errorf("series %d: checksum mismatch", read+1))
			continue
		}
		rr.Reset(bytes.NewReader(rec))
		kept, err := s.readSeriesLocked(rr, 3, int64(l), mint, &scratch)
		switch {
		case err != nil:
			note(fmt.Errorf("series %d: %w", read+1, err))
		case !kept:
			st.expired++
		}
	}
	st.lost += int(min(n-read, 1<<31))
	if first == nil {
		if _, err := r.ReadByte(); err == nil {
			first = errors.New("trailing bytes after the last series")
		}
	}
	return first
}

// restoreV12 reads a version 1 or 2 snapshot: one checksum at the end.
// The series read before an error are kept; the one it stopped at and
// those after it are lost.
func (s *Store) restoreV12(f io.ReaderAt, size int64, mint int64, st *restoreStats) error {
	if size < int64(len(snapshotMagic))+4 {
		return errors.New("the file ends before its first series (truncated)")
	}
	body := size - 4
	sum := crc32.New(castagnoli)
	r := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, 0, body), sum), snapshotBufSize)
	head := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, head); err != nil {
		return err
	}
	version := head[len(head)-1]
	err := s.restoreSeriesLocked(r, version, body, mint, st)
	// Hash what the parser did not read (trailing bytes, or the rest
	// after an error), then compare: a wrong checksum explains a parse
	// error better than the parse error does.
	if _, cerr := io.Copy(io.Discard, r); cerr != nil && err == nil {
		err = cerr
	}
	var want [4]byte
	if _, rerr := f.ReadAt(want[:], body); rerr != nil {
		err = rerr
	} else if sum.Sum32() != binary.BigEndian.Uint32(want[:]) {
		err = errors.New("checksum mismatch: the file is truncated or corrupt")
	}
	return err
}

// restoreSeriesLocked reads the series count and the series of a version
// 1 or 2 snapshot.
func (s *Store) restoreSeriesLocked(r *bufio.Reader, version byte, size int64, mint int64, st *restoreStats) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	var scratch []byte
	for i := range n {
		kept, err := s.readSeriesLocked(r, version, size, mint, &scratch)
		if err != nil {
			st.lost = int(min(n-i, 1<<31))
			return err
		}
		if !kept {
			st.expired++
		}
	}
	st.lost = 0
	return nil
}

// readSeriesLocked reads one series (labels, then the version's series
// encoding) and adds it to the store when it holds samples in the window,
// and reports whether it did.
func (s *Store) readSeriesLocked(r *bufio.Reader, version byte, size int64, mint int64, scratch *[]byte) (kept bool, err error) {
	nl, err := binary.ReadUvarint(r)
	if err != nil {
		return false, err
	}
	if nl > 1<<10 {
		return false, fmt.Errorf("%d labels: not a series", nl)
	}
	var b labels.ScratchBuilder
	for range nl {
		name, err := getString(r)
		if err != nil {
			return false, err
		}
		val, err := getString(r)
		if err != nil {
			return false, err
		}
		b.Add(name, val)
	}
	b.Sort()
	lset := b.Labels()
	if _, dup := s.lookupLocked(lset); dup {
		return false, fmt.Errorf("series %s appears twice", lset)
	}
	ms := newSeries(lset, &s.rawArena, &s.coarseArena)
	if version == 1 {
		// Version 1 kept no type; kvwatch's counters end in _total.
		ms.counter = strings.HasSuffix(lset.Get(model.MetricNameLabel), "_total")
		if err := readChunks(r, size, mint, ms, &ms.raw, scratch); err != nil {
			return false, err
		}
	} else if err := readSeriesV2(r, size, mint, ms, scratch); err != nil {
		return false, err
	}
	if ms.lastT == minInt64 {
		return false, nil
	}
	s.addLocked(ms)
	// Stale until gathered again: the series limits may drop it.
	s.staleLocked(ms, ms.lastT)
	return true, nil
}

func readSeriesV2(r *bufio.Reader, size int64, mint int64, ms *memSeries, scratch *[]byte) error {
	flags, err := r.ReadByte()
	if err != nil {
		return err
	}
	ms.counter = flags&snapCounter != 0
	var pending bool
	var pt int64
	var pv float64
	if flags&snapPending != 0 {
		if pt, err = binary.ReadVarint(r); err != nil {
			return err
		}
		if pv, err = getFloat(r); err != nil {
			return err
		}
		pending = true
	}
	if flags&snapHasPrev != 0 {
		if ms.ds.prev, err = getFloat(r); err != nil {
			return err
		}
		ms.ds.hasPrev = true
	}
	if err := readChunks(r, size, mint, ms, &ms.coarse, scratch); err != nil {
		return err
	}
	if pending && pt >= mint {
		if pt <= ms.lastT {
			return fmt.Errorf("series %s has overlapping chunks", ms.lset)
		}
		ms.ds.pending, ms.ds.t, ms.ds.v = true, pt, pv
		ms.lastT, ms.lastV, ms.lastOK = pt, pv, true
	}
	return readChunks(r, size, mint, ms, &ms.raw, scratch)
}

// readChunks reads a count and that many chunks into tr as closed chunks,
// skipping those that end before mint. scratch is the read buffer, reused.
func readChunks(r *bufio.Reader, size int64, mint int64, ms *memSeries, tr *tier, scratch *[]byte) error {
	nc, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if nc <= 1<<10 { // room for the chunks and the next one, not more
		tr.closed = growExact(tr.closed, int(nc)+1)
	}
	for range nc {
		cmint, err := binary.ReadVarint(r)
		if err != nil {
			return err
		}
		cmaxt, err := binary.ReadVarint(r)
		if err != nil {
			return err
		}
		l, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		if l > uint64(size) {
			return errors.New("chunk length beyond the end of the file")
		}
		if cap(*scratch) < int(l) {
			*scratch = make([]byte, l)
		}
		cb := (*scratch)[:l]
		if _, err := io.ReadFull(r, cb); err != nil {
			return err
		}
		if cmaxt < mint {
			continue
		}
		c := chunk{slab: &slab{mem: cb}, n: uint32(l), mint: cmint, maxt: cmaxt}
		if first, _ := binary.Varint(cb[min(2, l):]); l < 3 || c.numSamples() == 0 || first != cmint {
			return fmt.Errorf("series %s has a chunk whose samples do not match its time range", ms.lset)
		}
		if cmint <= ms.lastT || cmaxt < cmint {
			return fmt.Errorf("series %s has overlapping chunks", ms.lset)
		}
		c.slab, c.off = tr.arena.copyRestored(cb, cmaxt)
		tr.closed = append(tr.closed, c)
		ms.lastT, ms.lastOK = cmaxt, false // the value is inside the chunk
	}
	return nil
}

func putFloat(w *bytes.Buffer, v float64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(v))
	w.Write(b[:])
}

func getFloat(r *bufio.Reader) (float64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return math.Float64frombits(binary.BigEndian.Uint64(b[:])), nil
}

func putUvarint(w *bytes.Buffer, v uint64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutUvarint(b[:], v)])
}

func putVarint(w *bytes.Buffer, v int64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutVarint(b[:], v)])
}

func putString(w *bytes.Buffer, s string) {
	putUvarint(w, uint64(len(s)))
	w.WriteString(s)
}

func getString(r *bufio.Reader) (string, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if l > maxSnapshotLabel {
		return "", errors.New("label longer than 64KiB")
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
