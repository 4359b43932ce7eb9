package kv

import (
	"math"
	"strconv"
	"testing"
)

// FuzzRollupCheck: whatever ranks report, after Rollup and Check no value
// that can be trusted is negative, beyond 2^53, NaN or used above capacity,
// and headroom is unknown or a whole number ≥ 0.
//
//	go test ./internal/kv -run '^$' -fuzz FuzzRollupCheck -fuzztime 20s
func FuzzRollupCheck(f *testing.F) {
	f.Add(1000.0, 900.0, 1000.0, -1.0, 3.0, 0.5, uint8(2))
	f.Add(-100000.0, -5000.0, 1e30, 0.0, -2.0, 17.6, uint8(1))
	f.Add(1000.0, 1500.0, 1000.0, 999.0, 1.0, 0.0, uint8(3))
	f.Add(math.MaxFloat64, 1.0, 5.0, 6.0, 0.0, -1.0, uint8(2))
	f.Fuzz(func(t *testing.T, cap0, used0, cap1, used1, running, demand float64, dps uint8) {
		n := int(dps%4) + 1
		var ranks []Rank
		for i := range n {
			c, u := cap0, used0
			if i%2 == 1 {
				c, u = cap1, used1
			}
			s := Signals{Capacity: Of(c), Running: Of(running), DemandRatio: Of(demand)}
			if u >= 0 || i == 0 { // some ranks do not report used
				s.Used = Of(u)
			}
			ranks = append(ranks, Rank{RankID{DP: strconv.Itoa(i)}, s})
		}
		s := Server{Ranks: ranks}
		s.Rollup()
		s.Check()
		sig := append([]Signals{s.Signals}, s.DPGroups()...)
		for _, g := range sig {
			for j, v := range fieldsOf(&g) {
				if !v.OK() {
					continue
				}
				if math.IsNaN(v.V) || math.IsInf(v.V, 0) {
					t.Fatalf("%s = %v", fieldNames[j], v.V)
				}
				if v.Trusted() && (v.V < 0 || v.V > MaxExact) {
					t.Fatalf("%s = %v (%s) is trusted", fieldNames[j], v.V, v.Prov)
				}
			}
			if g.Used.Trusted() && g.Capacity.Trusted() && g.Used.V > g.Capacity.V*(1+ratioSlack)+1 {
				t.Fatalf("used %v above capacity %v, trusted", g.Used.V, g.Capacity.V)
			}
		}
		for _, size := range []int{1, 8192} {
			if h := s.Headroom(size); h.OK() && (h.V < 0 || h.V != math.Trunc(h.V) || h.V > MaxExact) {
				t.Fatalf("headroom(%d) = %v", size, h.V)
			}
		}
	})
}
