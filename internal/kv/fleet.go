package kv

import "time"

// Fleet is the capacity-weighted view over many servers: sum of used over
// sum of capacity, never an average of ratios.
type Fleet struct {
	// Servers is the number of non-router servers given.
	Servers int `json:"servers"`
	// Counted is how many of them reported both used and capacity.
	Counted  int   `json:"counted"`
	Capacity Value `json:"capacity_tokens"`
	Used     Value `json:"used_tokens"`
	// UsageRatio is Used / Capacity over the counted servers.
	UsageRatio Value `json:"usage_ratio"`
	Running    Value `json:"running"`
	Queued     Value `json:"queued"`
}

// FleetOf sums the servers that are not routers. A server with unknown used
// or capacity is left out of the KV sums (and Counted says so).
func FleetOf(servers []*Server) Fleet {
	var f Fleet
	for _, s := range servers {
		if s == nil || s.Role == RoleRouter {
			continue
		}
		f.Servers++
		f.Running = sumOf(f.Running, s.Running)
		f.Queued = sumOf(f.Queued, s.Queued.QueuedTotal())
		if !s.Used.OK() || !s.Capacity.OK() {
			continue
		}
		f.Counted++
		f.Capacity = sumOf(f.Capacity, s.Capacity)
		f.Used = sumOf(f.Used, s.Used)
	}
	f.UsageRatio = f.Used.Div(f.Capacity)
	return f
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
	// Reset is true when a counter went down: the engine restarted, and the
	// increase is counted from zero, never as a negative rate.
	Reset bool `json:"counter_reset"`
}

// increase returns cur − prev for a counter, treating a decrease as a
// restart from zero.
func increase(prev, cur Value) (Value, bool) {
	if !prev.OK() || !cur.OK() {
		return Value{}, false
	}
	if cur.V < prev.V {
		return Value{V: cur.V, Prov: Derived}, true
	}
	return Value{V: cur.V - prev.V, Prov: Derived}, false
}

// RatesBetween computes rates from two counter readings dt apart.
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
