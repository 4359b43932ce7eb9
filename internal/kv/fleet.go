package kv

import (
	"strings"
	"time"
)

// PoolKey names a pool: the servers of one role and, when the config sets
// them, one cluster and one pool label. Prefill and decode KV are never
// summed together: each pool is its own total.
type PoolKey struct {
	Role    Role   `json:"role"`
	Cluster string `json:"cluster,omitempty"`
	Pool    string `json:"pool,omitempty"`
}

// String is the pool's name: the role, then the labels that are set, e.g.
// "decode" or "decode{cluster=a,pool=b}".
func (k PoolKey) String() string {
	var parts []string
	if k.Cluster != "" {
		parts = append(parts, "cluster="+k.Cluster)
	}
	if k.Pool != "" {
		parts = append(parts, "pool="+k.Pool)
	}
	if len(parts) == 0 {
		return string(k.Role)
	}
	return string(k.Role) + "{" + strings.Join(parts, ",") + "}"
}

// Member is one target of a pool: its server, nil when the scrape failed
// (then the pool's sums are partial).
type Member struct {
	Key    PoolKey
	Server *Server
}

// Pool is the capacity-weighted view over the servers of one pool: sums of
// tokens and requests, the ratio of the sums (never an average of ratios).
// A sum with a missing part (a server that failed or does not report the
// value) is Partial, a lower bound, and Counted < Servers says so.
type Pool struct {
	PoolKey
	// Name is PoolKey.String().
	Name string `json:"name"`
	// Servers is the number of targets in the pool, failed ones included.
	Servers int `json:"servers"`
	// Counted is how many of them reported plausible used and capacity.
	Counted  int   `json:"counted"`
	Capacity Value `json:"capacity_tokens"`
	Used     Value `json:"used_tokens"`
	// UsageRatio is used over capacity of the counted servers; Partial when
	// Counted < Servers.
	UsageRatio Value `json:"usage_ratio"`
	// Demand is what waiting requests need, in tokens, and DemandRatio that
	// over the capacity of the servers reporting it (unbounded above).
	Demand      Value `json:"demand_tokens"`
	DemandRatio Value `json:"demand_ratio"`
	Running     Value `json:"running"`
	// Queued is every queue of the pool's servers (admission and PD queues
	// of this role only).
	Queued Value `json:"queued"`
	// Headroom is, per request size, the sum of the servers' headroom.
	Headroom []PoolHeadroom `json:"headroom,omitempty"`
}

// PoolHeadroom is how many more requests of Tokens tokens fit in the pool.
type PoolHeadroom struct {
	Tokens   int   `json:"request_tokens"`
	Requests Value `json:"requests"`
}

var roleOrder = map[Role]int{RolePrefill: 0, RoleDecode: 1, RoleUnified: 2}

// poolGroup is one pool's key and its items, in the order given.
type poolGroup[T any] struct {
	key   PoolKey
	items []T
	// next is the index of the caller's items just past this group's
	// while items is a run of them (a view, not a copy); -1 once copied.
	next int
}

// groupPools groups items by their pool key, keys in first-seen order;
// routers and members of unknown role are in no pool. PoolsOf, PlanPools
// and WithFill group the same way through it. The groups are appended to
// buf[:0] (a caller's stack buffer: most calls have a pool or two). A
// group whose items are adjacent in items (one member, or a config that
// lists a pool's targets together) is a view of items, capacity-limited so
// that nothing is ever appended into it; only a pool whose items are
// spread out gets a copy. The groups are the caller's for the call: they
// may share items' memory, so they must not outlive it. A map indexes the
// keys past groupsIndexed pools.
func groupPools[T any](items []T, key func(T) (PoolKey, *Server), buf []poolGroup[T]) []poolGroup[T] {
	groups := buf[:0]
	var idx map[PoolKey]int
	for i, it := range items {
		k, s := key(it)
		if !k.Role.HoldsKV() || k.Role == "" || (s != nil && !s.Role.HoldsKV()) {
			continue
		}
		// Written out, not lookup.Place, like Server.groups: through a
		// generic function with a key function, the caller's buf would
		// move to the heap.
		g := -1
		if idx != nil {
			if j, ok := idx[k]; ok {
				g = j
			}
		} else {
			for j := range groups {
				if groups[j].key == k {
					g = j
					break
				}
			}
		}
		if g < 0 {
			groups = append(groups, poolGroup[T]{key: k, items: items[i : i+1 : i+1], next: i + 1})
			switch {
			case idx != nil:
				idx[k] = len(groups) - 1
			case len(groups) > groupsIndexed:
				idx = make(map[PoolKey]int, 2*len(groups))
				for j := range groups {
					idx[groups[j].key] = j
				}
			}
			continue
		}
		pg := &groups[g]
		if pg.next == i { // the run goes on: items[i-len(pg.items):i] was it
			pg.items = items[i-len(pg.items) : i+1 : i+1]
			pg.next = i + 1
			continue
		}
		pg.items = append(pg.items, it) // a copy the first time (cap == len), then the group's own
		pg.next = -1
	}
	return groups
}

// groupBuf is how many pools the callers of groupPools hold on their stack.
const groupBuf = 4

// PoolsOf groups members by pool (routers and members of unknown role are
// in none) and sums each, with headroom for each of sizes (tokens). Pools
// are in role order (prefill, decode, unified), then by cluster and pool.
func PoolsOf(members []Member, sizes []int) []Pool {
	var gbuf [groupBuf]poolGroup[Member]
	groups := groupPools(members, func(m Member) (PoolKey, *Server) { return m.Key, m.Server }, gbuf[:0])
	out := make([]Pool, 0, len(groups))
	var sbuf [8]*Server
	for _, g := range groups {
		servers := sbuf[:0]
		if len(g.items) > len(sbuf) {
			servers = make([]*Server, 0, len(g.items))
		}
		for _, m := range g.items {
			servers = append(servers, m.Server)
		}
		out = append(out, poolOf(g.key, servers, sizes))
	}
	sortPools(out, func(p *Pool) PoolKey { return p.PoolKey })
	return out
}

func poolOf(k PoolKey, servers []*Server, sizes []int) Pool {
	p := Pool{PoolKey: k, Name: k.String(), Servers: len(servers)}
	// One column of values, reused by every col call (on the stack for a
	// few servers).
	var vbuf [8]Value
	vals := vbuf[:0]
	if len(servers) > len(vbuf) {
		vals = make([]Value, len(servers))
	} else {
		vals = vbuf[:len(servers)]
	}
	col := func(pick func(*Server) Value) Value {
		for i, s := range servers {
			vals[i] = Value{}
			if s != nil {
				vals[i] = pick(s)
			}
		}
		return strictSum(vals)
	}
	p.Capacity = col(func(s *Server) Value { return s.Capacity })
	p.Used = col(func(s *Server) Value { return s.Used })
	p.Demand = col(func(s *Server) Value { return s.Demand })
	p.Running = col(func(s *Server) Value { return s.Running })
	p.Queued = col(func(s *Server) Value { return s.Queued.QueuedTotal() })
	// The ratios come from the servers that know both parts, plausibly.
	var used, capUsed, demand, capDemand Value
	demanders := 0
	for _, s := range servers {
		if s == nil || !s.Capacity.Trusted() {
			continue
		}
		if s.Used.Trusted() {
			p.Counted++
			used = sumOf(used, s.Used)
			capUsed = sumOf(capUsed, s.Capacity)
		}
		if s.Demand.Trusted() {
			demanders++
			demand = sumOf(demand, s.Demand)
			capDemand = sumOf(capDemand, s.Capacity)
		}
	}
	p.UsageRatio = used.Div(capUsed)
	if p.UsageRatio.OK() && p.Counted < p.Servers {
		p.UsageRatio.Prov = Partial
	}
	p.DemandRatio = demand.Div(capDemand)
	if p.DemandRatio.OK() && demanders < p.Servers {
		p.DemandRatio.Prov = Partial
	}
	wanted := 0
	for _, n := range sizes {
		if n > 0 {
			wanted++
		}
	}
	if wanted > 0 {
		p.Headroom = make([]PoolHeadroom, 0, wanted)
	}
	for _, n := range sizes {
		if n <= 0 {
			continue
		}
		p.Headroom = append(p.Headroom, PoolHeadroom{Tokens: n,
			Requests: col(func(s *Server) Value { return s.Headroom(n) })})
	}
	return p
}

// Limit returns the index of the most constrained pool: the highest usage
// ratio (partial ones count, implausible ones do not), ties broken by the
// lower headroom for the first size; -1 when no pool has a usage ratio.
func Limit(pools []Pool) int {
	best := -1
	for i, p := range pools {
		r := p.UsageRatio
		if !r.OK() || r.Prov == Implausible {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := pools[best]
		switch {
		case r.V > b.UsageRatio.V:
			best = i
		case r.V == b.UsageRatio.V && len(p.Headroom) > 0 && len(b.Headroom) > 0 &&
			p.Headroom[0].Requests.OK() && (!b.Headroom[0].Requests.OK() ||
			p.Headroom[0].Requests.V < b.Headroom[0].Requests.V):
			best = i
		}
	}
	return best
}

// Rates are per-second rates and the prefix-cache hit ratio over the window
// between two scrapes of the same server.
type Rates struct {
	// Window is the time between the two scrapes.
	Window time.Duration `json:"-"`
	// WindowSeconds is Window in seconds, for JSON.
	WindowSeconds float64 `json:"window_seconds"`
	// PrefixHitRatio is Δhit / Δqueried tokens; unavailable without traffic.
	PrefixHitRatio    Value `json:"prefix_hit_ratio"`
	PreemptionsPerSec Value `json:"preemptions_per_second"`
	PromptTokensPS    Value `json:"prompt_tokens_per_second"`
	GenTokensPS       Value `json:"generation_tokens_per_second"`
	// Reset is true when a counter went down: the engine restarted (or
	// its counter went backwards). A rate over that counter is then
	// unavailable for this window, never a negative rate and never the
	// new reading counted as the increase (Prometheus' rate() does that:
	// a counter that went back from 1,000,000 to 995,000 in 2 s would be
	// 497,500/s); the next window has rates again.
	Reset bool `json:"counter_reset"`
}

// increase returns cur − prev for a counter; unavailable, with reset
// true, when the counter went down.
func increase(prev, cur Value) (Value, bool) {
	if !prev.OK() || !cur.OK() {
		return Value{}, false
	}
	if cur.V < prev.V {
		return Value{}, true
	}
	return Value{V: cur.V - prev.V, Prov: Derived}, false
}

// RatesBetween computes rates from two counter readings dt apart. Each
// rate is unavailable when its counter went down (Rates.Reset), the hit
// ratio when either of its two did.
func RatesBetween(prev, cur Counters, dt time.Duration) Rates {
	r := Rates{Window: dt, WindowSeconds: dt.Seconds()}
	if dt <= 0 {
		return r
	}
	sec := Value{V: dt.Seconds(), Prov: Derived}
	perSec := func(p, c Value) Value {
		d, reset := increase(p, c)
		r.Reset = r.Reset || reset
		return d.Div(sec)
	}
	r.PreemptionsPerSec = perSec(prev.Preemptions, cur.Preemptions)
	r.PromptTokensPS = perSec(prev.PromptTokens, cur.PromptTokens)
	r.GenTokensPS = perSec(prev.GenerationTokens, cur.GenerationTokens)
	hit, hr := increase(prev.PrefixHitTokens, cur.PrefixHitTokens)
	query, qr := increase(prev.PrefixQueryTokens, cur.PrefixQueryTokens)
	r.Reset = r.Reset || hr || qr
	if hit.OK() && query.OK() && query.V > 0 && hit.V <= query.V {
		r.PrefixHitRatio = hit.Div(query)
	}
	return r
}
