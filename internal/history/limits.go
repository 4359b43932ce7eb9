package history

import (
	"math"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// Series limits. A target whose label values change at every scrape (label
// churn: ranks renamed, an id in a label) adds new series at every gather,
// and each keeps its samples for the whole window: 500 ranks renamed every
// scrape kept 183,000 series in a 2-minute window (about 1 GiB over the
// default hour). Options.MaxSeriesPerTarget
// bounds the series of one target (the value of their server label) and
// Options.MaxSeries those of the whole store. When a new series would go
// over a limit, series that went stale (absent from the latest gather,
// oldest first; those of a snapshot until they are gathered again) are
// dropped with their samples to make room; only when none is left is the
// new series refused. A healthy target's series are never stale, so
// another target's churn drops nothing of it. Both counts are exported
// (signal.HistorySeriesEvicted, signal.HistorySeriesRefused), and a
// warning names the target, at most once per target every limitWarnEvery.

// limitWarnEvery is how often the series-limit warning of one target is
// logged at most; what happened in between is counted in the next one.
const limitWarnEvery = 10 * time.Minute

// seriesLimit is one of the two limits, the index of its counters.
type seriesLimit int

const (
	limitPerTarget seriesLimit = iota
	limitTotal
	numLimits
)

// label is the limit's value of the limit label, its config key under
// history.
func (l seriesLimit) label() string {
	if l == limitTotal {
		return signal.LimitMaxSeries
	}
	return signal.LimitMaxSeriesPerTarget
}

// LimitCounts count series by the limit that was reached.
type LimitCounts struct {
	MaxSeries          int64 `json:"max_series"`
	MaxSeriesPerTarget int64 `json:"max_series_per_target"`
}

func limitCounts(c [numLimits]int64) LimitCounts {
	return LimitCounts{MaxSeries: c[limitTotal], MaxSeriesPerTarget: c[limitPerTarget]}
}

// staleEntry is a series that went stale at t: its newest sample then was
// a staleness marker at t, or it was restored from a snapshot with its
// newest sample at t. It still is while no sample came since (lastT ==
// t) and it is in the store.
type staleEntry struct {
	ms *memSeries
	t  int64
}

func (e staleEntry) stale() bool { return !e.ms.removed && e.ms.lastT == e.t }

// staleQueue lists series in the order they went stale, oldest first.
// Entries of series written to since, or gone, are skipped by pop and
// dropped when the queue holds more than twice the live series it
// covers.
type staleQueue struct {
	list []staleEntry
	head int
}

func (q *staleQueue) push(ms *memSeries, t int64, live int) {
	q.list = append(q.list, staleEntry{ms, t})
	if len(q.list)-q.head > 2*live+64 {
		q.compact()
	}
}

// pop returns the series that went stale first and still is, or nil.
func (q *staleQueue) pop() *memSeries {
	for q.head < len(q.list) {
		e := q.list[q.head]
		q.list[q.head] = staleEntry{}
		q.head++
		if e.stale() {
			return e.ms
		}
	}
	q.list, q.head = q.list[:0], 0
	return nil
}

// compact keeps the entries of series that are still stale, in order.
func (q *staleQueue) compact() {
	out := q.list[:0]
	for _, e := range q.list[q.head:] {
		if e.stale() {
			out = append(out, e)
		}
	}
	clear(q.list[len(out):])
	q.list, q.head = out, 0
}

// targetSeries is what the store keeps per target: its series count, its
// stale series, and what its limits did since its last warning.
type targetSeries struct {
	name  string
	n     int
	stale staleQueue
	// evicted and refused count since the last warning; limit is the
	// limit last reached and example the first new series that reached
	// it (its labels).
	evicted, refused int
	limit            seriesLimit
	example          string
	// pending says the target is in Store.warn; nextWarn is the earliest
	// time of its next warning (milliseconds).
	pending  bool
	nextWarn int64
}

// targetLocked returns the state of the target of lset (its server label;
// "" for series without one), adding it when new.
func (s *Store) targetLocked(lset labels.Labels) *targetSeries {
	return s.targetNamedLocked(lset.Get(signal.LabelServer))
}

func (s *Store) targetNamedLocked(name string) *targetSeries {
	ts := s.targets[name]
	if ts == nil {
		ts = &targetSeries{name: name, nextWarn: math.MinInt64}
		s.targets[name] = ts
	}
	return ts
}

// forgetLocked drops ms from its target's count (it leaves the store),
// and the target once it has no series and no warning due.
func (s *Store) forgetLocked(ms *memSeries) {
	name := ms.lset.Get(signal.LabelServer)
	ts := s.targets[name]
	if ts == nil {
		return
	}
	if ts.n--; ts.n <= 0 && !ts.pending {
		delete(s.targets, name)
	}
}

// staleLocked notes that ms went stale at t (its newest sample).
func (s *Store) staleLocked(ms *memSeries, t int64) {
	ts := s.targetLocked(ms.lset)
	ts.stale.push(ms, t, ts.n)
	s.stale.push(ms, t, len(s.sweep))
}

// evictLocked drops the series of q that went stale first, with its
// samples, and reports whether there was one.
func (s *Store) evictLocked(q *staleQueue) bool {
	ms := q.pop()
	if ms == nil {
		return false
	}
	// Queues may still hold the series until they are compacted: its
	// chunks go now.
	ms.raw = tier{arena: ms.raw.arena}
	ms.coarse = tier{arena: ms.coarse.arena}
	ms.ds = downsampler{}
	s.removeLocked(ms)
	return true
}

// admitLocked reports whether a new series with labels lset may be added:
// when it would go over a limit, stale series are dropped to make room
// (the target's own first, then, for the store's limit, any target's);
// when none is left, it is refused. Both are counted and noted for the
// target's warning.
func (s *Store) admitLocked(lset labels.Labels) bool {
	perTarget, total := s.opts.MaxSeriesPerTarget, s.opts.MaxSeries
	if perTarget <= 0 && total <= 0 {
		return true
	}
	name := lset.Get(signal.LabelServer)
	own := s.targets[name]
	var evicted [numLimits]int
	refused := seriesLimit(-1)
	if perTarget > 0 && name != "" && own != nil && own.n >= perTarget {
		for own.n >= perTarget && s.evictLocked(&own.stale) {
			evicted[limitPerTarget]++
		}
		if own.n >= perTarget {
			refused = limitPerTarget
		}
	}
	if refused < 0 && total > 0 && len(s.sweep) >= total {
		for len(s.sweep) >= total && ((own != nil && s.evictLocked(&own.stale)) || s.evictLocked(&s.stale)) {
			evicted[limitTotal]++
		}
		if len(s.sweep) >= total {
			refused = limitTotal
		}
	}
	if refused < 0 && evicted == [numLimits]int{} {
		return true
	}
	// The target's state may have gone with its last series: look it up
	// again.
	ts := s.targetNamedLocked(name)
	for l, n := range evicted {
		s.evicted[l] += int64(n)
		ts.evicted += n
		if n > 0 {
			ts.limit = seriesLimit(l)
		}
	}
	if refused >= 0 {
		s.refused[refused]++
		ts.refused++
		ts.limit = refused
	}
	if ts.example == "" {
		ts.example = lset.String()
	}
	if !ts.pending {
		ts.pending = true
		s.warn = append(s.warn, ts)
	}
	return refused < 0
}

// limitWarning is one target's series-limit warning.
type limitWarning struct {
	target           string
	limit            seriesLimit
	max              int
	evicted, refused int
	example          string
}

// takeWarningsLocked returns the warnings due: those of targets that
// reached a limit and were not warned about in the last limitWarnEvery.
// The others stay pending.
func (s *Store) takeWarningsLocked() []limitWarning {
	if len(s.warn) == 0 {
		return nil
	}
	now := s.opts.Now().UnixMilli()
	var out []limitWarning
	keep := s.warn[:0]
	for _, ts := range s.warn {
		if now < ts.nextWarn {
			keep = append(keep, ts)
			continue
		}
		max := s.opts.MaxSeriesPerTarget
		if ts.limit == limitTotal {
			max = s.opts.MaxSeries
		}
		out = append(out, limitWarning{target: ts.name, limit: ts.limit, max: max,
			evicted: ts.evicted, refused: ts.refused, example: ts.example})
		ts.evicted, ts.refused, ts.example = 0, 0, ""
		ts.pending, ts.nextWarn = false, now+limitWarnEvery.Milliseconds()
	}
	clear(s.warn[len(keep):])
	s.warn = keep
	return out
}

// logLimits logs the warnings; callers do not hold s.mu.
func (s *Store) logLimits(ws []limitWarning) {
	for _, w := range ws {
		target := w.target
		if target == "" {
			target = "(series without a server label)"
		}
		s.opts.Logger.Warn("history: a target reached a series limit; its stale series are dropped to make room and new series over the limit are not recorded. "+
			"A target whose label values change at every scrape (label churn) adds series without end: fix its labels, or raise the limit if its series are real",
			"target", target, "limit", "history."+w.limit.label(), "max", w.max,
			"stale_series_dropped", w.evicted, "new_series_refused", w.refused, "example", w.example,
			"next_warning_after", limitWarnEvery)
	}
}
