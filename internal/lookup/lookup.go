// Package lookup finds an element by key in a list that grows by appends
// and is usually short: a linear search while it is, a map from key to
// place once it has more than a given number of elements. The scrape path
// keeps such lists (DP groups, cache pools and their fields) for every
// page: a map per list was a large part of what a scrape allocated, and a
// linear search alone would be quadratic on a page of thousands. It owns
// nothing: callers hold the list and its map.
package lookup

// Place returns the place in list of the element whose key is k, or -1: a
// linear search while by is nil, else by's answer (see Appended).
func Place[T any, K comparable](list []T, by map[K]int, k K, key func(*T) K) int {
	if by != nil {
		if i, ok := by[k]; ok {
			return i
		}
		return -1
	}
	for i := range list {
		if key(&list[i]) == k {
			return i
		}
	}
	return -1
}

// Appended returns list's map after its last element was appended: by
// with that element added, a new map of the whole list once it holds more
// than linear elements, and nil before that.
func Appended[T any, K comparable](list []T, by map[K]int, key func(*T) K, linear int) map[K]int {
	n := len(list)
	switch {
	case by != nil:
		by[key(&list[n-1])] = n - 1
	case n > linear:
		by = make(map[K]int, 2*n)
		for i := range list {
			by[key(&list[i])] = i
		}
	}
	return by
}

// Self is the key of a list whose elements are their own keys.
func Self[K any](k *K) K { return *k }
