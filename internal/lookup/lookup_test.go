package lookup

import (
	"strconv"
	"testing"
)

// TestPlaceAcrossTheThreshold: elements are found where they were
// appended, before and after the list gets its map, and a missing key is
// -1 on both sides; the map appears only past the linear bound.
func TestPlaceAcrossTheThreshold(t *testing.T) {
	const linear = 4
	type item struct{ name string }
	key := func(it *item) string { return it.name }
	var (
		list []item
		by   map[string]int
	)
	for i := range 10 {
		if Place(list, by, "missing", key) != -1 {
			t.Fatalf("with %d elements, a missing key was found", len(list))
		}
		list = append(list, item{"k" + strconv.Itoa(i)})
		by = Appended(list, by, key, linear)
		if (by != nil) != (len(list) > linear) {
			t.Fatalf("with %d elements the map is %v, want one past %d", len(list), by != nil, linear)
		}
		for j := range list {
			if got := Place(list, by, "k"+strconv.Itoa(j), key); got != j {
				t.Fatalf("with %d elements, k%d found at %d", len(list), j, got)
			}
		}
	}
	dps := []string{"0", "1", "3"}
	if Place(dps, nil, "3", Self[string]) != 2 || Place(dps, nil, "2", Self[string]) != -1 {
		t.Error("Self: a list of keys is not searched by its elements")
	}
}
