package expo

import (
	"sync"

	"github.com/prometheus/prometheus/model/labels"
)

// internCache shares what Parse builds from a page's text between pages:
// a fleet's servers of one model expose the same series with the same
// labels scrape after scrape, so a label set is built once and then found
// by its series text, without allocating. Values depend only on the key
// text, so a hit returns exactly what building would. A cache stops
// growing at maxInterned entries or maxInternedBytes of keys and values,
// whichever comes first; later keys are built every time, as without it.
type internCache[V any] struct {
	mu    sync.RWMutex
	m     map[string]V
	bytes int
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

func (c *internCache[V]) put(key []byte, v V) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	if size := 2*len(key) + 64; len(c.m) < maxInterned && c.bytes+size <= maxInternedBytes {
		if _, ok := c.m[string(key)]; !ok {
			c.m[string(key)] = v
			c.bytes += size
		}
	}
	c.mu.Unlock()
}

// internedSeries is a simple text-format series' label set and canonical
// sample name (a substring of the set, or of Canonical's result).
type internedSeries struct {
	labels labels.Labels
	name   string
}

var (
	// seriesCache maps the text of a simple series (see simpleSeries) to
	// what Parse makes of it.
	seriesCache internCache[internedSeries]
	// typeNames maps a TYPE line's family name to its canonical form.
	typeNames internCache[string]
)

// canonicalTypeName returns Canonical(string(name)), shared between pages.
func canonicalTypeName(name []byte) string {
	if c, ok := typeNames.get(name); ok {
		return c
	}
	c := Canonical(string(name))
	typeNames.put(name, c)
	return c
}
