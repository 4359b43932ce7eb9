package kv

import (
	"math"
	"testing"
)

func TestPoolComplete(t *testing.T) {
	tests := []struct {
		name string
		in   CachePool
		want CachePool
	}{
		{"ratio from used and capacity", CachePool{Capacity: Of(8000), Used: Of(2000)},
			CachePool{Capacity: Of(8000), Used: Of(2000), UsageRatio: DerivedOf(0.25)}},
		{"used from ratio and capacity", CachePool{Capacity: Of(8000), UsageRatio: Of(0.5)},
			CachePool{Capacity: Of(8000), Used: DerivedOf(4000), UsageRatio: Of(0.5)}},
		{"capacity from used and ratio", CachePool{Used: Of(3e9), UsageRatio: Of(0.75)},
			CachePool{Capacity: DerivedOf(4e9), Used: Of(3e9), UsageRatio: Of(0.75)}},
		{"ratio 0: capacity stays unknown, not infinite", CachePool{Used: Of(0), UsageRatio: Of(0)},
			CachePool{Used: Of(0), UsageRatio: Of(0)}},
		{"a ratio so small the quotient overflows: unknown", CachePool{Used: Of(3e9), UsageRatio: Of(1e-320)},
			CachePool{Used: Of(3e9), UsageRatio: Of(1e-320)}},
		{"the engine's values are never overwritten", CachePool{Capacity: Of(100), Used: Of(10), UsageRatio: Of(0.2)},
			CachePool{Capacity: Of(100), Used: Of(10), UsageRatio: Of(0.2)}},
		{"capacity 0: no ratio", CachePool{Capacity: Of(0), Used: Of(5)}, CachePool{Capacity: Of(0), Used: Of(5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.Complete()
			for _, c := range []struct {
				what      string
				got, want Value
			}{{"capacity", got.Capacity, tt.want.Capacity}, {"used", got.Used, tt.want.Used}, {"usage", got.UsageRatio, tt.want.UsageRatio}} {
				if c.got.Prov != c.want.Prov || math.Abs(c.got.V-c.want.V) > 1e-9*math.Max(1, math.Abs(c.want.V)) {
					t.Errorf("%s = %+v, want %+v", c.what, c.got, c.want)
				}
			}
		})
	}
}
