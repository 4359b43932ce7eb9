// Package history keeps kvwatch's normalized kvwatch_* series in memory for
// a bounded window, so that serve can answer PromQL (range queries, rates,
// predict_linear) and evaluate alert rules without a Prometheus. The most
// recent part of the window (FullResolution) keeps every sample; older
// data is downsampled to one sample per DownsampleStep (the newest of the
// step, plus the samples around counter resets and staleness markers), so
// a 24h window costs a fraction of what it would at scrape resolution.
// Samples are Gorilla (XOR) encoded in chunks of 240; a retention cut drops
// whole chunks. The store implements
// storage.Queryable for the promql engine, and can be written to and read
// from a snapshot file so that a restart keeps the window.
//
// It is not a TSDB: no WAL, no compaction into blocks, no on-disk index, no
// histograms, no out-of-order samples. Long-term storage is Prometheus's job.
package history

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/expo"
)

// Gatherer yields the metric families to record; prometheus.Gatherer
// satisfies it.
type Gatherer interface {
	Gather() ([]*dto.MetricFamily, error)
}

// The tiers' defaults: serve's --history.full-resolution and
// --history.downsample-step, and Options' zero values.
const (
	DefaultFullResolution = time.Hour
	DefaultDownsampleStep = time.Minute
)

// Options configure a Store.
type Options struct {
	// Retention is the window kept, e.g. 6h. 0: the config's default
	// history.retention.
	Retention time.Duration
	// FullResolution is how much of the newest data keeps every sample
	// (up to one chunk more). Older data is downsampled to DownsampleStep.
	// 0: DefaultFullResolution; a value >= Retention keeps the whole window
	// at scrape resolution.
	FullResolution time.Duration
	// DownsampleStep is the resolution of data older than FullResolution.
	// 0: DefaultDownsampleStep.
	DownsampleStep time.Duration
	// Interval is how often Run gathers. Default 15s.
	Interval time.Duration
	// SnapshotFile, when set, is read by Restore and written by Run every
	// SnapshotInterval (0: the config's default history.snapshot_interval)
	// and when Run returns.
	SnapshotFile     string
	SnapshotInterval time.Duration
	// MaxSeries bounds the series of the store, MaxSeriesPerTarget those
	// of one target (the value of their server label); past a limit,
	// stale series are dropped to make room and new ones refused (see
	// limits.go). 0: no limit. serve takes them from the config
	// (history.max_series, history.max_series_per_target).
	MaxSeries, MaxSeriesPerTarget int
	// Logger receives errors of gathering and snapshots, and the warnings
	// of the series limits. Default: discard.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	d := config.Default().History
	if o.Retention <= 0 {
		o.Retention = time.Duration(d.Retention)
	}
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.FullResolution <= 0 {
		o.FullResolution = DefaultFullResolution
	}
	if o.DownsampleStep <= 0 {
		o.DownsampleStep = DefaultDownsampleStep
	}
	if o.SnapshotInterval <= 0 {
		o.SnapshotInterval = time.Duration(d.SnapshotInterval)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Store is the in-memory history. It is safe for concurrent use.
type Store struct {
	opts Options

	mu     sync.RWMutex
	series map[uint64][]*memSeries
	byName map[string][]*memSeries
	// gen counts gathers (Begin, AppendFamilies); a series' gen is the
	// last gather that had it, so those of the previous gather missing
	// from the next one get a staleness marker.
	gen uint32
	// lastGather is the (aligned) timestamp of the previous AppendFamilies.
	lastGather int64
	// recent are the series the Batch.Add calls of the latest gather went
	// to, in call order; spare is the slice before it, for reuse. A gather
	// usually makes the same calls in the same order as the one before it:
	// the next Batch takes call i's series from recent[i] when its labels are
	// those of the call (see Batch.Add), and only looks up the others.
	recent, spare []*memSeries
	// noRecent turns that off: every call looks its series up (tests).
	noRecent bool
	// reused counts the calls that took their series from recent.
	reused uint64
	// sweep holds every series of the store, each with the earliest time
	// a sweep can change it (see sweepDue), so that a sweep touches only
	// those. sweepAll makes sweeps visit every series and look at every
	// series' gen for staleness, as they did before sweep (tests).
	sweep    []sweepSlot
	sweepAll bool
	// seen is the Batch's reused bitmap of the places of recent that its
	// calls went to.
	seen    []uint64
	dropped int64
	// targets are the series counts and stale series of each target (the
	// server label's value), stale those of every target, for the series
	// limits; evicted and refused count what the limits did, by limit,
	// and warn lists the targets with a warning to log.
	targets          map[string]*targetSeries
	stale            staleQueue
	evicted, refused [numLimits]int64
	warn             []*targetSeries
	// rawArena and coarseArena hold the closed chunks of each tier, and
	// slabs accounts for their memory.
	rawArena, coarseArena arena
	slabs                 *slabStats
	// reset tells Run that its intervals changed (Reconfigure).
	reset chan struct{}
	// locking says the store holds the lock of its snapshot file (lock,
	// nil when it has none) and moves it with the file (LockSnapshot).
	locking bool
	lock    *snapshotLock
}

// New returns an empty store.
func New(opts Options) *Store {
	opts = opts.withDefaults()
	slabs := &slabStats{log: opts.Logger}
	return &Store{
		opts:        opts,
		series:      map[uint64][]*memSeries{},
		byName:      map[string][]*memSeries{},
		targets:     map[string]*targetSeries{},
		slabs:       slabs,
		rawArena:    newArena(slabs),
		coarseArena: newArena(slabs),
		reset:       make(chan struct{}, 1),
	}
}

// Retention returns the window the store keeps.
func (s *Store) Retention() time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.opts.Retention
}

// Interval returns how often Run gathers.
func (s *Store) Interval() time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.opts.Interval
}

// Settings are the options a running store may change (a config reload).
type Settings struct {
	Retention                     time.Duration
	Interval                      time.Duration
	SnapshotFile                  string
	SnapshotInterval              time.Duration
	MaxSeries, MaxSeriesPerTarget int
}

// Settings returns the store's current settings.
func (s *Store) Settings() Settings {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Settings{Retention: s.opts.Retention, Interval: s.opts.Interval,
		SnapshotFile: s.opts.SnapshotFile, SnapshotInterval: s.opts.SnapshotInterval,
		MaxSeries: s.opts.MaxSeries, MaxSeriesPerTarget: s.opts.MaxSeriesPerTarget}
}

// CheckSettings says what is wrong with n, naming the config key.
func CheckSettings(n Settings) error {
	switch {
	case n.Retention <= 0:
		return fmt.Errorf("history.retention %s: a running history cannot be turned off; restart serve without history", n.Retention)
	case n.Interval <= 0:
		return fmt.Errorf("global.scrape_interval %s is not positive", n.Interval)
	case n.SnapshotFile != "" && n.SnapshotInterval <= 0:
		return fmt.Errorf("history.snapshot_interval %s is not positive", n.SnapshotInterval)
	case n.MaxSeries < 0:
		return fmt.Errorf("history.max_series %d is negative; write 0 for no limit", n.MaxSeries)
	case n.MaxSeriesPerTarget < 0:
		return fmt.Errorf("history.max_series_per_target %d is negative; write 0 for no limit", n.MaxSeriesPerTarget)
	}
	return nil
}

// Reconfigure changes the running store's settings: a shorter retention
// drops what falls out of it at the next sweep, a longer one keeps more
// from now on; Run gathers at the new interval and writes the snapshot
// file it names from now on (the next write; Restore is only at start).
// New series meet the new series limits; a lower limit drops stale series
// as new ones come, never live ones. A store that holds the lock of its
// snapshot file (LockSnapshot) takes the new file's first: when another
// process holds it, nothing changes and the error wraps ErrSnapshotInUse.
func (s *Store) Reconfigure(n Settings) error {
	if err := CheckSettings(n); err != nil {
		return err
	}
	s.mu.Lock()
	if s.locking {
		if err := s.relockLocked(n.SnapshotFile); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.opts.Retention, s.opts.Interval = n.Retention, n.Interval
	s.opts.SnapshotFile, s.opts.SnapshotInterval = n.SnapshotFile, n.SnapshotInterval
	s.opts.MaxSeries, s.opts.MaxSeriesPerTarget = n.MaxSeries, n.MaxSeriesPerTarget
	for i := range s.sweep { // the due times depend on the retention
		s.sweep[i].due = s.sweepDue(s.sweep[i].ms)
	}
	s.mu.Unlock()
	select {
	case s.reset <- struct{}{}:
	default: // Run resets already
	}
	return nil
}

// trimSteps is how many downsampling steps older than the window the
// coarse tier may keep before its oldest chunk is re-encoded without them;
// rawTrimSteps is the same for the full-resolution tier and its window.
// Re-encoding a chunk every trimSteps steps per series costs little CPU;
// keeping whole chunks would cost up to 4h of coarse and 20m of raw data.
const (
	trimSteps    = 30
	rawTrimSteps = 5
)

// downsamples reports whether data older than FullResolution is
// downsampled at all.
func (s *Store) downsamples() bool {
	return s.opts.FullResolution < s.opts.Retention && s.opts.DownsampleStep > 0
}

// getOrCreate returns the series with labels lset, or nil when it is new
// and a series limit refuses it. Callers hold s.mu.
func (s *Store) getOrCreate(lset labels.Labels) *memSeries {
	if ms, ok := s.lookupLocked(lset); ok {
		return ms
	}
	if !s.admitLocked(lset) {
		return nil
	}
	return s.createLocked(lset)
}

// createLocked adds an empty series with labels lset, which it keeps;
// admitLocked has let it in.
func (s *Store) createLocked(lset labels.Labels) *memSeries {
	ms := newSeries(lset, &s.rawArena, &s.coarseArena)
	s.addLocked(ms)
	return ms
}

// lookupLocked returns the series with labels lset, if any.
func (s *Store) lookupLocked(lset labels.Labels) (*memSeries, bool) {
	for _, ms := range s.series[lset.Hash()] {
		if labels.Equal(ms.lset, lset) {
			return ms, true
		}
	}
	return nil, false
}

// addLocked indexes a new series; the next sweep visits it.
func (s *Store) addLocked(ms *memSeries) {
	h := ms.lset.Hash()
	s.series[h] = append(s.series[h], ms)
	name := ms.lset.Get(model.MetricNameLabel)
	s.byName[name] = append(s.byName[name], ms)
	ms.slot = uint32(len(s.sweep))
	s.sweep = append(s.sweep, sweepSlot{ms: ms, due: math.MinInt64})
	s.targetLocked(ms.lset).n++
}

// removeLocked drops ms from the store (it is empty); the last sweep slot
// takes its place.
func (s *Store) removeLocked(ms *memSeries) {
	s.forgetLocked(ms)
	removeFrom(s.series, ms.lset.Hash(), ms)
	removeFrom(s.byName, ms.lset.Get(model.MetricNameLabel), ms)
	i, last := ms.slot, len(s.sweep)-1
	s.sweep[i] = s.sweep[last]
	s.sweep[i].ms.slot = i
	s.sweep[last] = sweepSlot{}
	s.sweep = s.sweep[:last]
	ms.removed = true // for Batch.Add: it may still be in s.recent
}

// Append adds one sample at t (milliseconds since the epoch). A sample not
// newer than the series' last one is dropped and Append reports false, as
// it does for a new series that a series limit refuses. Recording rules
// use it; value.StaleNaN marks a series as ended.
func (s *Store) Append(lset labels.Labels, t int64, v float64) bool {
	s.mu.Lock()
	ok := false
	if ms := s.getOrCreate(lset); ms != nil {
		ok = s.appendLocked(ms, t, v)
	}
	warns := s.takeWarningsLocked()
	s.mu.Unlock()
	s.logLimits(warns)
	return ok
}

func (s *Store) appendLocked(ms *memSeries, t int64, v float64) bool {
	if !ms.append(t, v) {
		s.dropped++
		return false
	}
	if value.IsStaleNaN(v) {
		s.staleLocked(ms, t)
	}
	if s.downsampleLocked(ms, t) || ms.raw.hmint == t {
		// Data moved down, or the sample started a head chunk: the
		// series may be due sooner than its slot says (sweepDue).
		s.sweep[ms.slot].due = math.MinInt64
	}
	return true
}

// downsampleLocked moves ms's full-resolution chunks that ended more than
// FullResolution before now into the coarse tier, and reports whether it
// changed ms. Callers hold s.mu.
func (s *Store) downsampleLocked(ms *memSeries, now int64) bool {
	if !s.downsamples() {
		return false
	}
	changed := false
	boundary := now - s.opts.FullResolution.Milliseconds()
	slack := rawTrimSteps * s.opts.DownsampleStep.Milliseconds()
	if ms.raw.open() && ms.raw.hmaxt < boundary && len(ms.raw.closed) == 0 {
		// An idle series (it ended, or is no longer gathered) moves down
		// too instead of keeping up to a chunk at full resolution.
		ms.raw.closeHead()
		changed = true
	}
	if len(ms.raw.closed) > 0 && ms.raw.closed[0].mint <= boundary-slack {
		ms.downsample(boundary, s.opts.DownsampleStep.Milliseconds(), slack)
		changed = true
	}
	return changed
}

// sweepSlot is a series and the earliest time a sweep can change it.
type sweepSlot struct {
	ms  *memSeries
	due int64
}

// sweepDue returns the earliest now at which sweepLocked can change ms:
// each condition of downsampleLocked and memSeries.truncate on ms as it
// is, solved for now. Appending a sample only makes each later (the head
// chunk's end moves on), except a sample that starts a head chunk or
// makes appendLocked downsample: those set the slot's due to now.
func (s *Store) sweepDue(ms *memSeries) int64 {
	ret := s.opts.Retention.Milliseconds()
	trimSlack := trimSteps * s.opts.DownsampleStep.Milliseconds()
	due := int64(math.MaxInt64) // a sum that overflows is early: safe
	// truncate: a tier's oldest chunk (the head when no chunk is closed)
	// ends before now-Retention, the coarse tier's starts trimSlack
	// before it (tier.trim), the pending sample is before it.
	if mint, maxt, ok := ms.coarse.oldest(); ok {
		due = min(due, maxt+ret+1, mint+trimSlack+ret)
	}
	if ms.ds.pending {
		due = min(due, ms.ds.t+ret+1)
	}
	if _, maxt, ok := ms.raw.oldest(); ok {
		due = min(due, maxt+ret+1)
	}
	if s.downsamples() {
		fr := s.opts.FullResolution.Milliseconds()
		slack := rawTrimSteps * s.opts.DownsampleStep.Milliseconds()
		switch {
		case len(ms.raw.closed) > 0: // downsampled once slack before the boundary
			due = min(due, ms.raw.closed[0].mint+fr+slack)
		case ms.raw.open(): // an idle head is closed once before it
			due = min(due, ms.raw.hmaxt+fr+1)
		}
	}
	return due
}

// AppendFamilies records every gauge, counter and untyped sample of mfs at
// t, and a staleness marker for each series of the previous call that is
// missing now (a target went down, a value became unavailable), so PromQL
// stops returning it at once instead of after the 5m lookback. Histograms
// and summaries are skipped: kvwatch exports none.
//
// Like Prometheus' scrape timestamp tolerance, t is moved onto the previous
// gather's timestamp plus Interval when it is within 1% of the interval
// (at most 50ms) of it: a timestamp delta that repeats costs 1 bit in the
// XOR encoding instead of 16 or more.
func (s *Store) AppendFamilies(t time.Time, mfs []*dto.MetricFamily) {
	b := s.Begin(t)
	defer b.Commit()
	expo.Gathered(mfs, func(name string, counter bool, v float64, pairs []string) { b.Add(name, counter, v, pairs...) })
}

// Batch records one gather's samples, all at the same timestamp, without
// building metric families first (see Feeder). It holds the Store's lock
// from Begin to Commit.
type Batch struct {
	s       *Store
	ts      int64
	prev    uint32
	b       labels.ScratchBuilder
	scratch labels.Labels
	// at is where in s.recent the next call is expected; next collects
	// this gather's series, the next gather's recent.
	at   int
	next []*memSeries
	have []labels.Label // sameLabels' scratch
}

// Begin starts recording a gather at t (aligned like AppendFamilies).
// Commit must follow.
func (s *Store) Begin(t time.Time) *Batch {
	s.mu.Lock()
	b := &Batch{s: s, ts: s.align(t.UnixMilli()), prev: s.gen, next: s.spare[:0]}
	if n := (len(s.recent) + 63) / 64; cap(s.seen) < n {
		s.seen = make([]uint64, n)
	} else {
		s.seen = s.seen[:n]
		clear(s.seen)
	}
	s.gen++
	if s.gen == 0 { // wrapped (after 680 years at 5s): 0 means never
		s.gen = 1
	}
	return b
}

// Add records one sample of the metric name with the label pairs (name,
// value, name, value...; empty values are left out, in any order); counter
// says the series is a counter.
//
// The series is the one the previous gather's call at the same place went
// to (s.recent[b.at]) when that series is still in the store and has
// exactly the labels this call would build (sameLabels): no labels are
// built, sorted, hashed or looked up then. Otherwise Add looks the series
// up (or creates it) and, when the previous gather had that series at
// another place, goes on from there: a series inserted or missing in the
// middle costs one lookup, not one per call after it. A new series that a
// series limit refuses is not recorded (see limits.go).
func (b *Batch) Add(name string, counter bool, v float64, pairs ...string) {
	s := b.s
	var ms *memSeries
	if b.at < len(s.recent) {
		if r := s.recent[b.at]; !r.removed && b.sameLabels(r.lset, name, pairs) {
			ms = r
			s.reused++
			s.seen[b.at/64] |= 1 << (b.at % 64)
		}
	}
	if ms == nil {
		if ms = b.lookup(name, pairs); ms == nil {
			return // refused: b.at stays, for the next call's series
		}
		if i := int(ms.recent); i < len(s.recent) && s.recent[i] == ms {
			b.at = i
			s.seen[i/64] |= 1 << (i % 64)
		}
	}
	b.at++
	if !s.noRecent {
		ms.recent = uint32(len(b.next)) // wraps past 4G calls: a wrong hint
		b.next = append(b.next, ms)
	}
	ms.counter = counter
	s.appendLocked(ms, b.ts, v)
	ms.gen = s.gen
}

// lookup returns the series of name and pairs as Add builds its labels,
// creating it when it is new, or nil when a series limit refuses it.
func (b *Batch) lookup(name string, pairs []string) *memSeries {
	b.b.Reset()
	b.b.Add(model.MetricNameLabel, name)
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			b.b.Add(pairs[i], pairs[i+1])
		}
	}
	b.b.Sort()
	// Look up with reused label bytes; only a new series keeps a copy.
	b.b.Overwrite(&b.scratch)
	if ms, ok := b.s.lookupLocked(b.scratch); ok {
		return ms
	}
	if !b.s.admitLocked(b.scratch) {
		return nil
	}
	return b.s.createLocked(b.b.Labels())
}

// sameLabels reports whether ls are the labels Add builds from name and
// pairs: __name__=name and each pair with a value, sorted by name. It
// holds when every one of those labels is in ls, each at a place of its
// own (the first label of its name in ls), and ls has no others. A label
// name twice in pairs, or twice in ls, is never the same then: the
// lookup decides. Series of more than 64 labels are always looked up.
func (b *Batch) sameLabels(ls labels.Labels, name string, pairs []string) bool {
	have := b.have[:0]
	ls.Range(func(l labels.Label) { have = append(have, l) })
	b.have = have
	if len(have) > 64 {
		return false
	}
	var used uint64
	// take marks the first label of ls named ln if its value is lv and it
	// is not taken yet.
	take := func(ln, lv string) bool {
		for j := range have {
			if have[j].Name == ln {
				if have[j].Value != lv || used&(1<<j) != 0 {
					return false
				}
				used |= 1 << j
				return true
			}
		}
		return false
	}
	if !take(model.MetricNameLabel, name) {
		return false
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" && !take(pairs[i], pairs[i+1]) {
			return false
		}
	}
	return used == 1<<len(have)-1
}

// Commit ends the gather: series of the previous gather that this one did
// not have get a staleness marker, and the window moves on.
func (b *Batch) Commit() {
	s := b.s
	s.sweepLocked(b.ts, b.prev)
	// The previous gather's slice is reused; cleared, it keeps no series
	// alive that the store no longer has.
	clear(s.recent)
	s.recent, s.spare = b.next, s.recent[:0]
	b.next = nil
	warns := s.takeWarningsLocked()
	s.mu.Unlock()
	s.logLimits(warns)
}

// Feeder writes a gather's samples straight into a Batch; Run uses it
// instead of Gather when its Gatherer is one too (serve's exporter is:
// it saves building a metric family per series every interval).
type Feeder interface {
	Feed(*Batch)
}

// align snaps ts onto the grid of the previous gather; callers hold s.mu.
func (s *Store) align(ts int64) int64 {
	iv := s.opts.Interval.Milliseconds()
	tol := min(iv/100, 50)
	if s.lastGather != 0 {
		if want := s.lastGather + iv; ts != want && ts >= want-tol && ts <= want+tol {
			ts = want
		}
	}
	s.lastGather = ts
	return ts
}

// Truncate drops samples older than the retention window before now and
// downsamples those older than the full-resolution window (also for series
// that no longer receive samples).
func (s *Store) Truncate(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now.UnixMilli(), 0)
}

// sweepLocked gives the series that gather stale (not 0) had but the
// latest did not a staleness marker at now, then downsamples and
// truncates every series that is due (the others it would not change),
// dropping those left empty.
func (s *Store) sweepLocked(now int64, stale uint32) {
	if stale != 0 {
		s.markStaleLocked(now, stale)
	}
	mint := now - s.opts.Retention.Milliseconds()
	slack := trimSteps * s.opts.DownsampleStep.Milliseconds()
	for i := 0; i < len(s.sweep); {
		sl := &s.sweep[i]
		if now < sl.due && !s.sweepAll {
			i++
			continue
		}
		ms := sl.ms
		s.downsampleLocked(ms, now)
		if ms.truncate(mint, slack) {
			s.removeLocked(ms) // the last slot moves to i
			continue
		}
		sl.due = s.sweepDue(ms)
		i++
	}
}

// markStaleLocked appends a staleness marker at now to each series of
// gather stale that the latest gather did not have. Those are the series
// of s.recent (the previous gather's calls) whose places no call of the
// latest went to (s.seen) and whose gen is still stale; a series at two
// places is marked at the last (memSeries.recent).
func (s *Store) markStaleLocked(now int64, stale uint32) {
	marker := math.Float64frombits(value.StaleNaN)
	if s.noRecent || s.sweepAll {
		for i := range s.sweep {
			if ms := s.sweep[i].ms; ms.gen == stale {
				s.appendLocked(ms, now, marker)
			}
		}
		return
	}
	for w, bits := range s.seen {
		if bits == math.MaxUint64 {
			continue
		}
		for i := w * 64; i < min(w*64+64, len(s.recent)); i++ {
			if bits&(1<<(i%64)) != 0 {
				continue
			}
			if ms := s.recent[i]; !ms.removed && int(ms.recent) == i && ms.gen == stale {
				s.appendLocked(ms, now, marker)
			}
		}
	}
}

// removeFrom drops ms from the list of index m under k, and the list when
// it is left empty.
func removeFrom[K comparable](m map[K][]*memSeries, k K, ms *memSeries) {
	list := m[k]
	if i := slices.Index(list, ms); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(m, k)
	} else {
		m[k] = list
	}
}

// Stats describe what the store holds.
type Stats struct {
	Series  int `json:"series"`
	Samples int `json:"samples"`
	// ChunkBytes is the encoded size of all samples, in bytes.
	ChunkBytes int `json:"chunk_bytes"`
	// RawSamples and RawChunkBytes are the full-resolution tier's share of
	// Samples and ChunkBytes, CoarseSamples and CoarseChunkBytes the
	// downsampled tier's (a pending sample counts as 16 bytes).
	RawSamples       int `json:"raw_samples"`
	RawChunkBytes    int `json:"raw_chunk_bytes"`
	CoarseSamples    int `json:"coarse_samples"`
	CoarseChunkBytes int `json:"coarse_chunk_bytes"`
	// Dropped counts samples refused as out of order or duplicate.
	Dropped int64 `json:"dropped_samples"`
	// SeriesEvicted counts stale series dropped to make room for new ones
	// under a series limit, SeriesRefused new series not recorded because
	// a limit was reached (each time one came), by limit.
	SeriesEvicted LimitCounts `json:"series_evicted"`
	SeriesRefused LimitCounts `json:"series_refused"`
	// OffHeapBytes is the memory this store's closed chunks take outside
	// the Go heap: resident memory is about this plus the Go runtime's own.
	OffHeapBytes int64 `json:"off_heap_bytes"`
	// UnmapFailures counts slabs the operating system refused to unmap
	// (logged; their memory stays mapped).
	UnmapFailures int64 `json:"unmap_failures"`
}

// Stats returns the store's size.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Dropped: s.dropped, OffHeapBytes: s.slabs.offHeap.Load(), UnmapFailures: s.slabs.unmapFailures.Load(),
		SeriesEvicted: limitCounts(s.evicted), SeriesRefused: limitCounts(s.refused)}
	for _, list := range s.series {
		for _, ms := range list {
			st.Series++
			rs, cs := ms.samples()
			rb, cb := ms.bytes()
			st.RawSamples += rs
			st.CoarseSamples += cs
			st.RawChunkBytes += rb
			st.CoarseChunkBytes += cb
		}
	}
	st.Samples = st.RawSamples + st.CoarseSamples
	st.ChunkBytes = st.RawChunkBytes + st.CoarseChunkBytes
	return st
}

// Run gathers g every Interval into the store until ctx ends, writing the
// snapshot file (when set) every SnapshotInterval and once more before
// returning. It returns the error of that last snapshot write, if any.
func (s *Store) Run(ctx context.Context, g Gatherer) error {
	s.gatherOnce(g)
	for {
		n := s.Settings()
		tick := time.NewTicker(n.Interval)
		var snap <-chan time.Time
		var st *time.Ticker
		if n.SnapshotFile != "" {
			st = time.NewTicker(n.SnapshotInterval)
			snap = st.C
		}
		reset := false
		for !reset {
			select {
			case <-ctx.Done():
				tick.Stop()
				if st != nil {
					st.Stop()
				}
				if n = s.Settings(); n.SnapshotFile == "" {
					return nil
				}
				return s.WriteSnapshot(n.SnapshotFile)
			case <-tick.C:
				s.gatherOnce(g)
			case <-snap:
				if err := s.WriteSnapshot(n.SnapshotFile); err != nil {
					s.opts.Logger.Error("history snapshot", "err", err)
				}
			case <-s.reset:
				reset = true
			}
		}
		tick.Stop()
		if st != nil {
			st.Stop()
		}
	}
}

func (s *Store) gatherOnce(g Gatherer) {
	if f, ok := g.(Feeder); ok {
		b := s.Begin(s.opts.Now())
		defer b.Commit()
		f.Feed(b)
		return
	}
	mfs, err := g.Gather()
	if err != nil {
		// A partial gather still holds every family that worked.
		s.opts.Logger.Warn("history gather", "err", err)
	}
	s.AppendFamilies(s.opts.Now(), mfs)
}

// sortedSeries returns the series in label order (for snapshots and tests).
func (s *Store) sortedSeriesLocked() []*memSeries {
	var out []*memSeries
	for _, list := range s.series {
		out = append(out, list...)
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	return out
}
