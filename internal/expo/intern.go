package expo

import (
	"sync"

	"github.com/prometheus/prometheus/model/labels"
)

// internCache shares what Parse builds from a page's text between pages:
// a fleet's servers of one model expose the same series with the same
// labels scrape after scrape, so a label set is built once and then found
// by its series text, without allocating. Values depend only on the key
// text, so a hit returns exactly what building would. The cache stops
// growing at maxInterned entries (about 2 MB of series text and label sets
// at kvwatch's sizes); later names are built every time, as without it.
type internCache[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

// maxInterned bounds each cache: 8,192 series are about 40 differently
// labelled SGLang TP=8 servers' kept series.
const maxInterned = 8192

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
	if len(c.m) < maxInterned {
		c.m[string(key)] = v
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
