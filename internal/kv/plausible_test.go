package kv

import (
	"math"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		s    Server
		// reasons wanted, in order; none for a plausible server.
		reasons []string
		// implausible lists the signals that must be Implausible.
		implausible []string
		headroom    bool // headroom of 1 token known afterwards
	}{
		{name: "plausible", s: Server{Signals: Signals{Capacity: Of(1000), Used: Of(1000), UsageRatio: Of(1)}},
			headroom: true},
		{name: "rounding above capacity is fine",
			s:        Server{Signals: Signals{Capacity: Of(1000), Used: Of(1001)}},
			headroom: true},
		{name: "negative capacity and used: not a plausible 5%",
			s:           Server{Signals: Signals{Capacity: Of(-100000), Used: Of(-5000), UsageRatio: DerivedOf(0.05)}},
			reasons:     []string{WarnNegative, WarnNegative},
			implausible: []string{"capacity", "used", "usage ratio"}},
		{name: "a usage ratio above 1 read directly",
			s:           Server{Signals: Signals{UsageRatio: Of(1.42)}},
			reasons:     []string{WarnOverCapacity},
			implausible: []string{"usage ratio"}},
		{name: "negative used overstates headroom: none",
			s:           Server{Signals: Signals{Capacity: Of(1000), Used: Of(-500)}},
			reasons:     []string{WarnNegative},
			implausible: []string{"used"}},
		{name: "used above capacity",
			s:           Server{Signals: Signals{Capacity: Of(1000), Used: Of(1500), UsageRatio: DerivedOf(1.5)}},
			reasons:     []string{WarnOverCapacity},
			implausible: []string{"used", "usage ratio"}},
		{name: "capacity beyond 2^53",
			s:           Server{Signals: Signals{Capacity: Of(1e30), Used: Of(0)}},
			reasons:     []string{WarnTooLarge},
			implausible: []string{"capacity"}},
		{name: "negative queue",
			s:           Server{Signals: Signals{Capacity: Of(10), Used: Of(1), Queued: Queues{Waiting: Of(-3)}}},
			reasons:     []string{WarnNegative},
			implausible: []string{"waiting queue"}, headroom: true},
		{name: "a flagged rank flags the total built from it",
			s: func() Server {
				s := Server{Ranks: []Rank{
					{RankID{DP: "0"}, Signals{Capacity: Of(1000), Used: Of(-5000)}},
					{RankID{DP: "1"}, Signals{Capacity: Of(1000), Used: Of(9000)}},
				}}
				s.Rollup() // used sums to a plausible-looking 4,000 of 2,000
				return s
			}(),
			// dp0's negative used, dp1's used beyond its capacity; the
			// ratios and the total follow without warnings of their own.
			reasons:     []string{WarnNegative, WarnOverCapacity},
			implausible: []string{"used", "usage ratio"}},
		{name: "demand above 1 is not implausible",
			s:        Server{Signals: Signals{Capacity: Of(1000), Used: Of(10), DemandRatio: Of(17.6)}},
			headroom: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			s.Check()
			var got []string
			for _, w := range s.Warnings {
				got = append(got, w.Reason)
				if w.Detail == "" {
					t.Errorf("warning %s without detail", w.Reason)
				}
			}
			if len(got) != len(tt.reasons) {
				t.Fatalf("warnings %v (%+v), want %v", got, s.Warnings, tt.reasons)
			}
			for i := range got {
				if got[i] != tt.reasons[i] {
					t.Errorf("warning %d = %s, want %s", i, got[i], tt.reasons[i])
				}
			}
			want := map[string]bool{}
			for _, n := range tt.implausible {
				want[n] = true
			}
			for j, v := range fieldsOf(&s.Signals) {
				if is := v.Prov == Implausible; is != want[fieldNames[j]] {
					t.Errorf("%s: implausible %v, want %v (%+v)", fieldNames[j], is, want[fieldNames[j]], *v)
				}
			}
			if h := s.Headroom(1); h.OK() != tt.headroom {
				t.Errorf("headroom %+v, want known %v", h, tt.headroom)
			}
		})
	}
}

func TestNumNeverOverflows(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{1e30, "1e+30"}, {-1e30, "-1e+30"}, {-100000, "-100000"}, {math.MaxInt64, "9.22337e+18"}, {0.5, "0.5"}} {
		if got := num(c.v); got != c.want {
			t.Errorf("num(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestCheckRankWords: a rank's warning says which rank, in the words
// written by hand here.
func TestCheckRankWords(t *testing.T) {
	s := Server{Ranks: []Rank{
		{RankID{DP: "1", TP: "3"}, Signals{Capacity: Of(1000), Used: Of(-5)}},
		{RankID{TP: "2", PP: "1"}, Signals{Capacity: Of(1000), Used: Of(1500)}},
	}}
	s.Check()
	var got []string
	for _, w := range s.Warnings {
		got = append(got, w.Detail)
	}
	want := []string{"used is -5 on dp1 tp3", "used 1500 tokens above a capacity of 1000 on tp2 pp1"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("warnings %q, want %q", got, want)
	}
}

// TestCheckPlausibleAllocatesNothing: the words naming a rank are written
// only for a warning, so checking a plausible TP=8 server allocates nothing.
func TestCheckPlausibleAllocatesNothing(t *testing.T) {
	s := Server{}
	for _, tp := range []string{"0", "1", "2", "3", "4", "5", "6", "7"} {
		s.Ranks = append(s.Ranks, Rank{RankID{DP: "0", TP: tp}, Signals{Capacity: Of(1000), Used: Of(10)}})
	}
	s.Rollup()
	if n := testing.AllocsPerRun(100, s.Check); n != 0 {
		t.Errorf("Check allocates %v times per call, want 0", n)
	}
}
