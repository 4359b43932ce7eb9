package scrape

import (
	"bytes"
	"runtime"
	"testing"
)

// TestFreeList: buffers come back until the budget is full, survive
// garbage collections, and an empty list says so.
func TestFreeList(t *testing.T) {
	f := freeList[*bytes.Buffer]{budget: 10 << 10, size: (*bytes.Buffer).Cap}
	if _, ok := f.get(); ok {
		t.Fatal("an empty list returned a buffer")
	}
	var kept []*bytes.Buffer
	for range 4 {
		b := bytes.NewBuffer(make([]byte, 0, 4<<10))
		kept = append(kept, b)
		f.put(b)
	}
	runtime.GC()
	runtime.GC()
	// 4 KiB each within 10 KiB: the first two are kept, the others dropped.
	got := map[*bytes.Buffer]bool{}
	for {
		b, ok := f.get()
		if !ok {
			break
		}
		got[b] = true
	}
	if len(got) != 2 || !got[kept[0]] || !got[kept[1]] {
		t.Errorf("got %d buffers back after two collections, want the first 2 of 4 (budget 10 KiB)", len(got))
	}
	if f.bytes != 0 {
		t.Errorf("an emptied list counts %d bytes", f.bytes)
	}
}
