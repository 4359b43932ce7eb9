package expo

import (
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
)

// MemoKey names one function of a label set whose results Memoized keeps;
// each such function has a key of its own, made once (new(MemoKey)).
type MemoKey struct{ _ byte }

// seriesMemo holds what Memoized computed from one shared label set: a
// short list, replaced whole on each addition, so readers take no lock.
type seriesMemo struct {
	entries atomic.Pointer[[]memoEntry]
}

type memoEntry struct {
	key *MemoKey
	val any
}

// maxMemo bounds the functions memoized for one label set.
const maxMemo = 8

// Memoized returns fn(s.Labels). For a sample whose label set the Parser
// shares between pages (a series seen before), the result is computed once
// and kept with the label set under key: an adapter reads its rank labels
// from the same few hundred label sets scrape after scrape. fn must depend
// on the labels alone, and key must name fn and nothing else.
func Memoized[T any](s Sample, key *MemoKey, fn func(labels.Labels) T) T {
	m := s.memo
	if m == nil {
		return fn(s.Labels)
	}
	old := m.entries.Load()
	if old != nil {
		for _, e := range *old {
			if e.key == key {
				return e.val.(T)
			}
		}
	}
	v := fn(s.Labels)
	for {
		var next []memoEntry
		if old != nil {
			if len(*old) >= maxMemo {
				return v
			}
			next = make([]memoEntry, len(*old), len(*old)+1)
			copy(next, *old)
		}
		next = append(next, memoEntry{key, v})
		if m.entries.CompareAndSwap(old, &next) {
			return v
		}
		// Another scrape added one meanwhile: add to its list, unless it
		// is this very key.
		old = m.entries.Load()
		for _, e := range *old {
			if e.key == key {
				return v
			}
		}
	}
}
