package expo

import (
	"slices"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// internCache shares what a Parser builds from a page's text between the
// pages it reads: a fleet's servers of one model expose the same series
// with the same labels scrape after scrape, so a label set is built once
// and then found by its series text, without allocating. Values depend
// only on the key text, so a hit returns exactly what building would. A
// cache holds at most maxInterned entries and maxInternedBytes of keys and
// values; when a new key would not fit, it is emptied and starts again
// (counted in resets), so that churning label sets get their turn and
// stale ones are not pinned for good.
type internCache[V any] struct {
	mu     sync.RWMutex
	m      map[string]V
	bytes  int
	resets uint64
}

// maxInterned bounds each cache's entries: 8,192 series are about 40
// differently labelled SGLang TP=8 servers' kept series.
const maxInterned = 8192

// maxInternedBytes bounds each cache's size, estimated as twice the key
// text plus 64 bytes an entry, so that pages with huge label values cannot
// pin much memory.
const maxInternedBytes = 2 << 20

func (c *internCache[V]) get(key []byte) (V, bool) {
	c.mu.RLock()
	v, ok := c.m[string(key)]
	c.mu.RUnlock()
	return v, ok
}

// put adds key (kept as given: a value may share it) and v.
func (c *internCache[V]) put(key string, v V) {
	size := 2*len(key) + 64
	if size > maxInternedBytes {
		return // would never fit: built every time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	if c.m == nil || len(c.m) >= maxInterned || c.bytes+size > maxInternedBytes {
		if c.m != nil {
			c.resets++
		}
		c.m, c.bytes = map[string]V{}, 0
	}
	c.m[key] = v
	c.bytes += size
}

func (c *internCache[V]) stats() (entries, bytes int, resets uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m), c.bytes, c.resets
}

// internedSeries is a simple text-format series' label set and canonical
// sample name (a substring of the set, or of Canonical's result), shared
// by the pages that have the series: with what Memoized keeps of it, and
// its text, the series cache's key for it, which a Layout checks a line's
// series against.
type internedSeries struct {
	text   string
	labels labels.Labels
	name   string
	shape  LabelShape
	key    uint64
	memo   seriesMemo
}

// LabelShape is what label limits are checked against, of one label set
// or, on a Page, the largest of its samples' (the metric name label
// aside): the number of labels, and the longest label name and value in
// bytes. A Parser keeps it with the label sets it shares, so a page's
// shape costs no walk over labels already seen.
type LabelShape struct {
	Labels, MaxName, MaxValue int
}

// shapeOf measures lset.
func shapeOf(lset labels.Labels) LabelShape {
	var sh LabelShape
	lset.Range(func(lb labels.Label) {
		if lb.Name == model.MetricNameLabel {
			return
		}
		sh.Labels++
		sh.MaxName = max(sh.MaxName, len(lb.Name))
		sh.MaxValue = max(sh.MaxValue, len(lb.Value))
	})
	return sh
}

// keyOf is lset's hash without the metric name label (see
// Sample.SeriesKey).
func keyOf(lset labels.Labels) uint64 {
	var buf [256]byte
	h, _ := lset.HashWithoutLabels(buf[:0], model.MetricNameLabel)
	return h
}

// widen makes s cover o too.
func (s *LabelShape) widen(o LabelShape) {
	s.Labels = max(s.Labels, o.Labels)
	s.MaxName = max(s.MaxName, o.MaxName)
	s.MaxValue = max(s.MaxValue, o.MaxValue)
}

// Parser reads pages like Parse and shares the label sets and family names
// it builds between the pages it reads. Its caches belong to it (one per
// scraper), not to the process. It is safe for concurrent use.
type Parser struct {
	// colon are the prefixes Canonical folds (see NewParser).
	colon []string
	// series maps the text of a simple series (see simpleSeries) to what
	// Parse makes of it.
	series internCache[*internedSeries]
	// types maps a TYPE line's family name to its canonical form.
	types internCache[string]
	// pages are pages handed back with Release, for Parse to reuse.
	pages sync.Pool
	// shapes are the page structures its Layouts share.
	shapes shapeCache
}

// maxPooledSamples is the largest sample array a released page keeps:
// kvwatch keeps a few hundred samples of a page.
const maxPooledSamples = 1 << 14

// newPage returns an empty page, reusing a released one's maps and array.
func (p *Parser) newPage() *Page {
	if p != nil {
		if pg, ok := p.pages.Get().(*Page); ok {
			return pg
		}
	}
	return &Page{types: map[string]model.MetricType{}, samples: map[string][]Sample{}}
}

// Release hands back a page that its caller no longer uses, so that Parse
// reuses its maps and sample array for a later page (a scrape's page is
// dropped once its adapter has read it). Neither pg nor any slice from its
// Samples may be used after Release. Label sets and strings taken from it
// stay valid: they are not reused. A nil Parser or page does nothing.
func (p *Parser) Release(pg *Page) {
	if p == nil || pg == nil {
		return
	}
	clear(pg.all) // drops the label sets' references
	if cap(pg.all) > maxPooledSamples {
		pg.all = nil
	}
	pg.all = pg.all[:0]
	clear(pg.types)
	clear(pg.samples)
	pg.Families, pg.Example, pg.shape, pg.Escaped, pg.Mixed = 0, nil, LabelShape{}, false, false
	p.pages.Put(pg)
}

// NewParser returns a Parser with empty caches that folds the given
// prefixes' underscore form into their colon form (see Canonical). expo
// knows no engine: the engine registry says which prefixes these are
// (engine.Registry.ColonPrefixes).
func NewParser(colonPrefixes ...string) *Parser {
	return &Parser{colon: slices.Clone(colonPrefixes)}
}

// InternStats describe a Parser's caches.
type InternStats struct {
	// Series and Types are the entries held; Bytes their estimated size.
	Series, Types, Bytes int
	// Resets counts the times a full cache was emptied to make room: a
	// steadily growing count means label sets churn faster than they are
	// reused.
	Resets uint64
}

// Stats returns the state of p's caches.
func (p *Parser) Stats() InternStats {
	se, sb, sr := p.series.stats()
	te, tb, tr := p.types.stats()
	return InternStats{Series: se, Types: te, Bytes: sb + tb, Resets: sr + tr}
}

// canonicalTypeName returns p.Canonical(string(name)), shared between the
// pages of p (nil: not shared).
func (p *Parser) canonicalTypeName(name []byte) string {
	if p == nil {
		return string(name)
	}
	if c, ok := p.types.get(name); ok {
		return c
	}
	c := p.Canonical(string(name))
	p.types.put(string(name), c)
	return c
}
