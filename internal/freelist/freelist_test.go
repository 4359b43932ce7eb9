package freelist

import (
	"bytes"
	"runtime"
	"testing"
)

// TestList: buffers come back, the last put first, until the budget is
// full; they survive garbage collections; an empty list says so.
func TestList(t *testing.T) {
	f := List[*bytes.Buffer]{Budget: 10 << 10, Size: (*bytes.Buffer).Cap}
	if _, ok := f.Get(); ok {
		t.Fatal("an empty list returned a buffer")
	}
	var kept []*bytes.Buffer
	for range 4 {
		b := bytes.NewBuffer(make([]byte, 0, 4<<10))
		kept = append(kept, b)
		f.Put(b)
	}
	if f.Bytes() != 8<<10 {
		t.Errorf("the list counts %d bytes, want 8 KiB (two 4 KiB buffers within 10 KiB)", f.Bytes())
	}
	runtime.GC()
	runtime.GC()
	var got []*bytes.Buffer
	for {
		b, ok := f.Get()
		if !ok {
			break
		}
		got = append(got, b)
	}
	if len(got) != 2 || got[0] != kept[1] || got[1] != kept[0] {
		t.Errorf("got %d buffers back after two collections, want the first 2 of 4, the last put first", len(got))
	}
	if f.Bytes() != 0 {
		t.Errorf("an emptied list counts %d bytes", f.Bytes())
	}
}
