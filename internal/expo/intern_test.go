package expo

import (
	"bytes"
	"strconv"
	"testing"
)

func TestInternCacheStopsGrowing(t *testing.T) {
	var c internCache[string]
	for i := range 2 * maxInterned {
		k := "sglang:num_running_reqs{tp_rank=\"" + strconv.Itoa(i) + "\"}"
		c.put([]byte(k), k)
	}
	if len(c.m) > maxInterned || c.bytes > maxInternedBytes {
		t.Fatalf("cache holds %d entries, %d bytes; want at most %d, %d", len(c.m), c.bytes, maxInterned, maxInternedBytes)
	}
	k := []byte("sglang:num_running_reqs{tp_rank=\"0\"}")
	if v, ok := c.get(k); !ok || v != string(k) {
		t.Errorf("get(%s) = %q, %v; want the value put first", k, v, ok)
	}
	if _, ok := c.get([]byte("sglang:num_running_reqs{tp_rank=\"" + strconv.Itoa(2*maxInterned-1) + "\"}")); ok {
		t.Errorf("the cache kept a key past its bound")
	}

	var big internCache[int]
	huge := bytes.Repeat([]byte("x"), maxInternedBytes)
	big.put(huge, 1)
	if _, ok := big.get(huge); ok || big.bytes != 0 {
		t.Errorf("a %d-byte key was kept (cache bytes %d); want it refused", len(huge), big.bytes)
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
	for i, body := range pages {
		p, err := Parse([]byte(body), "", want)
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
