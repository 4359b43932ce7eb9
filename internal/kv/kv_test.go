package kv

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var valueCmp = cmp.Comparer(func(a, b Value) bool {
	if a.Prov != b.Prov {
		return false
	}
	return !a.OK() || math.Abs(a.V-b.V) <= 1e-9*math.Max(1, math.Abs(a.V))
})

func TestOfNonFinite(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, mk := range []func(float64) Value{Of, DerivedOf, ReservedOf} {
			if got := mk(v); got.OK() {
				t.Errorf("value of %v = %+v, want unavailable", v, got)
			}
		}
	}
	if got := Of(0); !got.OK() || got.V != 0 || got.Prov != Direct {
		t.Errorf("Of(0) = %+v, want a known direct 0", got)
	}
}

func TestValueJSON(t *testing.T) {
	tests := []struct {
		in   Value
		want string
	}{
		{Value{}, `{"value":null,"provenance":"unavailable"}`},
		{Of(0), `{"value":0,"provenance":"direct"}`},
		{DerivedOf(0.5), `{"value":0.5,"provenance":"derived"}`},
		{ReservedOf(20480), `{"value":20480,"provenance":"reserved"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("json.Marshal(%+v) = %s, want %s", tt.in, b, tt.want)
		}
		var back Value
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(tt.in, back, valueCmp) {
			t.Errorf("round trip of %s = %+v, want %+v", b, back, tt.in)
		}
	}
}

func TestRatesBetween(t *testing.T) {
	prev := Counters{PrefixHitTokens: Of(100), PrefixQueryTokens: Of(400), Preemptions: Of(5),
		PromptTokens: Of(1000), GenerationTokens: Of(2000)}
	tests := []struct {
		name string
		prev *Counters // nil: prev
		cur  Counters
		dt   time.Duration
		want Rates
	}{
		{
			name: "steady",
			cur: Counters{PrefixHitTokens: Of(160), PrefixQueryTokens: Of(500), Preemptions: Of(7),
				PromptTokens: Of(1500), GenerationTokens: Of(2600)},
			dt: 10 * time.Second,
			// 60 of 100 queried tokens hit; 2, 500 and 600 over 10 s.
			want: Rates{PrefixHitRatio: DerivedOf(0.6), PreemptionsPerSec: DerivedOf(0.2),
				PromptTokensPS: DerivedOf(50), GenTokensPS: DerivedOf(60)},
		},
		{
			name: "engine restarted: no rate over the restart, never negative",
			cur: Counters{PrefixHitTokens: Of(10), PrefixQueryTokens: Of(40), Preemptions: Of(1),
				PromptTokens: Of(200), GenerationTokens: Of(300)},
			dt:   10 * time.Second,
			want: Rates{Reset: true},
		},
		{
			// 995,000 counted as the increase would be 497,500 tok/s.
			name: "prompt tokens went back by 5,000: that rate unavailable, the others kept",
			prev: &Counters{PrefixHitTokens: Of(100), PrefixQueryTokens: Of(400), Preemptions: Of(5),
				PromptTokens: Of(1e6), GenerationTokens: Of(2000)},
			cur: Counters{PrefixHitTokens: Of(160), PrefixQueryTokens: Of(500), Preemptions: Of(5),
				PromptTokens: Of(995000), GenerationTokens: Of(2100)},
			dt: 2 * time.Second,
			want: Rates{PrefixHitRatio: DerivedOf(0.6), PreemptionsPerSec: DerivedOf(0),
				GenTokensPS: DerivedOf(50), Reset: true},
		},
		{
			name: "hit tokens went back: no hit ratio",
			cur: Counters{PrefixHitTokens: Of(90), PrefixQueryTokens: Of(500), Preemptions: Of(5),
				PromptTokens: Of(1000), GenerationTokens: Of(2000)},
			dt: 10 * time.Second,
			want: Rates{PreemptionsPerSec: DerivedOf(0), PromptTokensPS: DerivedOf(0),
				GenTokensPS: DerivedOf(0), Reset: true},
		},
		{
			name: "no traffic: hit ratio unknown, rates 0",
			cur:  prev,
			dt:   5 * time.Second,
			want: Rates{PreemptionsPerSec: DerivedOf(0), PromptTokensPS: DerivedOf(0), GenTokensPS: DerivedOf(0)},
		},
		{
			name: "counter appears: no rate yet",
			prev: &Counters{},
			cur:  Counters{Preemptions: Of(3)},
			dt:   5 * time.Second,
			want: Rates{},
		},
		{
			name: "no window",
			cur:  prev,
			dt:   0,
			want: Rates{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prev
			if tt.prev != nil {
				p = *tt.prev
			}
			got := RatesBetween(p, tt.cur, tt.dt)
			for _, c := range []struct {
				name      string
				got, want Value
			}{
				{"PrefixHitRatio", got.PrefixHitRatio, tt.want.PrefixHitRatio},
				{"PreemptionsPerSec", got.PreemptionsPerSec, tt.want.PreemptionsPerSec},
				{"PromptTokensPS", got.PromptTokensPS, tt.want.PromptTokensPS},
				{"GenTokensPS", got.GenTokensPS, tt.want.GenTokensPS},
			} {
				if !cmp.Equal(c.got, c.want, valueCmp) {
					t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
				}
			}
			if got.Reset != tt.want.Reset {
				t.Errorf("Reset = %v, want %v", got.Reset, tt.want.Reset)
			}
		})
	}
}

func TestRollup(t *testing.T) {
	tests := []struct {
		name  string
		ranks []Rank
		want  Signals
		// spread is the wanted usage spread over DP ranks.
		spread Value
	}{
		{
			name: "TP duplicates collapsed, DP summed, ratio from the sums",
			ranks: []Rank{
				{RankID{DP: "0", TP: "0"}, Signals{Capacity: Of(1000), Used: Of(100), Running: Of(2)}},
				{RankID{DP: "0", TP: "1"}, Signals{Capacity: Of(1000), Used: Of(100), Running: Of(2)}},
				{RankID{DP: "1", TP: "0"}, Signals{Capacity: Of(3000), Used: Of(2700), Running: Of(5)}},
				{RankID{DP: "1", TP: "1"}, Signals{Capacity: Of(3000), Used: Of(2700), Running: Of(5)}},
			},
			want:   Signals{Capacity: Of(4000), Used: Of(2800), UsageRatio: DerivedOf(0.7), Running: Of(7)},
			spread: DerivedOf(0.8),
		},
		{
			name: "ratios only: DP ranks weigh the same",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{UsageRatio: Of(0.2)}},
				{RankID{DP: "1"}, Signals{UsageRatio: Of(0.5)}},
			},
			want:   Signals{UsageRatio: DerivedOf(0.35)},
			spread: DerivedOf(0.3),
		},
		{
			name: "reserved ratio weighted by capacity",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{Capacity: Of(1000), ReservedRatio: ReservedOf(0.5)}},
				{RankID{DP: "1"}, Signals{Capacity: Of(3000), ReservedRatio: ReservedOf(0.1)}},
			},
			// (0.5×1000 + 0.1×3000) / 4000.
			want: Signals{Capacity: Of(4000), ReservedRatio: ReservedOf(0.2)},
		},
		{
			// The case of issue 11: used known on dp0 only.
			name: "a partial sum is not a total",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{Capacity: Of(1000), Used: Of(900)}},
				{RankID{DP: "1"}, Signals{Capacity: Of(1000)}},
			},
			// Capacity is whole; used is dp0's 900 only, partial; the
			// ratio is dp0's 0.9, partial; no spread without dp1's ratio.
			want: Signals{Capacity: Of(2000), Used: Value{V: 900, Prov: Partial},
				UsageRatio: Value{V: 0.9, Prov: Partial}},
		},
		{
			name: "nothing known on one rank: every sum partial",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{Capacity: Of(1000), Used: Of(100), Running: Of(4)}},
				{RankID{DP: "1"}, Signals{}},
			},
			want: Signals{Capacity: Value{V: 1000, Prov: Partial}, Used: Value{V: 100, Prov: Partial},
				UsageRatio: Value{V: 0.1, Prov: Partial}, Running: Value{V: 4, Prov: Partial}},
		},
		{
			name: "the unlabelled tokenizer entry fills only what no rank has",
			ranks: []Rank{
				{RankID{DP: "0", TP: "0"}, Signals{Capacity: Of(1000), Used: Of(100)}},
				{RankID{DP: "1", TP: "0"}, Signals{Capacity: Of(1000), Used: Of(300)}},
				// Prompt tokens only the tokenizer counts; its running is
				// not the ranks' (they do not report one either: kept).
				{RankID{}, Signals{Counters: Counters{PromptTokens: Of(5000)}, Capacity: Of(7)}},
			},
			want: Signals{Capacity: Of(2000), Used: Of(400), UsageRatio: DerivedOf(0.2),
				Counters: Counters{PromptTokens: Of(5000)}},
			spread: DerivedOf(0.2),
		},
		{
			name: "a spread only when every DP rank has a ratio",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{UsageRatio: Of(0.2)}},
				{RankID{DP: "1"}, Signals{UsageRatio: Of(0.6)}},
				{RankID{DP: "2"}, Signals{Running: Of(1)}},
			},
			want: Signals{UsageRatio: Value{V: 0.4, Prov: Partial}, Running: Value{V: 1, Prov: Partial}},
		},
		{
			name: "demand ratio weighted by capacity, tokens from it",
			ranks: []Rank{
				{RankID{DP: "0"}, Signals{Capacity: Of(1000), DemandRatio: Of(3)}},
				{RankID{DP: "1"}, Signals{Capacity: Of(3000), DemandRatio: Of(0.5)}},
			},
			// 3000 + 1500 tokens wanted over 4000: 1.125, above 1.
			want: Signals{Capacity: Of(4000), Demand: DerivedOf(4500), DemandRatio: DerivedOf(1.125)},
		},
		{
			name: "ratio and capacity give used",
			ranks: []Rank{
				{RankID{}, Signals{Capacity: Of(16000), UsageRatio: Of(0.25)}},
			},
			want:   Signals{Capacity: Of(16000), Used: DerivedOf(4000), UsageRatio: Of(0.25)},
			spread: DerivedOf(0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Server{Ranks: tt.ranks}
			s.Rollup()
			if diff := cmp.Diff(tt.want, s.Signals, valueCmp); diff != "" {
				t.Errorf("Rollup (-want +got):\n%s", diff)
			}
			if !cmp.Equal(s.Spread, tt.spread, valueCmp) {
				t.Errorf("Spread = %+v, want %+v", s.Spread, tt.spread)
			}
		})
	}
}

func TestHeadroom(t *testing.T) {
	one := func(capacity, used float64) *Server {
		return &Server{Signals: Signals{Capacity: Of(capacity), Used: Of(used)}}
	}
	tests := []struct {
		name string
		s    *Server
		n    int
		want Value
	}{
		{"2,581,504 tokens hold 4 requests of 524,288", one(2581504, 0), 524288, DerivedOf(4)},
		{"310,112 used of 2,581,504: 277 requests of 8192", one(2581504, 310112), 8192, DerivedOf(277)},
		{"overfull is 0, not negative", one(1000, 1200), 10, DerivedOf(0)},
		{"unknown used", &Server{Signals: Signals{Capacity: Of(1000)}}, 10, Value{}},
		{"DP ranks apart: a request cannot span them", &Server{Ranks: []Rank{
			{RankID{DP: "0"}, Signals{Capacity: Of(1000), Used: Of(500)}},
			{RankID{DP: "1"}, Signals{Capacity: Of(1000), Used: Of(500)}},
		}}, 600, DerivedOf(0)},
		{"reservations stay reservations", &Server{Signals: Signals{Capacity: Of(81920), Used: ReservedOf(20480)}}, 4096, ReservedOf(15)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Headroom(tt.n); !cmp.Equal(got, tt.want, valueCmp) {
				t.Errorf("Headroom(%d) = %+v, want %+v", tt.n, got, tt.want)
			}
		})
	}
}
