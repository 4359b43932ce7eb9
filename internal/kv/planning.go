package kv

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Capacity planning: how many more of today's requests fit (workload
// headroom), what limits admission (the limiting factor), whether a pool
// can lose one server (N−1 drain safety), and how many servers it needs
// (the autoscaling signal). The formulas and their limits are in
// docs/planning.md; every function here is pure.

// Factor is what limits admission on a server right now.
type Factor string

// Limiting factors, the values of kvwatch_limiting_factor's factor label.
const (
	// FactorKV: usage at or above the warning threshold, or queued demand
	// larger than the free KV, or preemptions/retractions happening.
	FactorKV Factor = "kv"
	// FactorBatch: the running-request limit is reached while KV has room.
	FactorBatch Factor = "batch"
	// FactorState: a hybrid model's state pool (Mamba slots, SWA tokens)
	// at or above the warning threshold, and at least as full as KV.
	FactorState Factor = "state"
	// FactorQueue: requests wait for admission while KV and the batch have
	// room (compute- or scheduler-bound).
	FactorQueue Factor = "queue"
	// FactorNone: nothing limits admission.
	FactorNone Factor = "none"
	// FactorUnknown: the engine does not report enough to tell (no usage,
	// or no queue); never exported as a factor.
	FactorUnknown Factor = "unknown"
)

// Factors lists the exported factors in documentation order.
func Factors() []Factor { return []Factor{FactorKV, FactorState, FactorBatch, FactorQueue, FactorNone} }

// MaxRunning sources.
const (
	SourceEngine = "engine" // the engine's own gauge
	SourceConfig = "config" // the target's max_running_requests in the config file
)

// ServerPlan is the planning view of one server.
type ServerPlan struct {
	// KVPerRequest is the KV held per running request now: used / running
	// (server totals), in tokens; unavailable when nothing runs.
	KVPerRequest Value `json:"kv_per_running_request_tokens"`
	// WorkloadHeadroom is how many more requests of today's mix fit: per
	// DP rank, floor(available / (used / running) of that rank), summed.
	// Unavailable when idle (no mix to measure), never 0 for that reason.
	WorkloadHeadroom Value `json:"workload_headroom_requests"`
	// MaxRunning is the running-request limit used for the batch factor,
	// and MaxRunningSource where it comes from ("engine", "config", "").
	MaxRunning       Value  `json:"max_running_requests"`
	MaxRunningSource string `json:"max_running_source,omitempty"`
	// FinishedRequestTokens is the mean prompt + generation size of the
	// requests finished since the previous scrape (or since start), where
	// the engine reports it; FinishedHeadroom how many more of that size
	// fit (per DP rank, summed). Unlike KVPerRequest it counts the whole
	// output, not what running requests have generated so far.
	FinishedRequestTokens Value `json:"finished_request_tokens"`
	FinishedHeadroom      Value `json:"finished_headroom_requests"`
	// BatchHeadroom is MaxRunning − running (≥ 0).
	BatchHeadroom Value `json:"batch_headroom_requests"`
	// Saturation is the fuller of the KV and the batch: max(usage ratio,
	// running / max running), 0–1; the usage ratio alone without a limit.
	Saturation Value `json:"saturation_ratio"`
	// StatePool is the state pool of a hybrid model (hybrid.go); nil for
	// a server without one. KVCapacityRequests is floor(capacity / KV per
	// running request); Concurrency min(max running, KVCapacityRequests,
	// StatePool.CapacityRequests), and Binding the pool that gives it.
	StatePool          *StatePlan `json:"state_pool,omitempty"`
	KVCapacityRequests Value      `json:"kv_capacity_requests"`
	Concurrency        Value      `json:"concurrency_requests"`
	Binding            Binding    `json:"binding_pool,omitempty"`
	// Limit is what limits admission now, Why says it with the numbers.
	Limit Factor `json:"limiting_factor"`
	Why   string `json:"limit_reason,omitempty"`
	// WaitsOn names what a queue limit waits on when it is not the server
	// itself (WaitsOnDecodePrealloc); "" otherwise.
	WaitsOn string `json:"waits_on,omitempty"`
	// State is the server's diagnosis (Diagnose) and Evidence says it
	// with the numbers; "" when the engine reports too little.
	State    State  `json:"state"`
	Evidence string `json:"state_evidence,omitempty"`
}

// RequestSizes are the cumulative sizes of the requests an engine finished
// since it started: the _count and _sum of its per-request prompt and
// generation histograms (vLLM vllm:request_prompt_tokens and
// vllm:request_generation_tokens, SGLang sglang:prompt_tokens_histogram and
// sglang:generation_tokens_histogram). Unavailable where it has none.
type RequestSizes struct {
	Requests         Value `json:"requests"`
	PromptTokens     Value `json:"prompt_tokens"`
	GenerationTokens Value `json:"generation_tokens"`
}

// MeanTokens is the mean prompt + generation size of the requests finished
// between prev and s (prev nil, or none finished since: since start), in
// tokens; unavailable when none finished or a part is unknown. A counter
// that went down (a restart) counts from zero.
func (s RequestSizes) MeanTokens(prev *RequestSizes) Value {
	n, p, g := s.Requests, s.PromptTokens, s.GenerationTokens
	if !n.Trusted() || !p.Trusted() || !g.Trusted() {
		return Value{}
	}
	if prev != nil && prev.Requests.Trusted() && prev.PromptTokens.Trusted() && prev.GenerationTokens.Trusted() &&
		n.V > prev.Requests.V && p.V >= prev.PromptTokens.V && g.V >= prev.GenerationTokens.V {
		n, p, g = n.Sub(prev.Requests), p.Sub(prev.PromptTokens), g.Sub(prev.GenerationTokens)
	}
	if n.V < 1 || p.V < 0 || g.V < 0 {
		return Value{}
	}
	return Value{V: (p.V + g.V) / n.V, Prov: Derived}
}

// FitOf returns how many requests of size tokens fit: per DP rank floor(free
// / size), summed; unavailable when size or a rank's free KV is unknown.
func (s *Server) FitOf(size Value) Value {
	if !s.Role.HoldsKV() || !size.OK() || size.V <= 0 {
		return Value{}
	}
	var buf [groupsBuf]Signals
	groups := append(buf[:0], s.Signals)
	if s.MultiDP() {
		groups, _, _ = s.groups(buf[:0])
	}
	var out Value
	for i := range groups {
		a := groups[i].Available()
		if !a.OK() {
			return Value{}
		}
		out = sumOf(out, Value{V: math.Floor(a.V / size.V), Prov: combine(a.Prov, size.Prov)})
	}
	return out
}

// perRequest is used / running when both are whole and plausible and at
// least one request runs holding at least one token; else unavailable.
func perRequest(s *Signals) Value {
	if !s.Used.Trusted() || !s.Running.Trusted() || s.Running.V < 1 || s.Used.V < 1 {
		return Value{}
	}
	return s.Used.Div(s.Running)
}

// WorkloadHeadroom returns how many more requests of today's mix fit: for
// each DP rank, its available KV over the KV its running requests hold per
// request (the server's, then fallback's, when the rank is idle), floored,
// summed over ranks (a request cannot span DP ranks). Unavailable when no
// size is known (idle, and no fallback) or a rank's available KV is not.
func (s *Server) WorkloadHeadroom(fallback Value) Value {
	if !s.Role.HoldsKV() {
		return Value{}
	}
	own := perRequest(&s.Signals)
	var buf [groupsBuf]Signals
	groups := append(buf[:0], s.Signals)
	if s.MultiDP() {
		groups, _, _ = s.groups(buf[:0])
	}
	var out Value
	for i := range groups {
		g := &groups[i]
		a := g.Available()
		size := perRequest(g).Or(own).Or(fallback)
		if !a.OK() || !size.OK() || size.V <= 0 {
			return Value{}
		}
		fit := Value{V: math.Floor(a.V / size.V), Prov: combine(a.Prov, size.Prov)}
		out = sumOf(out, fit)
	}
	return out
}

// admissionQueue is the requests waiting to be admitted: the admission
// queue and the PD queues that wait for KV or a bootstrap (not transfer or
// inflight, which are work under way). Unknown when none is reported.
func admissionQueue(q Queues) Value {
	var out Value
	for _, v := range []Value{q.Waiting, q.Prealloc, q.Bootstrap} {
		if v.Trusted() {
			out = sumOf(out, v)
		}
	}
	return out
}

// PlanServer computes s's planning view. maxRunningOverride (> 0) is the
// target's configured running-request limit and wins over the engine's;
// preemptions is the preemption/retraction rate (requests/s, unavailable
// on the first scrape); warning is the usage ratio at which KV counts as
// the limit (alerts.kv_usage_warning).
func PlanServer(s *Server, maxRunningOverride int, preemptions Value, warning float64) ServerPlan {
	p := ServerPlan{KVPerRequest: perRequest(&s.Signals), WorkloadHeadroom: s.WorkloadHeadroom(Value{})}
	switch {
	case maxRunningOverride > 0:
		p.MaxRunning, p.MaxRunningSource = Of(float64(maxRunningOverride)), SourceConfig
	case s.MaxRunning.Trusted() && s.MaxRunning.V > 0:
		p.MaxRunning, p.MaxRunningSource = s.MaxRunning, SourceEngine
	}
	if p.MaxRunning.OK() && s.Running.Trusted() {
		p.BatchHeadroom = p.MaxRunning.Sub(s.Running)
		p.BatchHeadroom.V = math.Max(p.BatchHeadroom.V, 0)
	}
	u := s.UsageRatio
	if u.Trusted() {
		p.Saturation = u.As(max(u.Prov, Derived))
		if p.MaxRunning.OK() && s.Running.Trusted() {
			if b := s.Running.Div(p.MaxRunning); b.OK() && b.V > p.Saturation.V {
				p.Saturation = b
			}
		}
	}
	p.StatePool = StateOf(s)
	p.KVCapacityRequests, p.Concurrency, p.Binding = concurrency(s, &p)
	p.Limit, p.Why, p.WaitsOn = limitOf(s, p.MaxRunning, preemptions, warning)
	// A state pool at the warning limits before preemptions or a queue do
	// (they follow from it); KV usage above it and the warning still wins.
	if f, why, ok := stateLimit(s, p.StatePool, warning); ok {
		p.Limit, p.Why, p.WaitsOn = f, why, ""
	}
	return p
}

// WaitsOnDecodePrealloc is what the requests in a PD prefill server's
// bootstrap queue wait on: the decode server pre-allocating their KV, not
// the prefill server's own KV or batch.
const WaitsOnDecodePrealloc = "decode's pre-allocation"

// limitOf applies the rules of docs/planning.md in order: kv, batch,
// queue, none; unknown when the values needed are not reported. A queue
// that is all in the bootstrap queue (PD prefill) waits on decode's
// pre-allocation, which the words and waitsOn say.
func limitOf(s *Server, maxRunning, preemptions Value, warning float64) (f Factor, why, waitsOn string) {
	u := s.UsageRatio
	if u.Trusted() && u.V >= warning {
		return FactorKV, fmt.Sprintf("KV %s used, at or above the %s warning", pctOf(u.V), pctOf(warning)), ""
	}
	if d, a := s.Demand, s.Available(); d.Trusted() && d.V > 0 && a.OK() && d.V > a.V {
		return FactorKV, fmt.Sprintf("queued requests need %.0f KV tokens, %.0f are free", d.V, a.V), ""
	}
	if preemptions.Trusted() && preemptions.V > 0 {
		return FactorKV, fmt.Sprintf("%.2g requests/s preempted or retracted", preemptions.V), ""
	}
	if !u.Trusted() {
		return FactorUnknown, "KV usage not reported", ""
	}
	if maxRunning.OK() && s.Running.Trusted() && s.Running.V >= maxRunning.V {
		return FactorBatch, fmt.Sprintf("%s running of %s allowed while KV is %s used", countOf(s.Running.V), countOf(maxRunning.V), pctOf(u.V)), ""
	}
	q := admissionQueue(s.Queued)
	if !q.OK() {
		return FactorUnknown, "queue not reported", ""
	}
	if q.V <= 0 {
		return FactorNone, "", ""
	}
	boot := s.Queued.Bootstrap
	if !boot.Trusted() || boot.V <= 0 {
		return FactorQueue, fmt.Sprintf("%s requests wait while KV (%s used) and the batch have room", countOf(q.V), pctOf(u.V)), ""
	}
	if own := q.V - boot.V; own > 0 {
		return FactorQueue, fmt.Sprintf("%s requests wait while KV (%s used) and the batch have room, %s more in the bootstrap queue for %s",
			countOf(own), pctOf(u.V), countOf(boot.V), WaitsOnDecodePrealloc), ""
	}
	return FactorQueue, fmt.Sprintf("%s requests wait in the bootstrap queue for %s, not for this server's KV (%s used) or batch",
		countOf(boot.V), WaitsOnDecodePrealloc, pctOf(u.V)), WaitsOnDecodePrealloc
}

// pctOf formats a ratio as a percentage of three significant digits.
func pctOf(r float64) string { return fmt.Sprintf("%.3g%%", r*100) }

// countOf formats a count with thousands separators (62,604), as the
// faces print counts.
func countOf(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// WithFinished fills the finished-request size and its headroom of p from
// s and the previous scrape's sizes (nil on the first).
func (p *ServerPlan) WithFinished(s *Server, prev *RequestSizes) {
	p.FinishedRequestTokens = s.Finished.MeanTokens(prev)
	p.FinishedHeadroom = s.FitOf(p.FinishedRequestTokens)
}

// PlanMember is one target of a pool for planning: its name, its server
// (nil when the scrape failed) and the server's plan.
type PlanMember struct {
	Key    PoolKey
	Name   string
	Server *Server
	Plan   *ServerPlan
}

// Limiter is a server of a pool that limits admission, and by what.
type Limiter struct {
	Server string `json:"server"`
	Factor Factor `json:"factor"`
	// WaitsOn is the server's plan's WaitsOn: what its queue waits on
	// when that is not the server itself.
	WaitsOn string `json:"waits_on,omitempty"`
}

// DrainCase is the answer for draining one server of a pool: the pool's
// load (used plus queued demand of every server, the drained one's
// included) moved onto the rest, against the warning threshold.
type DrainCase struct {
	Server string `json:"server"`
	// Capacity is the drained server's; RestCapacity the others' sum.
	Capacity     Value `json:"capacity_tokens"`
	RestCapacity Value `json:"rest_capacity_tokens"`
	// Load is Σ used + Σ demand over the pool, in tokens.
	Load Value `json:"load_tokens"`
	// After is Load / RestCapacity: the usage the rest would have.
	After Value `json:"after_usage_ratio"`
	// MarginTokens is warning × RestCapacity − Load (negative: unsafe);
	// MarginRatio is warning − After.
	MarginTokens Value `json:"margin_tokens"`
	MarginRatio  Value `json:"margin_ratio"`
	// Safe is true when the margin is known, whole and not negative, and
	// the pool has another server.
	Safe bool `json:"safe"`
}

// PoolPlan is the planning view of one pool.
type PoolPlan struct {
	PoolKey
	Name    string `json:"name"`
	Servers int    `json:"servers"`
	// KVPerRequest is Σ used / Σ running over the pool's busy servers.
	KVPerRequest Value `json:"kv_per_running_request_tokens"`
	// WorkloadHeadroom is the servers' workload headroom summed; an idle
	// server is measured with the pool's KVPerRequest.
	WorkloadHeadroom Value `json:"workload_headroom_requests"`
	// FinishedHeadroom is the servers' FinishedHeadroom summed.
	FinishedHeadroom Value `json:"finished_headroom_requests"`
	// Saturation is the capacity-weighted mean of the servers' saturation:
	// Σ capacity × saturation / Σ capacity; Partial when some lack it.
	Saturation Value `json:"saturation_ratio"`
	// Limiters are the servers whose factor is kv, state, batch or queue.
	Limiters []Limiter `json:"limiters"`
	// DemandCounted is false when no server of the pool reports demand:
	// the drain load is then used tokens only.
	DemandCounted bool `json:"demand_counted"`
	// Drain is the case of the largest server (by capacity): the load is
	// the same whichever server goes, so the largest is the worst case.
	// Nil when the pool's used or capacity is not whole.
	Drain *DrainCase `json:"drain_largest,omitempty"`
	// DrainEach is every server's case, in member order.
	DrainEach []DrainCase `json:"drain_each,omitempty"`
	// N1Safe is Drain.Safe; N1Note says why not, in words.
	N1Safe bool   `json:"n1_safe"`
	N1Note string `json:"n1_note,omitempty"`
	// State is the most severe state of the pool's servers, and Evidence
	// that server's evidence, prefixed with its name.
	State    State  `json:"state"`
	Evidence string `json:"state_evidence,omitempty"`
	// DesiredServers is the autoscaling signal (DesiredServers, the
	// function): the servers of the pool's own size that keep its load at
	// or under the target usage, plus one. Unavailable where Drain is nil
	// (a server failed or reports no whole KV tokens), partial where the
	// load is (some servers' demand unknown).
	DesiredServers Value `json:"desired_servers"`
	// FillForecast is the demand-aware time to full (PoolFill), its
	// fields inline in the JSON (time_to_full_seconds, time_to_full_state,
	// ...); nil, and absent, where no trend was taken (status without
	// --trend).
	*FillForecast
}

// PlanPools groups members by pool (routers in none) and computes each
// pool's plan against the warning threshold, and its desired servers
// against the target usage (autoscaling.target_kv_usage), in the order of
// PoolsOf.
func PlanPools(members []PlanMember, warning, target float64) []PoolPlan {
	var gbuf [groupBuf]poolGroup[PlanMember]
	groups := groupPools(members, func(m PlanMember) (PoolKey, *Server) { return m.Key, m.Server }, gbuf[:0])
	out := make([]PoolPlan, 0, len(groups))
	for _, g := range groups {
		out = append(out, planPool(g.key, g.items, warning, target))
	}
	sortPools(out, func(p *PoolPlan) PoolKey { return p.PoolKey })
	return out
}

// sortPools orders pools like PoolsOf: role, cluster, pool.
func sortPools[T any](ps []T, key func(*T) PoolKey) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0; j-- {
			a, b := key(&ps[j-1]), key(&ps[j])
			less := roleOrder[b.Role] < roleOrder[a.Role] ||
				(roleOrder[b.Role] == roleOrder[a.Role] && (b.Cluster < a.Cluster ||
					(b.Cluster == a.Cluster && b.Pool < a.Pool)))
			if !less {
				break
			}
			ps[j-1], ps[j] = ps[j], ps[j-1]
		}
	}
}

func planPool(k PoolKey, ms []PlanMember, warning, target float64) PoolPlan {
	p := PoolPlan{PoolKey: k, Name: k.String(), Servers: len(ms), Limiters: []Limiter{}}
	p.State, p.Evidence = worstState(ms)
	// The pool's mix: Σ used / Σ running over busy servers.
	var used, running Value
	for _, m := range ms {
		if m.Server != nil && perRequest(&m.Server.Signals).OK() {
			used = sumOf(used, m.Server.Used)
			running = sumOf(running, m.Server.Running)
		}
	}
	p.KVPerRequest = used.Div(running)
	heads := make([]Value, len(ms))
	var weighted, capSum float64
	satProv, satN := Unavailable, 0
	for i, m := range ms {
		if m.Server == nil {
			continue
		}
		heads[i] = m.Server.WorkloadHeadroom(p.KVPerRequest)
		if m.Plan != nil {
			if f := m.Plan.Limit; f == FactorKV || f == FactorState || f == FactorBatch || f == FactorQueue {
				p.Limiters = append(p.Limiters, Limiter{Server: m.Name, Factor: f, WaitsOn: m.Plan.WaitsOn})
			}
			if sat, c := m.Plan.Saturation, m.Server.Capacity; sat.Trusted() && c.Trusted() && c.V > 0 {
				weighted += sat.V * c.V
				capSum += c.V
				satProv = worst(satProv, sat.Prov)
				satN++
			}
		}
	}
	p.WorkloadHeadroom = strictSum(heads)
	fin := make([]Value, len(ms))
	for i, m := range ms {
		if m.Plan != nil {
			fin[i] = m.Plan.FinishedHeadroom
		}
	}
	p.FinishedHeadroom = strictSum(fin)
	if satN > 0 {
		p.Saturation = Value{V: weighted / capSum, Prov: combine(satProv, Derived)}
		if satN < len(ms) {
			p.Saturation.Prov = Partial
		}
	}
	planDrain(&p, ms, warning, target)
	return p
}

// planDrain fills the pool's N−1 answer and, from the same load and
// capacity, its desired servers. Its notes are joined, not formatted: fmt
// boxed each name in an interface, once per scrape.
func planDrain(p *PoolPlan, ms []PlanMember, warning, target float64) {
	var capTotal, load Value
	demanders := 0
	for _, m := range ms {
		s := m.Server
		if s == nil {
			p.N1Note = m.Name + " did not answer: no drain answer for the pool"
			return
		}
		if !s.Capacity.Trusted() || !s.Used.Trusted() {
			p.N1Note = m.Name + " does not report whole KV tokens: no drain answer for the pool"
			return
		}
		capTotal = sumOf(capTotal, s.Capacity)
		load = sumOf(load, s.Used)
		if s.Demand.Trusted() {
			demanders++
			load = sumOf(load, s.Demand)
		}
	}
	p.DemandCounted = demanders > 0
	load = load.As(max(load.Prov, Derived))
	if demanders > 0 && demanders < len(ms) {
		load.Prov = Partial // some servers' demand is unknown: a lower bound
	}
	w := Value{V: warning, Prov: Derived}
	largest := -1
	p.DrainEach = make([]DrainCase, 0, len(ms)) // at its final size (slices.Grow made a second slice under -race)
	for i, m := range ms {
		s := m.Server
		rest := capTotal.Sub(s.Capacity)
		c := DrainCase{Server: m.Name, Capacity: s.Capacity, RestCapacity: rest, Load: load}
		c.MarginTokens = w.Mul(rest).Sub(load)
		c.MarginTokens.Prov = max(c.MarginTokens.Prov, load.Prov)
		if rest.V > 0 {
			c.After = load.Div(rest)
			c.MarginRatio = w.Sub(c.After)
		}
		c.Safe = len(ms) > 1 && rest.V > 0 && c.MarginTokens.Trusted() && c.MarginTokens.V >= 0
		p.DrainEach = append(p.DrainEach, c)
		if largest < 0 || s.Capacity.V > ms[largest].Server.Capacity.V {
			largest = i
		}
	}
	d := p.DrainEach[largest]
	p.Drain = &d
	p.N1Safe = d.Safe
	p.DesiredServers = DesiredServers(load, capTotal, len(ms), target)
	switch {
	case len(ms) == 1:
		p.N1Note = "single server: draining " + d.Server + " leaves no capacity"
	case !d.MarginTokens.Trusted():
		p.N1Note = "demand of some servers unknown: the margin is a bound, not an answer"
	case !d.Safe:
		p.N1Note = "N−1 unsafe — draining " + d.Server + " leaves " + pctOf(d.After.V) + " of the rest"
	}
}

// DesiredServers is the autoscaling signal of a pool (docs/planning.md,
// "Autoscaling"): how many servers of the pool's own size keep its load at
// or under the target usage at today's request mix, plus one so that the
// pool still does with one server drained (N−1):
//
//	size    = capacity / servers                 (the pool's mean server, tokens)
//	desired = ceil(load / (target × size)) + 1
//
// load is Σ used + Σ queued demand (the drain's load), capacity Σ capacity,
// both in tokens, over the pool's servers; target is the usage ratio in
// (0, 1]. The provenance is the load's (partial when some servers' demand
// is unknown: then a lower bound). Unavailable when the load or the
// capacity is, when the capacity is 0 or target is not in (0, 1]. The
// recording rule pool:kvwatch_pool_desired_servers does the same
// arithmetic in the same order.
func DesiredServers(load, capacity Value, servers int, target float64) Value {
	if !load.OK() || !capacity.OK() || capacity.V <= 0 || servers < 1 || !(target > 0 && target <= 1) {
		return Value{}
	}
	size := capacity.V / float64(servers)
	return saturate(math.Ceil(load.V/(target*size))+1, combine(load.Prov, capacity.Prov))
}

// Demand-aware time to full (docs/planning.md): the pool's fill trend, the
// least-squares slope of each server's used tokens summed (PromQL deriv, as
// the recording rule pool:kvwatch_kv_seconds_to_full:deriv15m), against its
// free KV after the queued demand.

// FillFloorPer15m is the floor on the fill trend, as a share of the pool's
// capacity per 15 minutes: a pool filling more slowly than 1 % of its
// capacity per 15 minutes is "not filling" and forecasts nothing (noise on
// a flat pool would otherwise forecast a fill days away, or soon). The
// recording rules and the faces use this one value.
const FillFloorPer15m = 0.01

// FillWindow is the range of the fill trend (deriv over 15 minutes).
const FillWindow = 15 * time.Minute

// FillState says what the time to full is.
type FillState string

// Fill states.
const (
	// FillFilling: the fill rate is above the floor; the time to full is
	// the free KV after demand over the rate.
	FillFilling FillState = "filling"
	// FillFull: the free KV after demand is gone (the queue alone fills
	// it, or nothing is free): the time to full is 0, full now.
	FillFull FillState = "full"
	// FillNotFilling: the fill rate is at or below the floor (flat or
	// draining): there is no time to full, which is neither 0 nor infinite.
	FillNotFilling FillState = "not_filling"
	// FillUnknown: too few samples, or a part of the pool is missing.
	FillUnknown FillState = "unavailable"
)

// UsedSample is a server's used KV tokens at one time.
type UsedSample struct {
	T    time.Time
	Used float64
}

// FillServer is one server's part of its pool's time to full: its used
// tokens over time (oldest first; the last is the current value) and its
// current capacity and queued demand (unavailable where the engine reports
// none).
type FillServer struct {
	Name     string
	Samples  []UsedSample
	Capacity Value
	Demand   Value
}

// FillTrend is the minimum a server's samples must cover for a trend.
type FillTrend struct {
	// MinSamples is the fewest samples in the window (deriv needs 2).
	MinSamples int
	// MinSpan is the shortest time between a server's first and last
	// sample in the window.
	MinSpan time.Duration
}

// FillForecast is a pool's demand-aware time to full. Embedded in PoolPlan
// as a pointer: absent where no trend was taken (status without --trend).
type FillForecast struct {
	// TimeToFullState is filling, full, not_filling or unavailable.
	TimeToFullState FillState `json:"time_to_full_state"`
	// TimeToFullSeconds is the free KV after demand over the fill rate
	// (filling), 0 (full); unavailable otherwise. Partial when some
	// servers report demand and others do not (a bound, not an answer).
	TimeToFullSeconds Value `json:"time_to_full_seconds"`
	// FillRate is Σ of the servers' least-squares slopes of used tokens
	// over the window, tokens/s (negative while draining).
	FillRate Value `json:"fill_rate_tokens_per_second"`
	// FreeAfterDemand is Σ capacity − Σ used − Σ demand, tokens.
	FreeAfterDemand Value `json:"free_after_demand_tokens"`
	// FillFloor is FillFloorPer15m of Σ capacity per 15 minutes, tokens/s.
	FillFloor Value `json:"fill_floor_tokens_per_second"`
	// FullByQueue is true when the pool is full only because of the
	// queued demand (free KV without it).
	FullByQueue bool `json:"full_by_queue,omitempty"`
	// FillDemandCounted is false when no server reports demand: the
	// forecast is the trend alone.
	FillDemandCounted bool `json:"fill_demand_counted"`
	// TrendSamples is the fewest samples of a server in the window and
	// TrendSeconds the shortest span they cover.
	TrendSamples int     `json:"trend_samples"`
	TrendSeconds float64 `json:"trend_seconds"`
	// TrendNote says why the forecast is unavailable; TrendWarming is
	// true when that is only too few samples yet (wait and it comes).
	TrendNote    string `json:"trend_note,omitempty"`
	TrendWarming bool   `json:"trend_warming,omitempty"`
}

// slope is the least-squares slope of used over time (seconds), the one
// PromQL's deriv computes; ok is false for fewer than two samples or
// samples all at one time.
func slope(ss []UsedSample) (float64, bool) {
	if len(ss) < 2 {
		return 0, false
	}
	t0 := ss[0].T
	var mx, my float64
	for _, s := range ss {
		mx += s.T.Sub(t0).Seconds()
		my += s.Used
	}
	n := float64(len(ss))
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for _, s := range ss {
		dx := s.T.Sub(t0).Seconds() - mx
		sxy += dx * (s.Used - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

// inWindow returns the samples with at − window < T ≤ at (PromQL's range
// selector: left-open).
func inWindow(ss []UsedSample, at time.Time, window time.Duration) []UsedSample {
	lo := at.Add(-window)
	i, j := 0, len(ss)
	for i < j && !ss[i].T.After(lo) {
		i++
	}
	for j > i && ss[j-1].T.After(at) {
		j--
	}
	return ss[i:j]
}

// PoolFill computes a pool's demand-aware time to full at at from its
// servers, over the window (FillWindow for the rules' semantics), with the
// semantics of the recording rules (docs/planning.md):
//
//	fill rate         = Σ slope(used over (at − window, at])
//	free after demand = Σ capacity − Σ used − Σ demand
//	floor             = Σ capacity × FillFloorPer15m / 900 s
//	time to full      = max(free after demand, 0) / rate   where rate > floor
//	                    0                                  where free after demand ≤ 0
//	                    not filling                        otherwise
//
// Unavailable when the pool has no server, a server has too few samples
// (min) or no whole capacity: a sum with a missing part is not a total.
// Demand: none reported, the trend alone; some but not all, partial.
func PoolFill(servers []FillServer, at time.Time, window time.Duration, min FillTrend) FillForecast {
	f := FillForecast{TimeToFullState: FillUnknown, TrendSamples: -1}
	fail := func(format string, args ...any) FillForecast {
		f.TimeToFullState, f.TimeToFullSeconds, f.FillRate, f.FreeAfterDemand = FillUnknown, Value{}, Value{}, Value{}
		f.TrendNote = fmt.Sprintf(format, args...)
		return f
	}
	if len(servers) == 0 {
		return fail("no server")
	}
	// A missing part first: no wait for a trend makes it whole.
	for _, s := range servers {
		if !s.Capacity.Trusted() {
			return fail("%s did not answer or reports no whole KV tokens", s.Name)
		}
	}
	var rate, capa, used, demand float64
	demanders := 0
	for _, s := range servers {
		ss := inWindow(s.Samples, at, window)
		span := 0.0
		if len(ss) > 0 {
			span = ss[len(ss)-1].T.Sub(ss[0].T).Seconds()
		}
		if f.TrendSamples < 0 || len(ss) < f.TrendSamples {
			f.TrendSamples = len(ss)
		}
		if f.TrendSeconds == 0 || span < f.TrendSeconds {
			f.TrendSeconds = span
		}
		k, ok := slope(ss)
		if !ok || len(ss) < min.MinSamples || span < min.MinSpan.Seconds() {
			f.TrendWarming = true
			return fail("%s has %d samples over %.0fs; the trend needs %d over %.0fs", s.Name, len(ss), span,
				max(min.MinSamples, 2), min.MinSpan.Seconds())
		}
		rate += k
		capa += s.Capacity.V
		used += ss[len(ss)-1].Used
		if s.Demand.Trusted() {
			demanders++
			demand += s.Demand.V
		}
	}
	prov := Derived
	if demanders > 0 && demanders < len(servers) {
		prov = Partial // the others' demand is unknown: free is an upper bound
	}
	f.FillDemandCounted = demanders > 0
	f.FillRate = Value{V: rate, Prov: Derived}
	f.FreeAfterDemand = saturate(capa-used-demand, prov)
	floor := capa * FillFloorPer15m / FillWindow.Seconds()
	f.FillFloor = Value{V: floor, Prov: Derived}
	switch free := f.FreeAfterDemand.V; {
	case free <= 0:
		f.TimeToFullState, f.TimeToFullSeconds = FillFull, Value{V: 0, Prov: prov}
		f.FullByQueue = demand > 0 && capa-used > 0
	case rate > floor:
		f.TimeToFullState, f.TimeToFullSeconds = FillFilling, saturate(free/rate, prov)
	default:
		f.TimeToFullState = FillNotFilling
	}
	return f
}

// UsedTrend keeps each server's recent used-token samples for PoolFill: at
// most window old (from the newest) and at most max per server, oldest
// first. It is not safe for concurrent use.
type UsedTrend struct {
	window time.Duration
	max    int
	by     map[string][]UsedSample
}

// NewUsedTrend returns a trend keeping window and at most maxSamples per
// server.
func NewUsedTrend(window time.Duration, maxSamples int) *UsedTrend {
	return &UsedTrend{window: window, max: max(maxSamples, 2), by: map[string][]UsedSample{}}
}

// Add records server name's used tokens at at. A sample not after the
// server's newest (a late target's previous scrape shown again) is
// ignored; a used value that is not whole (unknown, partial, implausible)
// restarts the server's trend: a slope across a gap in what is known is
// no trend.
func (t *UsedTrend) Add(name string, at time.Time, used Value) {
	ss := t.by[name]
	if !used.Trusted() {
		delete(t.by, name)
		return
	}
	if n := len(ss); n > 0 && !at.After(ss[n-1].T) {
		return
	}
	ss = append(ss, UsedSample{T: at, Used: used.V})
	lo := at.Add(-t.window)
	i := 0
	for i < len(ss)-1 && !ss[i].T.After(lo) {
		i++
	}
	if n := len(ss) - i; n > t.max {
		i += n - t.max
	}
	if i > 0 {
		ss = append(ss[:0:0], ss[i:]...)
	}
	t.by[name] = ss
}

// Samples returns name's samples, oldest first (shared: do not modify).
func (t *UsedTrend) Samples(name string) []UsedSample { return t.by[name] }

// Forget drops the servers not in keep (targets that went away).
func (t *UsedTrend) Forget(keep map[string]bool) {
	for n := range t.by {
		if !keep[n] {
			delete(t.by, n)
		}
	}
}

// TrendMinTop is what top needs before it shows a time to full: 3 samples
// over 30 s of each server.
var TrendMinTop = FillTrend{MinSamples: 3, MinSpan: 30 * time.Second}

// WithFill sets the time to full of each of plans (PlanPools' result for
// members) from the trend of its members at at; a member without a
// server (failed) or without whole used and capacity tokens leaves its
// pool unavailable.
func WithFill(plans []PoolPlan, members []PlanMember, t *UsedTrend, at time.Time, min FillTrend) {
	var gbuf [groupBuf]poolGroup[PlanMember]
	for _, g := range groupPools(members, func(m PlanMember) (PoolKey, *Server) { return m.Key, m.Server }, gbuf[:0]) {
		k := g.key
		fs := make([]FillServer, 0, len(g.items))
		for _, m := range g.items {
			f := FillServer{Name: m.Name, Samples: t.Samples(m.Name)}
			// A server without whole used tokens now is a missing part
			// (its trend restarts), not a trend still warming up.
			if m.Server != nil && m.Server.Used.Trusted() {
				f.Capacity, f.Demand = m.Server.Capacity, m.Server.Demand
			}
			fs = append(fs, f)
		}
		for j := range plans {
			if plans[j].PoolKey == k {
				f := PoolFill(fs, at, FillWindow, min)
				plans[j].FillForecast = &f
			}
		}
	}
}
