package engine

import (
	"slices"
	"testing"
)

// The engines whose names use a colon, written out by hand: expo folds
// their underscore form and no other. lmcache has colon names too (the
// in-process set) but is left out: the multi-process server writes
// lmcache_mp_* names that folding would rename.
func TestColonPrefixes(t *testing.T) {
	want := []string{"llamacpp", "lmdeploy", "sglang", "vllm"}
	if got := NewRegistry().ColonPrefixes(); !slices.Equal(got, want) {
		t.Errorf("ColonPrefixes = %v, want %v", got, want)
	}
}
