package kv

import (
	"fmt"
	"testing"
)

// TestMultiDP: MultiDP says what len(DPGroups()) > 1 says, without
// building the groups.
func TestMultiDP(t *testing.T) {
	r := func(dp, tp string) Rank { return Rank{RankID: RankID{DP: dp, TP: tp}, Signals: Signals{Used: Of(1)}} }
	tests := []struct {
		name  string
		ranks []Rank
		want  bool
	}{
		{"no ranks", nil, false},
		{"one unlabelled", []Rank{{Signals: Signals{Used: Of(1)}}}, false},
		{"TP only", []Rank{r("", "0"), r("", "1"), r("", "2")}, false},
		{"TP with the unlabelled tokenizer entry", []Rank{{}, r("", "0"), r("", "1")}, false},
		{"one DP rank, TP ranks", []Rank{r("0", "0"), r("0", "1")}, false},
		{"two DP ranks", []Rank{r("0", "0"), r("1", "0")}, true},
		{"two DP ranks and the unlabelled entry", []Rank{{}, r("0", ""), r("1", "")}, true},
		{"a DP rank and TP ranks without DP", []Rank{r("", "0"), r("1", "0")}, true},
	}
	for _, tt := range tests {
		s := Server{Ranks: tt.ranks}
		if got, groups := s.MultiDP(), len(s.DPGroups()); got != tt.want || got != (groups > 1) {
			t.Errorf("%s: MultiDP = %v with %d DP groups, want %v", tt.name, got, groups, tt.want)
		}
	}
}

// TestDPGroupsMany: past the groups found without a map, each DP group
// still collapses its TP ranks by max, in the order first seen, and the
// unlabelled entry stays out of the groups.
func TestDPGroupsMany(t *testing.T) {
	var s Server
	const n = 40
	for tp := range 2 {
		for dp := range n {
			s.Ranks = append(s.Ranks, Rank{RankID: RankID{DP: fmt.Sprint(dp), TP: fmt.Sprint(tp)},
				Signals: Signals{Used: Of(float64(100*dp + 10*tp)), Capacity: Of(1000)}})
		}
	}
	s.Ranks = append(s.Ranks, Rank{Signals: Signals{Running: Of(7)}}) // the tokenizer's entry
	groups := s.DPGroups()
	if len(groups) != n {
		t.Fatalf("%d groups, want %d", len(groups), n)
	}
	for dp, g := range groups {
		if want := float64(100*dp + 10); g.Used.V != want || g.Running.OK() {
			t.Errorf("group %d: used %v running %v, want used %g (the larger TP rank's) and no running", dp, g.Used, g.Running, want)
		}
	}
}
