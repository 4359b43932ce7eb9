package report

import (
	"testing"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestPlan(t *testing.T) {
	// d1: two DP ranks, 8,000 and 1,000 tokens free, context 40,000.
	d1 := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, ContextLength: kv.Of(40000), Ranks: []kv.Rank{
		{RankID: kv.RankID{DP: "0"}, Signals: kv.Signals{Capacity: kv.Of(10000), Used: kv.Of(2000)}},
		{RankID: kv.RankID{DP: "1"}, Signals: kv.Signals{Capacity: kv.Of(10000), Used: kv.Of(9000)}},
	}}
	d1.Rollup()
	one := func(role kv.Role, capacity, used float64) *kv.Server {
		return &kv.Server{Role: role, Signals: kv.Signals{Capacity: kv.Of(capacity), Used: kv.Of(used)}}
	}
	r := Report{Servers: []Server{
		{Name: "d1", Role: kv.RoleDecode, OK: true, Server: d1},
		{Name: "d2", Role: kv.RoleDecode, OK: false, Error: "connection refused"},
		{Name: "p1", Role: kv.RolePrefill, OK: true, Server: one(kv.RolePrefill, 50000, 5000)},
		// Another cluster's decode servers: a pool of their own.
		{Name: "b1", Role: kv.RoleDecode, OK: true, Labels: map[string]string{"cluster": "b"}, Server: one(kv.RoleDecode, 12000, 0)},
		{Name: "b2", Role: kv.RoleDecode, OK: true, Labels: map[string]string{"cluster": "b"}, Server: one(kv.RoleDecode, 7000, 1000)},
		{Name: "r", Role: kv.RoleRouter, OK: true, Server: &kv.Server{Role: kv.RoleRouter}},
	}}
	c := Plan(r, 3000)
	got := map[string]kv.Value{}
	for _, s := range c.Servers {
		got[s.Name] = s.Requests
	}
	// d1: floor(8000/3000) + floor(1000/3000) = 2 + 0 (a request cannot
	// span DP ranks, so not floor(9000/3000) = 3); d2 failed: unknown;
	// p1: floor(45000/3000) = 15; b1: 12000/3000 = 4; b2: 6000/3000 = 2;
	// the router holds no KV.
	want := map[string]kv.Value{"d1": kv.DerivedOf(2), "d2": {}, "p1": kv.DerivedOf(15), "b1": kv.DerivedOf(4), "b2": kv.DerivedOf(2)}
	if len(got) != len(want) {
		t.Fatalf("Plan servers = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("Plan(3000)[%s] = %+v, want %+v", k, got[k], w)
		}
	}
	// Pools in the report's order: prefill, decode, decode{cluster=b}.
	// decode: one server unknown makes the sum unknown, never a partial
	// count; cluster b: 4 + 2, never added to the other decode pool.
	wantPools := []PoolCapacity{
		{Pool: "prefill", Role: kv.RolePrefill, Servers: 1, Requests: kv.DerivedOf(15)},
		{Pool: "decode", Role: kv.RoleDecode, Servers: 2},
		{Pool: "decode{cluster=b}", Role: kv.RoleDecode, Servers: 2, Requests: kv.DerivedOf(6)},
	}
	if len(c.Pools) != len(wantPools) {
		t.Fatalf("Plan pools = %+v, want %+v", c.Pools, wantPools)
	}
	for i, w := range wantPools {
		if c.Pools[i] != w {
			t.Errorf("Plan pool %d = %+v, want %+v", i, c.Pools[i], w)
		}
	}
	// Over the context length nothing fits.
	c = Plan(r, 50000)
	if s := c.Servers[0]; s.Requests != kv.DerivedOf(0) || s.FitsContext == nil || *s.FitsContext {
		t.Errorf("Plan(50000)[d1] = %+v, want 0 requests, fits_context false", s)
	}
}
