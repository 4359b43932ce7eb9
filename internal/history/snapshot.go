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
// version: 1 held one tier, 2 (written now) holds both tiers and the
// downsampler's state. Restore reads both.
var snapshotMagic = []byte("KVWHIST\x02")

// Flags of a series in a version 2 snapshot.
const (
	snapCounter = 1 << iota
	snapPending
	snapHasPrev
)

// ErrNoSnapshot is returned by Restore when the snapshot file does not exist
// yet (the first start).
var ErrNoSnapshot = errors.New("no history snapshot yet")

// snapWriter is what the snapshot encoders write to: a *bufio.Writer for
// the file, a *bytes.Buffer in tests.
type snapWriter interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
}

// snapshotBufSize is the buffer between the encoder and the file, in both
// directions: the snapshot is streamed, never held in memory as a whole.
const snapshotBufSize = 1 << 16

// WriteSnapshot writes every series to path atomically (a temporary file
// renamed over path). The format is the magic, then per series its labels,
// a flags byte (counter, pending sample, previous counter value), the
// downsampler's pending sample and previous value when flagged, and the
// coarse then the full-resolution tier's chunks (time range and bytes),
// all length-prefixed, then a CRC32 (Castagnoli) of everything before it.
//
// The file is written through a 64 KiB buffer while the CRC is computed
// over the same bytes, so writing costs no memory proportional to the
// history. The store's read lock is taken per series, not for the whole
// write: appends wait for at most one series' encoding, and each series
// is written as it was at that moment.
func (s *Store) WriteSnapshot(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write history snapshot: %w (check that the directory of history.snapshot_file exists and is writable)", err)
	}
	tmp := f.Name()
	err = s.writeSnapshot(f)
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
	return nil
}

// writeSnapshot streams the snapshot to f, then appends the CRC of what
// it wrote.
func (s *Store) writeSnapshot(f io.Writer) error {
	sum := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, sum), snapshotBufSize)
	w.Write(snapshotMagic)
	s.mu.RLock()
	list := s.sortedSeriesLocked()
	s.mu.RUnlock()
	putUvarint(w, uint64(len(list)))
	for _, ms := range list {
		s.mu.RLock()
		putSeries(w, ms)
		s.mu.RUnlock()
		// A series truncated away after the list was taken is written
		// with no samples; Restore skips it.
	}
	if err := w.Flush(); err != nil {
		return err
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum.Sum32())
	_, err := f.Write(b[:])
	return err
}

// putSeries encodes one series; callers hold s.mu (read).
func putSeries(w snapWriter, ms *memSeries) {
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
func putTier(w snapWriter, tr *tier) {
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

func putChunk(w snapWriter, mint, maxt int64, b []byte) {
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
// returns ErrNoSnapshot when the file does not exist. The file is read
// through a 64 KiB buffer, its CRC computed on the way; when the CRC or
// the contents are wrong the store is left empty.
func (s *Store) Restore(now time.Time) error {
	path := s.opts.SnapshotFile
	if path == "" {
		return ErrNoSnapshot
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoSnapshot
	}
	if err != nil {
		return fmt.Errorf("read history snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read history snapshot: %w", err)
	}
	if err := s.restore(f, fi.Size(), now.UnixMilli()-s.opts.Retention.Milliseconds()); err != nil {
		return fmt.Errorf("read history snapshot %s: %w (delete the file to start with an empty history)", path, err)
	}
	return nil
}

// restore reads a snapshot of size bytes from f. On any error the store
// is emptied again.
func (s *Store) restore(f io.ReaderAt, size int64, mint int64) error {
	if size < int64(len(snapshotMagic))+4 {
		return errors.New("not a kvwatch history snapshot")
	}
	body := size - 4
	sum := crc32.New(castagnoli)
	r := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, 0, body), sum), snapshotBufSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.restoreLocked(r, body, mint)
	s.rawArena.endRestore()
	s.coarseArena.endRestore()
	if errors.Is(err, errNotSnapshot) || errors.Is(err, errNewerVersion) {
		return err
	}
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
	if err != nil {
		s.resetLocked()
	}
	return err
}

var (
	errNotSnapshot  = errors.New("not a kvwatch history snapshot")
	errNewerVersion = errors.New("written by a newer kvwatch")
)

// resetLocked empties the store (after a failed restore).
func (s *Store) resetLocked() {
	clear(s.series)
	clear(s.byName)
	s.gen = 0
	s.rawArena.reset()
	s.coarseArena.reset()
}

func (s *Store) restoreLocked(r *bufio.Reader, size int64, mint int64) error {
	magic := snapshotMagic[:len(snapshotMagic)-1]
	head := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head[:len(magic)], magic) {
		return errNotSnapshot
	}
	version := head[len(magic)]
	if version != 1 && version != 2 {
		return fmt.Errorf("unknown snapshot version %d (%w)", version, errNewerVersion)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	var b labels.ScratchBuilder
	var scratch []byte
	for range n {
		nl, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		b.Reset()
		for range nl {
			name, err := getString(r)
			if err != nil {
				return err
			}
			val, err := getString(r)
			if err != nil {
				return err
			}
			b.Add(name, val)
		}
		b.Sort()
		lset := b.Labels()
		if _, dup := s.lookupLocked(lset); dup {
			return fmt.Errorf("series %s appears twice", lset)
		}
		ms := newSeries(lset, &s.rawArena, &s.coarseArena)
		if version == 1 {
			// Version 1 kept no type; kvwatch's counters end in _total.
			ms.counter = strings.HasSuffix(lset.Get(model.MetricNameLabel), "_total")
			if err := readChunks(r, size, mint, ms, &ms.raw, &scratch); err != nil {
				return err
			}
		} else {
			if err := readSeriesV2(r, size, mint, ms, &scratch); err != nil {
				return err
			}
		}
		if ms.lastT != minInt64 {
			s.addLocked(ms)
		}
	}
	return nil
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
		ms.lastT = pt
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
		ms.lastT = cmaxt
	}
	return nil
}

func putFloat(w snapWriter, v float64) {
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

func putUvarint(w snapWriter, v uint64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutUvarint(b[:], v)])
}

func putVarint(w snapWriter, v int64) {
	var b [binary.MaxVarintLen64]byte
	w.Write(b[:binary.PutVarint(b[:], v)])
}

func putString(w snapWriter, s string) {
	putUvarint(w, uint64(len(s)))
	w.WriteString(s)
}

func getString(r *bufio.Reader) (string, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if l > 1<<16 {
		return "", errors.New("label longer than 64KiB")
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
