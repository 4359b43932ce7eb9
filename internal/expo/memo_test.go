package expo

import (
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestMemoized: a function of a shared label set runs once per label set
// and key, however many pages and goroutines ask; samples of a label set
// built for one page alone (no Parser) compute every time; two keys on
// one label set keep their own results.
func TestMemoized(t *testing.T) {
	body := []byte("sglang:x{tp_rank=\"0\"} 1\nsglang:x{tp_rank=\"1\"} 2\n")
	want := func(n string) bool { return n == "sglang:x" }
	rankKey, lenKey := new(MemoKey), new(MemoKey)
	var mu sync.Mutex
	calls := map[string]int{}
	rank := func(s Sample) string {
		return Memoized(s, rankKey, func(l labels.Labels) string {
			mu.Lock()
			calls[l.Get("tp_rank")]++
			mu.Unlock()
			return l.Get("tp_rank")
		})
	}
	size := func(s Sample) int { return Memoized(s, lenKey, func(l labels.Labels) int { return l.Len() }) }

	pr := NewParser("sglang")
	if _, err := pr.Parse(body, "", want); err != nil { // fills the shared cache
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				p, err := pr.Parse(body, "", want)
				if err != nil {
					t.Error(err)
					return
				}
				for i, s := range p.Samples("sglang:x") {
					if got := rank(s); got != []string{"0", "1"}[i] {
						t.Errorf("sample %d: rank %q", i, got)
					}
					if got := size(s); got != 2 {
						t.Errorf("sample %d: %d labels", i, got)
					}
				}
				pr.Release(p)
			}
		})
	}
	wg.Wait()
	// Concurrent first calls may each compute once before one stores.
	for r, n := range calls {
		if n < 1 || n > 8 {
			t.Errorf("rank %s computed %d times for 400 pages, want once (at most once per goroutine racing the first store)", r, n)
		}
	}
	clear(calls)
	p, err := Parse(body, "", want) // no Parser: nothing shared
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for _, s := range p.Samples("sglang:x") {
			rank(s)
		}
	}
	if calls["0"] != 3 || calls["1"] != 3 {
		t.Errorf("unshared label sets: computed %v, want 3 times each", calls)
	}
}
