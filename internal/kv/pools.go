package kv

import "math"

// CachePool is one KV pool of a server beyond its primary one (not to be
// confused with Pool, the servers of one role in the fleet). The primary pool
// (full attention, on the GPU) is the server's Signals: the headline, its
// usage never a max over pools. Further pools are the pools of other
// attention types (sliding-window, Mamba state) and the cache tiers below
// the GPU (host memory, disk, remote stores, LMCache's L1 and L2). Every
// value carries its provenance and is unavailable where the engine does not
// say.
type CachePool struct {
	// Type is the attention type whose state the pool holds: PoolFull,
	// PoolSWA or PoolMamba.
	Type string `json:"pool_type"`
	// Tier is where the pool lives: one of the Tier* constants.
	Tier string `json:"tier"`
	// Name tells pools of one type and tier apart (an LMCache L2 adapter,
	// e.g. "fs"); "" when there is one.
	Name string `json:"name,omitempty"`
	// Unit is what Capacity and Used count: UnitTokens, UnitBytes or
	// UnitSlots (Mamba state slots, one per request).
	Unit string `json:"unit"`
	// Capacity is what the pool can hold, in Unit.
	Capacity Value `json:"capacity"`
	// Used is what it holds now, in Unit.
	Used Value `json:"used"`
	// UsageRatio is Used / Capacity, 0–1.
	UsageRatio Value `json:"usage_ratio"`
	// HitTokens are prompt tokens this pool served as prefix-cache hits,
	// cumulative since the engine started (a counter).
	HitTokens Value `json:"hit_tokens"`
	// HitRate is a hit-rate gauge the engine computes over its own window
	// (e.g. Dynamo KVBM's last 1,000 requests), 0–1: not a rate kvwatch
	// can recompute.
	HitRate Value `json:"hit_rate"`
	// LoadBytes and StoreBytes are the KV bytes moved between this tier and
	// the GPU, cumulative since the engine started (counters): loaded from
	// the tier into the GPU (a load, an onboard) and stored from the GPU into
	// the tier (a store, an offload). Only for tiers below the GPU.
	LoadBytes  Value `json:"load_bytes"`
	StoreBytes Value `json:"store_bytes"`
	// Note says what the engine's numbers do not mean, when that matters
	// (e.g. why a fill is unavailable).
	Note string `json:"note,omitempty"`
}

// Pool types.
const (
	PoolFull  = "full"
	PoolSWA   = "swa"
	PoolMamba = "mamba"
)

// Tiers.
const (
	TierGPU       = "gpu"
	TierHost      = "host"
	TierDisk      = "disk"
	TierRemote    = "remote"
	TierLMCacheL1 = "lmcache-l1"
	TierLMCacheL2 = "lmcache-l2"
)

// Units.
const (
	UnitTokens = "tokens"
	UnitBytes  = "bytes"
	UnitSlots  = "slots"
)

// PoolTypes and Tiers list the values in documentation order.
func PoolTypes() []string { return []string{PoolFull, PoolSWA, PoolMamba} }

// Tiers lists the tiers in documentation order, fastest first.
func Tiers() []string {
	return []string{TierGPU, TierHost, TierDisk, TierRemote, TierLMCacheL1, TierLMCacheL2}
}

// Complete fills what the pool's values imply: the ratio from used and
// capacity, used from the ratio and capacity, capacity from used and a
// ratio above 0. It never overwrites a value the engine gave.
func (p *CachePool) Complete() {
	switch {
	case !p.UsageRatio.OK():
		p.UsageRatio = p.Used.Div(p.Capacity)
	case !p.Used.OK() && p.Capacity.OK():
		p.Used = p.UsageRatio.Mul(p.Capacity)
	case !p.Capacity.OK() && p.Used.OK() && p.UsageRatio.V > 0:
		p.Capacity = p.Used.Div(p.UsageRatio)
	}
	for _, v := range []*Value{&p.Capacity, &p.Used, &p.UsageRatio} {
		// A ratio near 0 overflows the quotient (Div saturates at ±MaxFloat64).
		if v.OK() && (math.IsInf(v.V, 0) || math.IsNaN(v.V) || math.Abs(v.V) == math.MaxFloat64) {
			*v = Value{}
		}
	}
}

// Known reports whether the pool carries any known value.
func (p *CachePool) Known() bool {
	for _, v := range []Value{p.Capacity, p.Used, p.UsageRatio, p.HitTokens, p.HitRate, p.LoadBytes, p.StoreBytes} {
		if v.OK() {
			return true
		}
	}
	return false
}
