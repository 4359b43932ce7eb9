package kv

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPoolsNeverBlendRoles(t *testing.T) {
	// The overload of issue 11, by hand: decode nearly full, prefill not.
	decode := &Server{Role: RoleDecode, Signals: Signals{Capacity: Of(2581504), Used: Of(2578300),
		DemandRatio: Of(17.6), Demand: DerivedOf(45434470), Running: Of(96),
		Queued: Queues{Waiting: Of(0), Prealloc: Of(9502), Transfer: Of(3)}}}
	prefill := &Server{Role: RolePrefill, Signals: Signals{Capacity: Of(1048576), Used: Of(333447),
		Running: Of(200), Queued: Queues{Waiting: Of(10), Bootstrap: Of(9214), Inflight: Of(1)}}}
	router := &Server{Role: RoleRouter, Router: &Router{WorkersTotal: Of(2)}, Signals: Signals{Running: Of(300)}}
	pools := PoolsOf([]Member{
		{PoolKey{Role: RoleDecode}, decode},
		{PoolKey{Role: RoleRouter}, router},
		{PoolKey{Role: RolePrefill}, prefill},
	}, []int{8192})
	if len(pools) != 2 || pools[0].Name != "prefill" || pools[1].Name != "decode" {
		t.Fatalf("pools = %+v, want prefill then decode", pools)
	}
	p, d := pools[0], pools[1]
	for _, c := range []struct {
		name      string
		got, want Value
	}{
		{"prefill capacity", p.Capacity, Of(1048576)},
		// 333,447 / 1,048,576 = 0.318000793...
		{"prefill usage", p.UsageRatio, DerivedOf(333447.0 / 1048576)},
		// 10 + 9,214 + 1: this pool's queues only.
		{"prefill queued", p.Queued, Of(9225)},
		{"prefill running", p.Running, Of(200)},
		{"prefill demand", p.Demand, Value{}},
		{"decode used", d.Used, Of(2578300)},
		{"decode usage", d.UsageRatio, DerivedOf(2578300.0 / 2581504)},
		// 9,502 + 3, never the prefill bootstrap queue too.
		{"decode queued", d.Queued, Of(9505)},
		{"decode demand", d.Demand, DerivedOf(45434470)},
		{"decode demand ratio", d.DemandRatio, DerivedOf(45434470.0 / 2581504)},
		// 3,204 free tokens: 0 requests of 8,192.
		{"decode headroom", d.Headroom[0].Requests, DerivedOf(0)},
		// 715,129 free: 87 of 8,192 (87 × 8,192 = 712,704).
		{"prefill headroom", p.Headroom[0].Requests, DerivedOf(87)},
	} {
		if !cmp.Equal(c.got, c.want, valueCmp) {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if i := Limit(pools); i != 1 {
		t.Errorf("Limit = %d, want 1 (decode)", i)
	}
}

func TestPoolStrictSums(t *testing.T) {
	a := &Server{Role: RoleUnified, Signals: Signals{Capacity: Of(1000), Used: Of(900), Running: Of(3)}}
	b := &Server{Role: RoleUnified, Signals: Signals{Capacity: Of(9000), Used: Of(0), Running: Of(1)}}
	ratioOnly := &Server{Role: RoleUnified, Signals: Signals{UsageRatio: Of(0.5), Running: Of(2)}}
	tests := []struct {
		name    string
		members []Member
		counted int
		cap     Value
		used    Value
		ratio   Value
		running Value
	}{
		{"whole: capacity-weighted, not a mean of ratios",
			[]Member{{PoolKey{Role: RoleUnified}, a}, {PoolKey{Role: RoleUnified}, b}},
			2, Of(10000), Of(900), DerivedOf(0.09), Of(4)},
		{"a server without tokens: partial",
			[]Member{{PoolKey{Role: RoleUnified}, a}, {PoolKey{Role: RoleUnified}, ratioOnly}},
			1, Value{V: 1000, Prov: Partial}, Value{V: 900, Prov: Partial}, Value{V: 0.9, Prov: Partial}, Of(5)},
		{"a failed server: partial",
			[]Member{{PoolKey{Role: RoleUnified}, a}, {PoolKey{Role: RoleUnified}, nil}},
			1, Value{V: 1000, Prov: Partial}, Value{V: 900, Prov: Partial}, Value{V: 0.9, Prov: Partial},
			Value{V: 3, Prov: Partial}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := PoolsOf(tt.members, nil)
			if len(ps) != 1 {
				t.Fatalf("%d pools, want 1", len(ps))
			}
			p := ps[0]
			if p.Counted != tt.counted || p.Servers != len(tt.members) {
				t.Errorf("counted %d of %d, want %d of %d", p.Counted, p.Servers, tt.counted, len(tt.members))
			}
			for _, c := range []struct {
				name      string
				got, want Value
			}{{"Capacity", p.Capacity, tt.cap}, {"Used", p.Used, tt.used}, {"UsageRatio", p.UsageRatio, tt.ratio},
				{"Running", p.Running, tt.running}} {
				if !cmp.Equal(c.got, c.want, valueCmp) {
					t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
				}
			}
		})
	}
}

func TestPoolKeys(t *testing.T) {
	s := func(used float64) *Server {
		return &Server{Role: RoleDecode, Signals: Signals{Capacity: Of(100), Used: Of(used)}}
	}
	ps := PoolsOf([]Member{
		{PoolKey{Role: RoleDecode, Cluster: "b"}, s(10)},
		{PoolKey{Role: RoleDecode, Cluster: "a", Pool: "x"}, s(90)},
		{PoolKey{Role: RoleDecode, Cluster: "a", Pool: "x"}, s(70)},
		{PoolKey{Role: ""}, nil}, // failed, role unknown: in no pool
	}, nil)
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"decode{cluster=a,pool=x}", "decode{cluster=b}"}, names); diff != "" {
		t.Errorf("pool names (-want +got):\n%s", diff)
	}
	// (90 + 70) / 200.
	if !cmp.Equal(ps[0].UsageRatio, DerivedOf(0.8), valueCmp) {
		t.Errorf("pool a/x usage = %+v, want 0.8", ps[0].UsageRatio)
	}
	if Limit(ps) != 0 {
		t.Errorf("Limit = %d, want 0", Limit(ps))
	}
	if Limit(nil) != -1 {
		t.Errorf("Limit(nil) = %d, want -1", Limit(nil))
	}
}

// TestGroupPools: the groups are those of a plain map from key to items
// (written here, in the test), keys in first-seen order, items in input
// order: for one member, pools listed together, pools interleaved, routers
// and unknown roles between them, and more pools than the map-free search
// handles; and the caller's items are never written.
func TestGroupPools(t *testing.T) {
	key := func(m PlanMember) (PoolKey, *Server) { return m.Key, m.Server }
	member := func(role Role, pool string, name string) PlanMember {
		return PlanMember{Key: PoolKey{Role: role, Pool: pool}, Name: name}
	}
	many := func() []PlanMember {
		var out []PlanMember
		for i := range 3 * groupsIndexed {
			out = append(out, member(RoleDecode, fmt.Sprint(i%(groupsIndexed+5)), fmt.Sprint(i)))
		}
		return out
	}
	tests := []struct {
		name    string
		members []PlanMember
	}{
		{"one", []PlanMember{member(RoleDecode, "", "a")}},
		{"together", []PlanMember{member(RoleDecode, "", "a"), member(RoleDecode, "", "b"), member(RolePrefill, "", "c"), member(RolePrefill, "", "d")}},
		{"interleaved", []PlanMember{member(RoleDecode, "", "a"), member(RolePrefill, "", "b"), member(RoleDecode, "", "c"), member(RolePrefill, "", "d"), member(RoleDecode, "", "e")}},
		{"a router between", []PlanMember{member(RoleDecode, "", "a"), member(RoleRouter, "", "r"), member(RoleDecode, "", "b"), member("", "", "u"), member(RoleDecode, "", "c")}},
		{"many pools", many()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wantKeys []PoolKey
			wantItems := map[PoolKey][]string{}
			for _, m := range tt.members {
				if m.Key.Role == RoleRouter || m.Key.Role == "" {
					continue
				}
				if _, ok := wantItems[m.Key]; !ok {
					wantKeys = append(wantKeys, m.Key)
				}
				wantItems[m.Key] = append(wantItems[m.Key], m.Name)
			}
			before := slices.Clone(tt.members)
			var buf [groupBuf]poolGroup[PlanMember]
			groups := groupPools(tt.members, key, buf[:0])
			if len(groups) != len(wantKeys) {
				t.Fatalf("%d groups, want %d", len(groups), len(wantKeys))
			}
			for i, g := range groups {
				var names []string
				for _, m := range g.items {
					names = append(names, m.Name)
				}
				if g.key != wantKeys[i] || !slices.Equal(names, wantItems[g.key]) {
					t.Errorf("group %d = %v %v, want %v %v", i, g.key, names, wantKeys[i], wantItems[wantKeys[i]])
				}
			}
			if !slices.Equal(before, tt.members) {
				t.Errorf("groupPools wrote into the caller's items")
			}
		})
	}
}

// TestPoolsOfOneAllocatesOnce: the per-scrape report of one server (serve
// tracks each target alone) groups its pool on the stack; PoolsOf
// allocates its result only, and PlanPools what it returns: the plans,
// the drain cases, the largest one's copy and the note.
func TestPoolsOfOneAllocatesOnce(t *testing.T) {
	s := &Server{Role: RoleDecode, Signals: Signals{Capacity: Of(1000), Used: Of(10), Running: Of(1)}}
	m := []Member{{PoolKey{Role: RoleDecode}, s}}
	if n := testing.AllocsPerRun(100, func() { PoolsOf(m, nil) }); n != 1 {
		t.Errorf("PoolsOf allocates %v times, want 1 (the pools)", n)
	}
	pm := []PlanMember{{Key: PoolKey{Role: RoleDecode}, Name: "only", Server: s}}
	if n := testing.AllocsPerRun(100, func() { PlanPools(pm, 0.9, 0.8) }); n != 4 {
		t.Errorf("PlanPools allocates %v times, want 4", n)
	}
}
