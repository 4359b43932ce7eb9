package kv

import (
	"math"
	"testing"
	"time"
)

var fillT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// minutes returns one sample a minute at minutes 0..n of f(minute).
func minutes(n int, f func(m int) float64) []UsedSample {
	var out []UsedSample
	for m := 0; m <= n; m++ {
		out = append(out, UsedSample{T: fillT0.Add(time.Duration(m) * time.Minute), Used: f(m)})
	}
	return out
}

func TestPoolFill(t *testing.T) {
	at := fillT0.Add(20 * time.Minute) // window (5m, 20m]: minutes 6..20
	// a fills at exactly 16 tokens/s (960 a minute); b is flat at 30,000.
	a := minutes(20, func(m int) float64 { return 10000 + 960*float64(m) })
	b := minutes(20, func(int) float64 { return 30000 })
	// flat noise: 50,000 on even minutes, 50,100 on odd ones; over minutes
	// 6..20 the deviations from the mean minute 13 pair off
	// (+350 −300 +250 ... −350) to a slope of exactly 0.
	noise := minutes(20, func(m int) float64 { return 50000 + 100*float64(m%2) })
	drain := minutes(20, func(m int) float64 { return 80000 - 600*float64(m) }) // −10 tokens/s
	// before 5m a server restarting from 0: outside the window, no jump.
	late := minutes(20, func(m int) float64 {
		if m <= 5 {
			return 0
		}
		return 40000 + 1200*float64(m) // 20 tokens/s
	})
	c := Of(100000)
	tests := []struct {
		name    string
		servers []FillServer
		state   FillState
		seconds Value
		rate    Value
		free    Value
		queue   bool
	}{
		// Σ used at 20m = (10,000 + 960 × 20) + 30,000 = 59,200; free
		// 200,000 − 59,200 = 140,800; rate 16 + 0 > floor 200,000 × 1 % /
		// 900 s = 2.22: 140,800 / 16 = 8,800 s.
		{"fill, no demand", []FillServer{{Name: "a", Samples: a, Capacity: c}, {Name: "b", Samples: b, Capacity: c}},
			FillFilling, DerivedOf(8800), DerivedOf(16), DerivedOf(140800), false},
		// Demand 20,000 + 8,000: free 112,800; 112,800 / 16 = 7,050 s.
		{"fill with demand", []FillServer{{Name: "a", Samples: a, Capacity: c, Demand: Of(20000)}, {Name: "b", Samples: b, Capacity: c, Demand: Of(8000)}},
			FillFilling, DerivedOf(7050), DerivedOf(16), DerivedOf(112800), false},
		// Only a reports demand: 140,800 − 20,000 = 120,800 free at most;
		// 120,800 / 16 = 7,550 s, partial (b's demand is unknown).
		{"demand partly reported", []FillServer{{Name: "a", Samples: a, Capacity: c, Demand: Of(20000)}, {Name: "b", Samples: b, Capacity: c}},
			FillFilling, Value{V: 7550, Prov: Partial}, DerivedOf(16), Value{V: 120800, Prov: Partial}, false},
		// Slope exactly 0, floor 1.11: not filling; free 100,000 − 50,000.
		{"flat noise", []FillServer{{Name: "n", Samples: noise, Capacity: c}},
			FillNotFilling, Value{}, DerivedOf(0), DerivedOf(50000), false},
		// −10 tokens/s: a draining pool is not filling.
		{"drain", []FillServer{{Name: "d", Samples: drain, Capacity: c}},
			FillNotFilling, Value{}, DerivedOf(-10), DerivedOf(100000 - (80000 - 600*20)), false},
		// Flat at 50,000/50,100 (50,000 at 20m) with 55,000 queued: free
		// after demand 100,000 − 50,000 − 55,000 = −5,000: full now, by
		// the queue.
		{"queue alone", []FillServer{{Name: "n", Samples: noise, Capacity: c, Demand: Of(55000)}},
			FillFull, DerivedOf(0), DerivedOf(0), DerivedOf(-5000), true},
		// Used 64,000 at 20m (40,000 + 1,200 × 20), 20 tokens/s over
		// minutes 6..20 (the zeros before are outside the window); free
		// 36,000: 1,800 s.
		{"window", []FillServer{{Name: "l", Samples: late, Capacity: c}},
			FillFilling, DerivedOf(1800), DerivedOf(20), DerivedOf(36000), false},
		// Nothing free, no demand: full now, not by the queue.
		{"full", []FillServer{{Name: "f", Samples: minutes(20, func(int) float64 { return 100000 }), Capacity: c}},
			FillFull, DerivedOf(0), DerivedOf(0), DerivedOf(0), false},
		{"capacity missing", []FillServer{{Name: "a", Samples: a, Capacity: c}, {Name: "b", Samples: b}},
			FillUnknown, Value{}, Value{}, Value{}, false},
		{"capacity partial", []FillServer{{Name: "a", Samples: a, Capacity: Value{V: 100000, Prov: Partial}}},
			FillUnknown, Value{}, Value{}, Value{}, false},
		{"no servers", nil, FillUnknown, Value{}, Value{}, Value{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := PoolFill(tt.servers, at, FillWindow, TrendMinTop)
			if f.TimeToFullState != tt.state || !near(f.TimeToFullSeconds, tt.seconds) || !near(f.FillRate, tt.rate) ||
				!near(f.FreeAfterDemand, tt.free) || f.FullByQueue != tt.queue {
				t.Errorf("got %s %+v rate %+v free %+v queue %v (%s); want %s %+v rate %+v free %+v queue %v",
					f.TimeToFullState, f.TimeToFullSeconds, f.FillRate, f.FreeAfterDemand, f.FullByQueue, f.TrendNote,
					tt.state, tt.seconds, tt.rate, tt.free, tt.queue)
			}
			if tt.state == FillUnknown && f.TrendNote == "" {
				t.Errorf("unavailable without a note")
			}
		})
	}
}

// near compares values to 1e-9 relative (least squares in float64).
func near(a, b Value) bool {
	if a.Prov != b.Prov {
		return false
	}
	return math.Abs(a.V-b.V) <= 1e-9*math.Max(1, math.Abs(b.V))
}

func TestPoolFillNeedsATrend(t *testing.T) {
	c := Of(100000)
	s := func(secs ...int) []UsedSample {
		var out []UsedSample
		for i, x := range secs {
			out = append(out, UsedSample{T: fillT0.Add(time.Duration(x) * time.Second), Used: 1000 * float64(i)})
		}
		return out
	}
	tests := []struct {
		name    string
		samples []UsedSample
		want    FillState
	}{
		{"one sample", s(0), FillUnknown},
		{"two samples", s(0, 40), FillUnknown},
		{"three in 20s", s(0, 10, 20), FillUnknown},
		// 1,000 tokens every 15 s: 66.7 tokens/s.
		{"three over 30s", s(0, 15, 30), FillFilling},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.samples[len(tt.samples)-1].T
			f := PoolFill([]FillServer{{Name: "x", Samples: tt.samples, Capacity: c}}, at, FillWindow, TrendMinTop)
			if f.TimeToFullState != tt.want {
				t.Errorf("state %s (%s), want %s", f.TimeToFullState, f.TrendNote, tt.want)
			}
		})
	}
	// 0, 1,000, 2,000 over 30 s: 200/3 tokens/s, 98,000 free: 1,470 s.
	f := PoolFill([]FillServer{{Name: "x", Samples: s(0, 15, 30), Capacity: c}}, fillT0.Add(30*time.Second), FillWindow, TrendMinTop)
	if !near(f.TimeToFullSeconds, DerivedOf(1470)) || f.TrendSamples != 3 || f.TrendSeconds != 30 {
		t.Errorf("got %+v over %d samples, %gs; want 1470 s over 3, 30s", f.TimeToFullSeconds, f.TrendSamples, f.TrendSeconds)
	}
}

func TestUsedTrend(t *testing.T) {
	tr := NewUsedTrend(time.Minute, 4)
	at := func(s int) time.Time { return fillT0.Add(time.Duration(s) * time.Second) }
	for _, s := range []int{0, 20, 40} {
		tr.Add("a", at(s), Of(float64(s)))
	}
	tr.Add("a", at(40), Of(999)) // a late row shown again: ignored
	tr.Add("a", at(30), Of(999)) // older: ignored
	if got := tr.Samples("a"); len(got) != 3 || got[2].Used != 40 {
		t.Fatalf("samples %+v, want 0, 20, 40", got)
	}
	tr.Add("a", at(80), Of(80)) // 0 and 20 are a minute or more older than 80: dropped
	if got := tr.Samples("a"); len(got) != 2 || got[0].Used != 40 || got[1].Used != 80 {
		t.Fatalf("after the window: %+v, want 40, 80", got)
	}
	for s := 81; s <= 90; s++ {
		tr.Add("a", at(s), Of(float64(s)))
	}
	if got := tr.Samples("a"); len(got) != 4 || got[0].Used != 87 || got[3].Used != 90 {
		t.Fatalf("bounded: %+v, want 87..90", got)
	}
	tr.Add("a", at(91), Value{V: 5, Prov: Partial}) // not whole: the trend restarts
	if got := tr.Samples("a"); len(got) != 0 {
		t.Fatalf("after a partial value: %+v, want none", got)
	}
	tr.Add("b", at(1), Of(1))
	tr.Forget(map[string]bool{"a": true})
	if len(tr.Samples("b")) != 0 {
		t.Errorf("b kept after Forget")
	}
}

// TestWithFill: pools are forecast from their own members; a member whose
// used tokens are partial now leaves its pool unavailable (not warming up).
func TestWithFill(t *testing.T) {
	tr := NewUsedTrend(FillWindow, 100)
	srv := func(used Value) *Server {
		return &Server{Engine: "sglang", Role: RoleUnified, Signals: Signals{Capacity: Of(100000), Used: used}}
	}
	a, b := PoolKey{Role: RoleUnified, Pool: "a"}, PoolKey{Role: RoleUnified, Pool: "b"}
	var members []PlanMember
	for s := 0; s <= 60; s += 15 {
		at := fillT0.Add(time.Duration(s) * time.Second)
		members = []PlanMember{
			// 1,000 tokens every 15 s: 66.7 tokens/s.
			{Key: a, Name: "a-0", Server: srv(Of(1000 * float64(s) / 15))},
			{Key: b, Name: "b-0", Server: srv(Of(5000))},
			{Key: b, Name: "b-1", Server: srv(Of(5000))},
		}
		if s == 60 {
			members[2].Server = srv(Value{V: 5000, Prov: Partial})
		}
		for _, m := range members {
			tr.Add(m.Name, at, m.Server.Used)
		}
	}
	plans := PlanPools(members, 0.9, 0.8)
	WithFill(plans, members, tr, fillT0.Add(time.Minute), TrendMinTop)
	// a: 4,000 used at 60 s, 96,000 free at 200/3 tokens/s: 1,440 s.
	if f := plans[0].FillForecast; plans[0].Pool != "a" || f == nil || f.TimeToFullState != FillFilling || !near(f.TimeToFullSeconds, DerivedOf(1440)) {
		t.Errorf("pool a: %+v, want filling in 1440 s", plans[0].FillForecast)
	}
	if f := plans[1].FillForecast; plans[1].Pool != "b" || f == nil || f.TimeToFullState != FillUnknown || f.TrendWarming {
		t.Errorf("pool b: %+v, want unavailable (b-1's used is partial), not warming", plans[1].FillForecast)
	}
}
