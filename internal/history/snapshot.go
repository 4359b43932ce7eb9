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

// WriteSnapshot writes every series to path atomically (a temporary file
// renamed over path). The format is the magic, then per series its labels,
// a flags byte (counter, pending sample, previous counter value), the
// downsampler's pending sample and previous value when flagged, and the
// coarse then the full-resolution tier's chunks (time range and bytes),
// all length-prefixed, then a CRC32 (Castagnoli) of everything before it.
func (s *Store) WriteSnapshot(path string) error {
	var buf bytes.Buffer
	buf.Write(snapshotMagic)
	s.mu.RLock()
	list := s.sortedSeriesLocked()
	putUvarint(&buf, uint64(len(list)))
	for _, ms := range list {
		putUvarint(&buf, uint64(ms.lset.Len()))
		ms.lset.Range(func(l labels.Label) {
			putString(&buf, l.Name)
			putString(&buf, l.Value)
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
		buf.WriteByte(flags)
		if ms.ds.pending {
			putVarint(&buf, ms.ds.t)
			putFloat(&buf, ms.ds.v)
		}
		if ms.ds.hasPrev {
			putFloat(&buf, ms.ds.prev)
		}
		putChunks(&buf, ms.coarse.view(nil, minInt64, maxInt64))
		putChunks(&buf, ms.raw.view(nil, minInt64, maxInt64))
	}
	s.mu.RUnlock()
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(buf.Bytes(), castagnoli))
	buf.Write(sum[:])

	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write history snapshot: %w (check that the directory of history.snapshot_file exists and is writable)", err)
	}
	tmp := f.Name()
	_, err = f.Write(buf.Bytes())
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

func putChunks(buf *bytes.Buffer, chunks []chunk) {
	putUvarint(buf, uint64(len(chunks)))
	for _, c := range chunks {
		putVarint(buf, c.mint)
		putVarint(buf, c.maxt)
		b := c.b
		putUvarint(buf, uint64(len(b)))
		buf.Write(b)
	}
}

const (
	minInt64 = -1 << 63
	maxInt64 = 1<<63 - 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Restore reads the snapshot file into an empty store, keeping only chunks
// that still hold samples inside the retention window before now. It
// returns ErrNoSnapshot when the file does not exist.
func (s *Store) Restore(now time.Time) error {
	path := s.opts.SnapshotFile
	if path == "" {
		return ErrNoSnapshot
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNoSnapshot
	}
	if err != nil {
		return fmt.Errorf("read history snapshot: %w", err)
	}
	if err := s.restore(data, now.UnixMilli()-s.opts.Retention.Milliseconds()); err != nil {
		return fmt.Errorf("read history snapshot %s: %w (delete the file to start with an empty history)", path, err)
	}
	return nil
}

func (s *Store) restore(data []byte, mint int64) error {
	magic := snapshotMagic[:len(snapshotMagic)-1]
	if len(data) < len(snapshotMagic)+4 || !bytes.Equal(data[:len(magic)], magic) {
		return errors.New("not a kvwatch history snapshot")
	}
	version := data[len(magic)]
	if version != 1 && version != 2 {
		return fmt.Errorf("unknown snapshot version %d (written by a newer kvwatch)", version)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return errors.New("checksum mismatch: the file is truncated or corrupt")
	}
	r := bufio.NewReader(bytes.NewReader(body[len(snapshotMagic):]))
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
			ms.counter = strings.HasSuffix(lset.Get(labels.MetricName), "_total")
			if err := readChunks(r, len(body), mint, ms, &ms.raw, &scratch); err != nil {
				return err
			}
		} else {
			if err := readSeriesV2(r, len(body), mint, ms, &scratch); err != nil {
				return err
			}
		}
		if ms.lastT != minInt64 {
			s.addLocked(ms)
		}
	}
	return nil
}

func readSeriesV2(r *bufio.Reader, size int, mint int64, ms *memSeries, scratch *[]byte) error {
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
func readChunks(r *bufio.Reader, size int, mint int64, ms *memSeries, tr *tier, scratch *[]byte) error {
	nc, err := binary.ReadUvarint(r)
	if err != nil {
		return err
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
		c := chunk{b: cb, mint: cmint, maxt: cmaxt}
		if first, _ := binary.Varint(cb[min(2, l):]); l < 3 || c.numSamples() == 0 || first != cmint {
			return fmt.Errorf("series %s has a chunk whose samples do not match its time range", ms.lset)
		}
		if cmint <= ms.lastT || cmaxt < cmint {
			return fmt.Errorf("series %s has overlapping chunks", ms.lset)
		}
		c.b = tr.arena.copy(cb)
		tr.closed = append(tr.closed, c)
		ms.lastT = cmaxt
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
	if l > 1<<16 {
		return "", errors.New("label longer than 64KiB")
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
