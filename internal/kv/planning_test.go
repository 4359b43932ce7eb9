package kv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// srvOf builds a rolled-up server from its totals.
func srvOf(role Role, sig Signals, ranks ...Rank) *Server {
	s := &Server{Engine: "sglang", Role: role, Signals: sig, Ranks: ranks}
	s.Rollup()
	return s
}

func rank(dp string, capacity, used, running float64) Rank {
	return Rank{RankID: RankID{DP: dp, TP: "0"}, Signals: Signals{Capacity: Of(capacity), Used: Of(used), Running: Of(running)}}
}

func TestWorkloadHeadroom(t *testing.T) {
	tests := []struct {
		name     string
		s        *Server
		fallback Value
		want     Value
		perReq   Value
	}{
		// 60,000 used by 30 requests: 2,000 per request; 40,000 free: 20 more.
		{"one rank", srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(60000), Running: Of(30)}),
			Value{}, DerivedOf(20), DerivedOf(2000)},
		// Rank 0: 40,000 / 20 = 2,000 per request, 10,000 free: 5. Rank 1:
		// 10,000 / 2 = 5,000, 40,000 free: 8. 13 in all; the server's mean
		// (50,000 / 22) would say 22, which no rank can take.
		{"per DP rank", srvOf(RoleDecode, Signals{}, rank("0", 50000, 40000, 20), rank("1", 50000, 10000, 2)),
			Value{}, DerivedOf(13), DerivedOf(50000.0 / 22)},
		// Rank 1 idle: measured with the server's 40,000 / 20 = 2,000:
		// 5 + 50,000 / 2,000 = 5 + 25 = 30.
		{"idle rank takes the server's mix", srvOf(RoleDecode, Signals{}, rank("0", 50000, 40000, 20), rank("1", 50000, 0, 0)),
			Value{}, DerivedOf(30), DerivedOf(2000)},
		{"idle server: unavailable, not 0", srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(0), Running: Of(0)}),
			Value{}, Value{}, Value{}},
		// The pool's 2,500 per request: 100,000 / 2,500 = 40.
		{"idle server with the pool's mix", srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(0), Running: Of(0)}),
			DerivedOf(2500), DerivedOf(40), Value{}},
		// Full: a real 0 (every slot is held).
		{"full", srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(1000), Running: Of(4)}),
			Value{}, DerivedOf(0), DerivedOf(250)},
		{"running unknown", srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(100)}),
			Value{}, Value{}, Value{}},
		{"a rank without used: unavailable", srvOf(RoleDecode, Signals{}, rank("0", 50000, 40000, 20),
			Rank{RankID: RankID{DP: "1", TP: "0"}, Signals: Signals{Capacity: Of(50000), Running: Of(3)}}),
			Value{}, Value{}, Value{}},
		{"router", &Server{Role: RoleRouter, Signals: Signals{Running: Of(10)}}, Value{}, Value{}, Value{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.WorkloadHeadroom(tt.fallback); !cmp.Equal(got, tt.want, valueCmp) {
				t.Errorf("WorkloadHeadroom = %+v, want %+v", got, tt.want)
			}
			if got := perRequest(&tt.s.Signals); !cmp.Equal(got, tt.perReq, valueCmp) {
				t.Errorf("KV per request = %+v, want %+v", got, tt.perReq)
			}
		})
	}
}

func TestLimitingFactor(t *testing.T) {
	waiting := func(n float64) Queues { return Queues{Waiting: Of(n)} }
	tests := []struct {
		name     string
		s        *Server
		override int
		preempt  Value
		want     Factor
		why      string
		sat      Value
		maxRun   Value
		source   string
	}{
		{"kv over the warning", srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(950), Running: Of(10), Queued: waiting(0)}),
			0, Value{}, FactorKV, "KV 95% used, at or above the 90% warning", DerivedOf(0.95), Value{}, ""},
		// PD decode: 60,000 tokens wanted, 50,000 free.
		{"kv: demand beyond free", srvOf(RoleDecode, Signals{Capacity: Of(100000), Used: Of(50000), Demand: Of(60000),
			Running: Of(10), Queued: Queues{Waiting: Of(0), Prealloc: Of(12)}}),
			0, Value{}, FactorKV, "queued requests need 60000 KV tokens, 50000 are free", DerivedOf(0.5), Value{}, ""},
		{"kv: preempting", srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(500), Running: Of(10), Queued: waiting(0)}),
			0, DerivedOf(0.5), FactorKV, "0.5 requests/s preempted or retracted", DerivedOf(0.5), Value{}, ""},
		// 256 of 256 running at 40 % KV: the batch, saturation 256/256 = 1.
		{"batch from the engine", func() *Server {
			s := srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(400), Running: Of(256), Queued: waiting(30)})
			s.MaxRunning = Of(256)
			return s
		}(), 0, Value{}, FactorBatch, "256 running of 256 allowed while KV is 40% used", DerivedOf(1), Of(256), SourceEngine},
		// The config's 64 wins over the engine's 256.
		{"batch from the config", func() *Server {
			s := srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(400), Running: Of(64), Queued: waiting(3)})
			s.MaxRunning = Of(256)
			return s
		}(), 64, Value{}, FactorBatch, "64 running of 64 allowed while KV is 40% used", DerivedOf(1), Of(64), SourceConfig},
		// 10 of 256 running (saturation max(0.3, 10/256) = 0.3), 5 waiting.
		{"queue", func() *Server {
			s := srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(300), Running: Of(10), Queued: waiting(5)})
			s.MaxRunning = Of(256)
			return s
		}(), 0, Value{}, FactorQueue, "5 requests wait while KV (30% used) and the batch have room", DerivedOf(0.3), Of(256), SourceEngine},
		// Transfer is work under way, not waiting for admission.
		{"none", srvOf(RoleDecode, Signals{Capacity: Of(1000), Used: Of(300), Running: Of(10),
			Queued: Queues{Waiting: Of(0), Transfer: Of(7)}}), 0, Value{}, FactorNone, "", DerivedOf(0.3), Value{}, ""},
		{"unknown usage", srvOf(RoleUnified, Signals{Running: Of(10), Queued: waiting(0)}),
			0, Value{}, FactorUnknown, "KV usage not reported", Value{}, Value{}, ""},
		{"unknown queue", srvOf(RoleUnified, Signals{Capacity: Of(1000), Used: Of(300), Running: Of(10)}),
			0, Value{}, FactorUnknown, "queue not reported", DerivedOf(0.3), Value{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanServer(tt.s, tt.override, tt.preempt, 0.9)
			if p.Limit != tt.want || p.Why != tt.why {
				t.Errorf("limit = %s (%q), want %s (%q)", p.Limit, p.Why, tt.want, tt.why)
			}
			if !cmp.Equal(p.Saturation, tt.sat, valueCmp) {
				t.Errorf("saturation = %+v, want %+v", p.Saturation, tt.sat)
			}
			if !cmp.Equal(p.MaxRunning, tt.maxRun, valueCmp) || p.MaxRunningSource != tt.source {
				t.Errorf("max running = %+v from %q, want %+v from %q", p.MaxRunning, p.MaxRunningSource, tt.maxRun, tt.source)
			}
		})
	}
}

// A PD prefill server whose queue is all in the bootstrap queue waits on
// decode's pre-allocation, and its words and its pool's limiter say so;
// a queue of its own is still its own.
func TestLimitBootstrapWaitsOnDecode(t *testing.T) {
	tests := []struct {
		name    string
		q       Queues
		why     string
		waitsOn string
	}{
		{"bootstrap only", Queues{Waiting: Of(0), Bootstrap: Of(20347)},
			"20,347 requests wait in the bootstrap queue for decode's pre-allocation, not for this server's KV (0% used) or batch", "decode's pre-allocation"},
		{"its own queue too", Queues{Waiting: Of(12), Bootstrap: Of(300)},
			"12 requests wait while KV (0% used) and the batch have room, 300 more in the bootstrap queue for decode's pre-allocation", ""},
		{"no bootstrap", Queues{Waiting: Of(12), Bootstrap: Of(0)},
			"12 requests wait while KV (0% used) and the batch have room", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := srvOf(RolePrefill, Signals{Capacity: Of(1000), Used: Of(0), Running: Of(0), Queued: tt.q})
			p := PlanServer(s, 0, Value{}, 0.9)
			if p.Limit != FactorQueue || p.Why != tt.why || p.WaitsOn != tt.waitsOn {
				t.Errorf("limit %s (%q), waits on %q; want queue (%q), waits on %q", p.Limit, p.Why, p.WaitsOn, tt.why, tt.waitsOn)
			}
			pools := PlanPools([]PlanMember{{Key: PoolKey{Role: RolePrefill}, Name: "prefill", Server: s, Plan: &p}}, 0.9, 0.8)
			if want := []Limiter{{Server: "prefill", Factor: FactorQueue, WaitsOn: tt.waitsOn}}; len(pools) != 1 || !cmp.Equal(pools[0].Limiters, want) {
				t.Errorf("pools %+v, want one with limiters %+v", pools, want)
			}
		})
	}
}

func member(name string, role Role, s *Server) PlanMember {
	m := PlanMember{Key: PoolKey{Role: role}, Name: name, Server: s}
	if s != nil {
		p := PlanServer(s, 0, Value{}, 0.9)
		m.Plan = &p
	}
	return m
}

func TestDrain(t *testing.T) {
	dec := func(c, u, d float64) *Server {
		sig := Signals{Capacity: Of(c), Used: Of(u), Running: Of(10), Queued: Queues{Waiting: Of(0)}}
		if d >= 0 {
			sig.Demand = Of(d)
		}
		return srvOf(RoleDecode, sig)
	}
	t.Run("unsafe with demand, largest is the worst", func(t *testing.T) {
		// Load: 60,000 + 50,000 + 150,000 used + 0 + 10,000 + 20,000 wanted
		// = 290,000. Drain decode-2 (200,000): the rest holds 200,000, so
		// 290,000 / 200,000 = 1.45 and 0.9 × 200,000 − 290,000 = −110,000.
		// Drain decode-0: 270,000 − 290,000 = −20,000, after 290/300.
		ps := PlanPools([]PlanMember{
			member("decode-0", RoleDecode, dec(100000, 60000, 0)),
			member("decode-1", RoleDecode, dec(100000, 50000, 10000)),
			member("decode-2", RoleDecode, dec(200000, 150000, 20000)),
		}, 0.9, 0.8)
		if len(ps) != 1 {
			t.Fatalf("pools = %d, want 1", len(ps))
		}
		p := ps[0]
		if p.N1Safe || !p.DemandCounted || p.Drain == nil || p.Drain.Server != "decode-2" {
			t.Fatalf("plan = %+v, want decode-2 unsafe with demand counted", p)
		}
		for _, c := range []struct {
			name      string
			got, want Value
		}{
			{"load", p.Drain.Load, DerivedOf(290000)},
			{"rest", p.Drain.RestCapacity, DerivedOf(200000)},
			{"after", p.Drain.After, DerivedOf(1.45)},
			{"margin tokens", p.Drain.MarginTokens, DerivedOf(-110000)},
			{"margin ratio", p.Drain.MarginRatio, DerivedOf(-0.55)},
			{"decode-0 margin", p.DrainEach[0].MarginTokens, DerivedOf(-20000)},
			{"decode-0 after", p.DrainEach[0].After, DerivedOf(290000.0 / 300000)},
		} {
			if !cmp.Equal(c.got, c.want, valueCmp) {
				t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
			}
		}
		if want := "N−1 unsafe — draining decode-2 leaves 145% of the rest"; p.N1Note != want {
			t.Errorf("note = %q, want %q", p.N1Note, want)
		}
	})
	t.Run("the issue's 104 %", func(t *testing.T) {
		// 52,000 + 52,000 = 104,000 onto 100,000: 104 %.
		ps := PlanPools([]PlanMember{
			member("decode-0", RoleDecode, dec(100000, 52000, -1)),
			member("decode-1", RoleDecode, dec(100000, 52000, -1)),
		}, 0.9, 0.8)
		if want := "N−1 unsafe — draining decode-0 leaves 104% of the rest"; ps[0].N1Note != want || ps[0].DemandCounted {
			t.Errorf("note = %q (demand counted %v), want %q without demand", ps[0].N1Note, ps[0].DemandCounted, want)
		}
	})
	t.Run("safe without demand", func(t *testing.T) {
		// 30,000 + 40,000 = 70,000 onto 100,000: 0.7, margin 90,000 − 70,000.
		ps := PlanPools([]PlanMember{
			member("a", RoleUnified, srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(30000), Running: Of(3), Queued: Queues{Waiting: Of(0)}})),
			member("b", RoleUnified, srvOf(RoleUnified, Signals{Capacity: Of(100000), Used: Of(40000), Running: Of(4), Queued: Queues{Waiting: Of(0)}})),
		}, 0.9, 0.8)
		p := ps[0]
		if !p.N1Safe || p.N1Note != "" || !cmp.Equal(p.Drain.MarginTokens, DerivedOf(20000), valueCmp) ||
			!cmp.Equal(p.Drain.MarginRatio, DerivedOf(0.2), valueCmp) {
			t.Errorf("plan = %+v, drain %+v; want safe by 20,000 tokens (0.2)", p, p.Drain)
		}
		// Each holds 10,000 per running request (30,000 / 3, 40,000 / 4);
		// 70,000 free on a (7 more), 60,000 on b (6): 13.
		if !cmp.Equal(p.WorkloadHeadroom, DerivedOf(13), valueCmp) {
			t.Errorf("workload headroom = %+v, want 13", p.WorkloadHeadroom)
		}
	})
	t.Run("single server", func(t *testing.T) {
		ps := PlanPools([]PlanMember{member("only", RoleDecode, dec(100000, 1000, -1))}, 0.9, 0.8)
		p := ps[0]
		if p.N1Safe || p.N1Note != "single server: draining only leaves no capacity" || p.Drain.After.OK() ||
			!cmp.Equal(p.Drain.MarginTokens, DerivedOf(-1000), valueCmp) {
			t.Errorf("plan = %+v, drain %+v; want never safe, said so", p, p.Drain)
		}
	})
	t.Run("failed server", func(t *testing.T) {
		ps := PlanPools([]PlanMember{member("a", RoleDecode, dec(100000, 1000, -1)), member("b", RoleDecode, nil)}, 0.9, 0.8)
		p := ps[0]
		if p.N1Safe || p.Drain != nil || !strings.Contains(p.N1Note, "b did not answer") || p.WorkloadHeadroom.Prov != Partial {
			t.Errorf("plan = %+v; want no drain answer and a partial headroom", p)
		}
	})
	t.Run("partial demand", func(t *testing.T) {
		ps := PlanPools([]PlanMember{member("a", RoleDecode, dec(100000, 1000, 500)), member("b", RoleDecode, dec(100000, 1000, -1))}, 0.9, 0.8)
		p := ps[0]
		if p.N1Safe || p.Drain.MarginTokens.Prov != Partial {
			t.Errorf("plan = %+v, drain %+v; want a partial margin, not safe", p, p.Drain)
		}
	})
}

func TestPoolPlanSaturationAndLimiters(t *testing.T) {
	// a: 60 % of 100,000 (limit: none); b: 95 % of 300,000 (kv); c idle.
	// Σ capacity × saturation = 60,000 + 285,000 + 0 over 500,000 = 0.69
	// (the mean of ratios would be 0.5167).
	a := srvOf(RoleDecode, Signals{Capacity: Of(100000), Used: Of(60000), Running: Of(30), Queued: Queues{Waiting: Of(0)}})
	b := srvOf(RoleDecode, Signals{Capacity: Of(300000), Used: Of(285000), Running: Of(95), Queued: Queues{Waiting: Of(4)}})
	c := srvOf(RoleDecode, Signals{Capacity: Of(100000), Used: Of(0), Running: Of(0), Queued: Queues{Waiting: Of(0)}})
	pre := srvOf(RolePrefill, Signals{Capacity: Of(100000), Used: Of(10), Running: Of(1), Queued: Queues{Waiting: Of(0)}})
	ps := PlanPools([]PlanMember{member("a", RoleDecode, a), member("b", RoleDecode, b), member("c", RoleDecode, c),
		member("p", RolePrefill, pre)}, 0.9, 0.8)
	if len(ps) != 2 || ps[0].Name != "prefill" || ps[1].Name != "decode" {
		t.Fatalf("pools = %+v, want prefill then decode", ps)
	}
	d := ps[1]
	if !cmp.Equal(d.Saturation, DerivedOf(0.69), valueCmp) {
		t.Errorf("saturation = %+v, want 0.69", d.Saturation)
	}
	if want := []Limiter{{Server: "b", Factor: FactorKV}}; !cmp.Equal(d.Limiters, want) {
		t.Errorf("limiters = %+v, want %+v", d.Limiters, want)
	}
	// Mix: 345,000 / 125 = 2,760 per request. a: 40,000 / 2,000 = 20;
	// b: 15,000 / 3,000 = 5; c idle, at the pool's 2,760: 100,000 / 2,760
	// = 36.2 → 36. 61 in all.
	if !cmp.Equal(d.KVPerRequest, DerivedOf(2760), valueCmp) || !cmp.Equal(d.WorkloadHeadroom, DerivedOf(61), valueCmp) {
		t.Errorf("per request %+v, headroom %+v; want 2760 and 61", d.KVPerRequest, d.WorkloadHeadroom)
	}
}

func TestFinishedRequestSizes(t *testing.T) {
	sizes := func(n, p, g float64) RequestSizes {
		return RequestSizes{Requests: Of(n), PromptTokens: Of(p), GenerationTokens: Of(g)}
	}
	cur := sizes(140, 280000, 42000)
	for _, c := range []struct {
		name string
		prev *RequestSizes
		want Value
	}{
		// Since start: (280,000 + 42,000) / 140 = 2,300.
		{"since start", nil, DerivedOf(2300)},
		// Over the window: (50,000 + 12,000) / 40 = 1,550.
		{"window", &RequestSizes{Requests: Of(100), PromptTokens: Of(230000), GenerationTokens: Of(30000)}, DerivedOf(1550)},
		// None finished since: since start.
		{"none since", &RequestSizes{Requests: Of(140), PromptTokens: Of(280000), GenerationTokens: Of(42000)}, DerivedOf(2300)},
		// A restart (the counters went down): since start.
		{"restart", &RequestSizes{Requests: Of(900), PromptTokens: Of(1e6), GenerationTokens: Of(1e5)}, DerivedOf(2300)},
	} {
		if got := cur.MeanTokens(c.prev); !cmp.Equal(got, c.want, valueCmp) {
			t.Errorf("%s: mean = %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := sizes(0, 0, 0).MeanTokens(nil); got.OK() {
		t.Errorf("no finished request: mean %+v, want unavailable", got)
	}
	if got := (RequestSizes{}).MeanTokens(nil); got.OK() {
		t.Errorf("not reported: mean %+v, want unavailable", got)
	}
	// Two DP ranks with 10,000 and 45,000 free: 4 + 19 of 2,300.
	s := srvOf(RoleDecode, Signals{}, rank("0", 50000, 40000, 20), rank("1", 50000, 5000, 2))
	s.Finished = cur
	var p ServerPlan
	p.WithFinished(s, nil)
	if !cmp.Equal(p.FinishedHeadroom, DerivedOf(23), valueCmp) || !cmp.Equal(p.FinishedRequestTokens, DerivedOf(2300), valueCmp) {
		t.Errorf("finished: %+v tokens, %+v fit; want 2,300 and 23", p.FinishedRequestTokens, p.FinishedHeadroom)
	}
}

func TestCountOf(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {62604, "62,604"}, {1234567.4, "1,234,567"}, {-2500, "-2,500"}} {
		if got := countOf(c.v); got != c.want {
			t.Errorf("countOf(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestDesiredServers(t *testing.T) {
	partial := Value{V: 290000, Prov: Partial}
	for _, c := range []struct {
		name     string
		load     Value
		capacity Value
		servers  int
		target   float64
		want     Value
	}{
		// Size 400,000 / 3 = 133,333.3; at 0.8 a server takes 106,666.7:
		// 290,000 of them is 2.72 servers, 3, and one more: 4.
		{"three servers", DerivedOf(290000), DerivedOf(400000), 3, 0.8, DerivedOf(4)},
		// Exactly at the target: 160,000 / (0.8 × 100,000) = 2 servers
		// keep 80 %; one more for N−1: 3.
		{"at the target", DerivedOf(160000), DerivedOf(200000), 2, 0.8, DerivedOf(3)},
		// One token more needs a third server: 4.
		{"one token over", DerivedOf(160001), DerivedOf(200000), 2, 0.8, DerivedOf(4)},
		// Idle: no server needed, one kept for N−1.
		{"idle", DerivedOf(0), DerivedOf(200000), 2, 0.8, DerivedOf(1)},
		// Target 1: 100,000 fills one server of 100,000; 2.
		{"target 1", DerivedOf(100000), DerivedOf(100000), 1, 1, DerivedOf(2)},
		// The queue alone overfills: 1,000,000 over 80,000 a server is
		// 12.5, 13, and 14.
		{"overload", DerivedOf(1000000), DerivedOf(100000), 1, 0.8, DerivedOf(14)},
		{"partial load", partial, DerivedOf(400000), 3, 0.8, Value{V: 4, Prov: Partial}},
		{"unknown load", Value{}, DerivedOf(400000), 3, 0.8, Value{}},
		{"unknown capacity", DerivedOf(1000), Value{}, 3, 0.8, Value{}},
		{"no capacity", DerivedOf(1000), DerivedOf(0), 3, 0.8, Value{}},
		{"no server", DerivedOf(1000), DerivedOf(1000), 0, 0.8, Value{}},
		{"target 0", DerivedOf(1000), DerivedOf(1000), 1, 0, Value{}},
		{"target above 1", DerivedOf(1000), DerivedOf(1000), 1, 1.5, Value{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DesiredServers(c.load, c.capacity, c.servers, c.target); !cmp.Equal(got, c.want, valueCmp) {
				t.Errorf("DesiredServers(%+v, %+v, %d, %g) = %+v, want %+v", c.load, c.capacity, c.servers, c.target, got, c.want)
			}
		})
	}
}

// TestPoolDesiredServers: the pools of a PD deployment get a desired count
// each, never one for the blend, from the drain's load (used plus queued
// demand); unknown where the drain answer is.
func TestPoolDesiredServers(t *testing.T) {
	srv := func(role Role, c, u, d float64) *Server {
		sig := Signals{Capacity: Of(c), Used: Of(u), Running: Of(10), Queued: Queues{Waiting: Of(0)}}
		if d >= 0 {
			sig.Demand = Of(d)
		}
		return srvOf(role, sig)
	}
	// Prefill: 20,000 + 30,000 used of 2 × 50,000: 50,000 over 0.8 ×
	// 50,000 = 1.25 servers, 2, and 3. Decode: 150,000 + 140,000 +
	// 130,000 used and 3 × 20,000 wanted = 480,000 over 0.8 × 200,000 =
	// 3 servers, and 4. (Blended, 530,000 over 0.8 × 140,000 would be 4.7,
	// 5, and 6: neither pool's answer.)
	ps := PlanPools([]PlanMember{
		member("prefill-0", RolePrefill, srv(RolePrefill, 50000, 20000, -1)),
		member("prefill-1", RolePrefill, srv(RolePrefill, 50000, 30000, -1)),
		member("decode-0", RoleDecode, srv(RoleDecode, 200000, 150000, 20000)),
		member("decode-1", RoleDecode, srv(RoleDecode, 200000, 140000, 20000)),
		member("decode-2", RoleDecode, srv(RoleDecode, 200000, 130000, 20000)),
	}, 0.9, 0.8)
	got := map[string]Value{}
	for _, p := range ps {
		got[p.Name] = p.DesiredServers
	}
	if want := map[string]Value{"prefill": DerivedOf(3), "decode": DerivedOf(4)}; !cmp.Equal(got, want, valueCmp) {
		t.Errorf("desired servers = %+v, want %+v", got, want)
	}

	for _, c := range []struct {
		name    string
		members []PlanMember
		want    Value
	}{
		{"a failed server", []PlanMember{member("a", RoleDecode, srv(RoleDecode, 100000, 1000, -1)), member("b", RoleDecode, nil)}, Value{}},
		// 1,000 + 500 + 1,000 of 200,000: 1 server, 2; b's demand unknown.
		{"partial demand", []PlanMember{member("a", RoleDecode, srv(RoleDecode, 100000, 1000, 500)),
			member("b", RoleDecode, srv(RoleDecode, 100000, 1000, -1))}, Value{V: 2, Prov: Partial}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := PlanPools(c.members, 0.9, 0.8)
			if len(ps) != 1 || !cmp.Equal(ps[0].DesiredServers, c.want, valueCmp) {
				t.Errorf("pools %+v: want one, desired %+v", ps, c.want)
			}
		})
	}
}
