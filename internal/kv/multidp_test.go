package kv

import "testing"

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
