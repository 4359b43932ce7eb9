package signal

// Labels of the pool families: which further KV pool of a server a series
// is about (kv.CachePool). LabelKVTier has the name of LabelTier, on other
// families: there it is the history's resolution tier, here the cache tier.
const (
	LabelPoolType = "pool_type" // full, swa or mamba: the attention type the pool holds
	LabelKVTier   = "tier"      // gpu, host, disk, remote, lmcache-l1, lmcache-l2
	LabelPoolName = "pool_name" // tells pools of one type and tier apart (an LMCache L2 adapter); "" when there is one
)

// LabelDirection says which way a cache tier's traffic went:
// DirectionLoad (tier → GPU) or DirectionStore (GPU → tier).
const (
	LabelDirection = "direction"
	DirectionLoad  = "load"
	DirectionStore = "store"
)

// CachePoolLabels are the labels of every cache-pool family beyond ServerLabels.
func CachePoolLabels() []string { return []string{LabelPoolType, LabelKVTier, LabelPoolName} }

// The pool families: a server's KV pools beyond its primary one (full
// attention on the GPU, which the kvwatch_kv_* families describe):
// sliding-window and Mamba pools of hybrid models, and the cache tiers
// below the GPU. The unit is in the name, as Prometheus wants: tiers in
// host memory or storage are measured in bytes by some engines (LMCache)
// and in tokens by others (SGLang HiCache).
var (
	KVPoolCapacityTokens = Metric{Name: "kvwatch_kv_pool_capacity_tokens", Type: Gauge, Unit: "tokens", Labels: CachePoolLabels(),
		Help: "Capacity of a further KV pool or cache tier, in tokens (summed over DP ranks)."}
	KVPoolCapacityBytes = Metric{Name: "kvwatch_kv_pool_capacity_bytes", Type: Gauge, Unit: "bytes", Labels: CachePoolLabels(),
		Help: "Capacity of a further KV pool or cache tier, in bytes, where the engine measures it in bytes."}
	KVPoolUsedTokens = Metric{Name: "kvwatch_kv_pool_used_tokens", Type: Gauge, Unit: "tokens", Labels: CachePoolLabels(),
		Help: "What a further KV pool or cache tier holds now, in tokens."}
	KVPoolUsedBytes = Metric{Name: "kvwatch_kv_pool_used_bytes", Type: Gauge, Unit: "bytes", Labels: CachePoolLabels(),
		Help: "What a further KV pool or cache tier holds now, in bytes."}
	KVPoolCapacitySlots = Metric{Name: "kvwatch_kv_pool_capacity_slots", Type: Gauge, Unit: "slots", Labels: CachePoolLabels(),
		Help: "Capacity of a state pool measured in slots (a hybrid model's Mamba state slots, one per request)."}
	KVPoolUsedSlots = Metric{Name: "kvwatch_kv_pool_used_slots", Type: Gauge, Unit: "slots", Labels: CachePoolLabels(),
		Help: "State slots a pool holds now (a hybrid model's Mamba pool)."}
	KVPoolUsageRatio = Metric{Name: "kvwatch_kv_pool_usage_ratio", Type: Gauge, Unit: "ratio", Labels: CachePoolLabels(),
		Help: "Used over capacity (0-1) of a further KV pool or cache tier."}
	KVPoolHitTokens = Metric{Name: "kvwatch_kv_pool_hit_tokens_total", Type: Counter, Unit: "tokens", Labels: CachePoolLabels(),
		Help: "Prompt tokens a cache tier served as prefix-cache hits (the tier's share of hits = rate(this) / rate(kvwatch_prefix_cache_hit_tokens_total))."}
	KVPoolHitRate = Metric{Name: "kvwatch_kv_pool_hit_ratio", Type: Gauge, Unit: "ratio", Labels: CachePoolLabels(),
		Help: "Hit rate (0-1) of a cache tier as the engine computes it over its own window (Dynamo KVBM: the last 1,000 requests)."}
	KVPoolTransferBytes = Metric{Name: "kvwatch_kv_pool_transfer_bytes_total", Type: Counter, Unit: "bytes",
		Labels: append(CachePoolLabels(), LabelDirection),
		Help:   "KV bytes moved between a cache tier and the GPU, by direction: load (tier to GPU) or store (GPU to tier)."}
)

// Pools lists the pool families in documentation order.
func Pools() []Metric {
	return []Metric{KVPoolCapacityTokens, KVPoolCapacityBytes, KVPoolUsedTokens, KVPoolUsedBytes,
		KVPoolCapacitySlots, KVPoolUsedSlots, KVPoolUsageRatio, KVPoolHitTokens, KVPoolHitRate, KVPoolTransferBytes}
}
