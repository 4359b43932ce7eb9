package kv

import (
	"fmt"
	"reflect"
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

// TestGroupsBuffer: groups built in a caller's buffer (left dirty by an
// earlier use) are the groups DPGroups allocates, for fewer DP groups
// than the buffer holds, as many, and more; the filler is the unlabelled
// entry's.
func TestGroupsBuffer(t *testing.T) {
	for _, n := range []int{1, groupsBuf, groupsBuf + 1} {
		var s Server
		for dp := range n {
			for tp := range 2 {
				s.Ranks = append(s.Ranks, Rank{RankID: RankID{DP: fmt.Sprint(dp), TP: fmt.Sprint(tp)},
					Signals: Signals{Used: Of(float64(10*dp + tp)), Capacity: Of(100)}})
			}
		}
		s.Ranks = append(s.Ranks, Rank{Signals: Signals{Running: Of(7)}})
		var buf [groupsBuf]Signals
		for i := range buf {
			buf[i] = Signals{Running: Of(99), Evictable: Of(99)}
		}
		got, filler, hasFiller := s.groups(buf[:0])
		if want := s.DPGroups(); !reflect.DeepEqual(got, want) {
			t.Errorf("%d DP groups: in a buffer %+v, want %+v", n, got, want)
		}
		for dp, g := range got {
			if want := Of(float64(10*dp + 1)); g.Used != want || g.Running.OK() || g.Evictable.OK() {
				t.Errorf("%d DP groups: group %d used %v running %v evictable %v, want used %v only", n, dp, g.Used, g.Running, g.Evictable, want)
			}
		}
		if !hasFiller || filler.Running != Of(7) {
			t.Errorf("%d DP groups: filler %v (%+v), want running 7", n, hasFiller, filler)
		}
	}
}

// TestRollupHeadroomAllocateNothing: rolling up a TP=8 server (with the
// tokenizer's unlabelled entry) and its headroom need no heap: the DP
// groups live on the caller's stack.
func TestRollupHeadroomAllocateNothing(t *testing.T) {
	s := Server{Ranks: []Rank{{Signals: Signals{Counters: Counters{PromptTokens: Of(5)}}}}}
	for tp := range 8 {
		s.Ranks = append(s.Ranks, Rank{RankID: RankID{TP: fmt.Sprint(7 - tp)}, Signals: Signals{Used: Of(10), Capacity: Of(1000)}})
	}
	if n := testing.AllocsPerRun(100, func() { s.Rollup(); s.Headroom(100) }); n != 0 {
		t.Errorf("Rollup and Headroom allocate %v times per call, want 0", n)
	}
	if h := s.Headroom(100); h != (Value{V: 9, Prov: Derived}) {
		t.Errorf("Headroom(100) = %+v, want 9 derived", h)
	}
}
