package report

import "github.com/kvwatch/kvwatch/internal/kv"

// Capacity answers "how many more requests of Tokens tokens fit", per
// server and per pool: the web UI's capacity planner
// (/api/kvwatch/v1/capacity).
type Capacity struct {
	Tokens  int              `json:"request_tokens"`
	Servers []ServerCapacity `json:"servers"`
	// Pools sums the servers of each pool, the report's pools (one role
	// and, when set, one cluster/pool label: prefill and decode KV mean
	// different things and are never added together, nor are two
	// clusters). A pool's sum is unavailable when any of its servers' is.
	Pools []PoolCapacity `json:"pools"`
}

// ServerCapacity is one server's answer.
type ServerCapacity struct {
	Name string  `json:"name"`
	Role kv.Role `json:"role"`
	// Requests is per DP rank floor(available / Tokens), summed
	// (kv.Server.Headroom); unavailable for a failed scrape or unknown KV.
	Requests kv.Value `json:"requests"`
	// Available is the free KV in tokens (evictable counts as free).
	Available kv.Value `json:"available_tokens"`
	// FitsContext is false when Tokens is over the server's context length.
	FitsContext *bool `json:"fits_context,omitempty"`
}

// PoolCapacity sums the servers of one pool.
type PoolCapacity struct {
	// Pool is the pool's name, as in Report.Pools (decode,
	// decode{cluster=a}).
	Pool     string   `json:"pool"`
	Role     kv.Role  `json:"role"`
	Servers  int      `json:"servers"`
	Requests kv.Value `json:"requests"`
}

// Plan computes the capacity for requests of n tokens from a report.
// Routers and cache servers are left out: they hold no KV pool.
func Plan(r Report, n int) Capacity {
	c := Capacity{Tokens: n, Servers: []ServerCapacity{}, Pools: []PoolCapacity{}}
	var members []kv.Member
	byPool := map[kv.PoolKey]*PoolCapacity{}
	for i := range r.Servers {
		s := &r.Servers[i]
		if !s.Role.HoldsKV() {
			continue
		}
		sc := ServerCapacity{Name: s.Name, Role: s.Role}
		if s.Server != nil {
			sc.Requests = s.Server.Headroom(n)
			sc.Available = s.Server.Available()
			if cl := s.Server.ContextLength; cl.OK() && cl.V > 0 {
				fits := float64(n) <= cl.V
				sc.FitsContext = &fits
				if !fits {
					sc.Requests = kv.DerivedOf(0)
				}
			}
		}
		c.Servers = append(c.Servers, sc)
		k := PoolKeyOf(s)
		members = append(members, kv.Member{Key: k, Server: s.Server})
		pc := byPool[k]
		if pc == nil {
			pc = &PoolCapacity{Pool: k.String(), Role: k.Role, Requests: kv.DerivedOf(0)}
			byPool[k] = pc
		}
		pc.Servers++
		if !sc.Requests.OK() || !pc.Requests.OK() {
			pc.Requests = kv.Value{}
		} else {
			pc.Requests = kv.DerivedOf(pc.Requests.V + sc.Requests.V)
		}
	}
	// In the report's order of pools; a server of unknown role (failed
	// before it said) is in no pool.
	for _, p := range kv.PoolsOf(members, nil) {
		if pc := byPool[p.PoolKey]; pc != nil {
			c.Pools = append(c.Pools, *pc)
		}
	}
	return c
}
