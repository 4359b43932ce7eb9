package expo

import (
	"bytes"
	"strconv"
	"testing"
)

// A full cache is emptied and refilled, and says so: before, it stopped
// growing, so label sets met later were never shared, the first ones stayed
// pinned for good, and nothing told.
func TestInternCacheResetsWhenFull(t *testing.T) {
	var c internCache[string]
	key := func(i int) []byte { return []byte("sglang:num_running_reqs{tp_rank=\"" + strconv.Itoa(i) + "\"}") }
	for i := range maxInterned + 10 {
		c.put(string(key(i)), string(key(i)))
	}
	entries, size, resets := c.stats()
	if entries != 10 || resets != 1 || size != 10*(2*len(key(maxInterned))+64) {
		t.Fatalf("after %d keys: %d entries, %d bytes, %d resets; want 10 entries (the ones after the reset), 1 reset", maxInterned+10, entries, size, resets)
	}
	if _, ok := c.get(key(0)); ok {
		t.Error("the first key is still pinned after the reset")
	}
	if v, ok := c.get(key(maxInterned + 9)); !ok || v != string(key(maxInterned+9)) {
		t.Errorf("the newest key = %q, %v; want it shared", v, ok)
	}

	var big internCache[int]
	huge := bytes.Repeat([]byte("x"), maxInternedBytes)
	big.put(string(huge), 1)
	if _, ok := big.get(huge); ok || big.bytes != 0 {
		t.Errorf("a %d-byte key was kept (cache bytes %d); want it refused", len(huge), big.bytes)
	}
}

// Each Parser has caches of its own; the package's Parse shares nothing.
func TestParserOwnsItsCaches(t *testing.T) {
	body := []byte("# TYPE sglang_num_running_reqs gauge\nsglang_num_running_reqs{tp_rank=\"0\"} 1\n")
	a, b := NewParser(), NewParser()
	if _, err := a.Parse(body, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(body, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats(); got.Series != 1 || got.Types != 1 || got.Resets != 0 {
		t.Errorf("parser a: %+v; want 1 series, 1 type", got)
	}
	if got := b.Stats(); got != (InternStats{}) {
		t.Errorf("parser b, unused: %+v; want empty", got)
	}
}

func TestParseSameSeriesOnLaterPages(t *testing.T) {
	// The second page has the first's series text with other values, plus
	// a label set the cache has not seen; both must be read from the page.
	want := wantNames("sglang:num_running_reqs")
	pages := []string{
		"sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 1\n",
		"sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 7\nsglang:num_running_reqs{model_name=\"m\",tp_rank=\"1\"} 8\n",
	}
	wantVals := [][]float64{{1}, {7, 8}}
	pr := NewParser()
	for i, body := range pages {
		p, err := pr.Parse([]byte(body), "", want)
		if err != nil {
			t.Fatal(err)
		}
		got := values(p, "sglang:num_running_reqs")
		if len(got) != len(wantVals[i]) {
			t.Fatalf("page %d: values = %v, want %v", i, got, wantVals[i])
		}
		for j, v := range got {
			if v != wantVals[i][j] {
				t.Errorf("page %d: values = %v, want %v", i, got, wantVals[i])
			}
		}
		if tp := p.Samples("sglang:num_running_reqs")[len(got)-1].Labels.Get("tp_rank"); tp != strconv.Itoa(len(got)-1) {
			t.Errorf("page %d: last sample's tp_rank = %q, want %q", i, tp, strconv.Itoa(len(got)-1))
		}
	}
}
