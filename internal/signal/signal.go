// Package signal defines every metric kvwatch exports: name, type, help text,
// unit and labels. It is the single source of truth for the exporter, the
// generated recording and alert rules, the dashboards and docs/metrics.md, so
// none of them can drift from another; and of the paths of serve's health
// checks, which the generated manifests probe (paths.go). It defines names
// only; it does not collect, store or serve anything.
package signal

import "strings"

// Type is the Prometheus metric type of an exported metric.
type Type string

// Metric types used by kvwatch.
const (
	Gauge   Type = "gauge"
	Counter Type = "counter"
)

// Metric describes one exported metric family.
type Metric struct {
	// Name is the full exported name, e.g. "kvwatch_kv_usage_ratio".
	Name string
	Type Type
	// Unit is what one unit of the value is: "tokens", "requests", "ratio"
	// (0–1), "seconds", "bytes", "" for info or state metrics.
	Unit string
	Help string
	// Labels are the labels beyond the identity labels (ServerLabels, which
	// target families carry too) that the family always carries.
	Labels []string
	// Target is true for families about a scrape target rather than a
	// normalized server signal; they carry ServerLabels too.
	Target bool
	// Self is true for families about kvwatch serve itself; they carry no
	// identity labels.
	Self bool
	// Pool is true for families about a pool of servers; they carry
	// PoolLabels instead of ServerLabels (planning.go).
	Pool bool
}

// Identity labels. Every per-server series carries ServerLabels; the
// inference cluster and the pool come from the target's config (its labels
// cluster and pool) and are empty (absent) when unset.
//
// The inference cluster is exported as kv_cluster, not cluster:
// kube-prometheus and multi-cluster Thanos or Mimir setups put the
// Kubernetes cluster in a cluster label (an external label, or a target
// label of the scrape), and a series' own cluster label would hide it
// (docs/metrics.md, "Labels").
const (
	LabelServer  = "server"     // the target's name, by default host:port
	LabelRole    = "role"       // prefill, decode, unified, router or cache
	LabelCluster = "kv_cluster" // the inference cluster: the target's cluster label in the config file
	LabelPool    = "pool"       // from the config file
	LabelDPRank  = "dp_rank"    // data-parallel rank, as the engine labels it
	LabelQueue   = "queue"      // waiting, prealloc, bootstrap, transfer, inflight
	LabelRequest = "request_tokens"
	LabelSignal  = "signal"
	LabelProv    = "provenance"
	LabelReason  = "reason"
	LabelEngine  = "engine"
	LabelGen     = "generation"
	LabelModel   = "model"
	LabelState   = "state"
)

// ServerLabels are the identity labels of every per-server series, in order.
func ServerLabels() []string {
	return []string{LabelServer, LabelRole, LabelCluster, LabelPool}
}

// Queue label values of RequestsQueued.
const (
	QueueWaiting   = "waiting"   // the engine's admission queue
	QueuePrealloc  = "prealloc"  // PD decode: waiting for KV pre-allocation
	QueueBootstrap = "bootstrap" // PD prefill: bootstrap (older SGLang: prealloc) queue
	QueueTransfer  = "transfer"  // PD decode: KV being transferred in
	QueueInflight  = "inflight"  // PD prefill: KV being sent out
)

// Queues lists the queue label values in display order.
func Queues() []string {
	return []string{QueueWaiting, QueuePrealloc, QueueBootstrap, QueueTransfer, QueueInflight}
}

// Exported metric families. Unavailable values are never exported as 0: the
// series is absent, and SignalInfo says why.
var (
	KVCapacityTokens = Metric{Name: "kvwatch_kv_capacity_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV cache slots the server can hold, in tokens (summed over DP ranks, TP duplicates collapsed)."}
	KVUsedTokens = Metric{Name: "kvwatch_kv_used_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV cache slots held by admitted requests and not reclaimable, in tokens."}
	KVAvailableTokens = Metric{Name: "kvwatch_kv_available_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV cache slots a new request can get (capacity minus used; evictable prefix cache counts as available), in tokens."}
	KVEvictableTokens = Metric{Name: "kvwatch_kv_evictable_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV cache slots holding reusable prefix cache that can be reclaimed, in tokens (only where the engine reports it)."}
	KVUsageRatio = Metric{Name: "kvwatch_kv_usage_ratio", Type: Gauge, Unit: "ratio",
		Help: "Used over capacity (0-1): how full the KV cache is."}
	KVReservedRatio = Metric{Name: "kvwatch_kv_reserved_ratio", Type: Gauge, Unit: "ratio",
		Help: "KV reserved at admission but not yet written, over capacity (0-1): TGI's admission reservation."}
	KVDemandTokens = Metric{Name: "kvwatch_kv_demand_tokens", Type: Gauge, Unit: "tokens",
		Help: "KV that requests still waiting need, in tokens (SGLang PD decode: waiting for pre-allocation); not held, and may exceed capacity under overload."}
	KVDemandRatio = Metric{Name: "kvwatch_kv_demand_ratio", Type: Gauge, Unit: "ratio",
		Help: "Queued KV demand over capacity: 0 or more, unbounded above (above 1 the queue alone would overfill the cache)."}
	KVHeadroomRequests = Metric{Name: "kvwatch_kv_headroom_requests", Type: Gauge, Unit: "requests",
		Help:   "How many more requests of request_tokens tokens fit in the free KV cache (per DP rank, summed).",
		Labels: []string{LabelRequest}}
	ContextLengthTokens = Metric{Name: "kvwatch_context_length_tokens", Type: Gauge, Unit: "tokens",
		Help: "The server's maximum context length, in tokens."}
	RequestsRunning = Metric{Name: "kvwatch_requests_running", Type: Gauge, Unit: "requests",
		Help: "Requests in the running batch."}
	RequestsQueued = Metric{Name: "kvwatch_requests_queued", Type: Gauge, Unit: "requests",
		Help:   "Requests waiting, by queue: waiting (admission), and the PD queues prealloc, bootstrap, transfer, inflight.",
		Labels: []string{LabelQueue}}
	PrefixCacheHitTokens = Metric{Name: "kvwatch_prefix_cache_hit_tokens_total", Type: Counter, Unit: "tokens",
		Help: "Prompt tokens found in the prefix cache."}
	PrefixCacheQueryTokens = Metric{Name: "kvwatch_prefix_cache_query_tokens_total", Type: Counter, Unit: "tokens",
		Help: "Prompt tokens looked up in the prefix cache (hit ratio = rate(hit) / rate(query))."}
	Preemptions = Metric{Name: "kvwatch_preemptions_total", Type: Counter, Unit: "requests",
		Help: "Requests preempted (vLLM) or retracted (SGLang) because the KV cache ran out."}
	PromptTokens = Metric{Name: "kvwatch_prompt_tokens_total", Type: Counter, Unit: "tokens",
		Help: "Prompt (prefill) tokens processed."}
	GenerationTokens = Metric{Name: "kvwatch_generation_tokens_total", Type: Counter, Unit: "tokens",
		Help: "Generation (decode) tokens produced."}
	RankSpreadRatio = Metric{Name: "kvwatch_kv_rank_spread_ratio", Type: Gauge, Unit: "ratio",
		Help: "Highest minus lowest KV usage ratio across the server's DP ranks (0 with one rank)."}
	// The rank families are exported once per DP rank, and only for servers
	// with more than one: TP and PP ranks of one DP rank hold the same KV, and
	// with one DP rank the series would repeat the server's.
	RankKVUsageRatio = Metric{Name: "kvwatch_rank_kv_usage_ratio", Type: Gauge, Unit: "ratio",
		Help:   "KV usage ratio (0-1) per DP rank (TP and PP ranks collapsed by maximum).",
		Labels: []string{LabelDPRank}}
	RankKVUsedTokens = Metric{Name: "kvwatch_rank_kv_used_tokens", Type: Gauge, Unit: "tokens",
		Help:   "KV used tokens per DP rank (TP and PP ranks collapsed by maximum).",
		Labels: []string{LabelDPRank}}
	RankKVCapacityTokens = Metric{Name: "kvwatch_rank_kv_capacity_tokens", Type: Gauge, Unit: "tokens",
		Help:   "KV capacity in tokens per DP rank (TP and PP ranks collapsed by maximum).",
		Labels: []string{LabelDPRank}}
	RouterWorkers = Metric{Name: "kvwatch_router_workers", Type: Gauge, Unit: "",
		Help: "Workers behind a router, by state (healthy, total).", Labels: []string{LabelState}}
	ServerInfo = Metric{Name: "kvwatch_server_info", Type: Gauge, Unit: "",
		Help:   "Always 1; labels say which engine, metric-name generation and model the server runs.",
		Labels: []string{LabelEngine, LabelGen, LabelModel}}
	SignalInfo = Metric{Name: "kvwatch_signal_info", Type: Gauge, Unit: "",
		Help:   "Always 1; says where each signal of a server comes from: direct, derived, reserved, partial (some DP ranks did not report it: not exported), implausible (see kvwatch_target_warnings: not exported) or unavailable.",
		Labels: []string{LabelSignal, LabelProv}}

	TargetUp = Metric{Name: "kvwatch_target_up", Type: Gauge, Unit: "", Target: true,
		Help: "1 if the last scrape of the target succeeded and was understood, else 0."}
	TargetScrapeDuration = Metric{Name: "kvwatch_target_scrape_duration_seconds", Type: Gauge, Unit: "seconds", Target: true,
		Help: "Duration of the last scrape of the target."}
	TargetScrapeBytes = Metric{Name: "kvwatch_target_scrape_body_bytes", Type: Gauge, Unit: "bytes", Target: true,
		Help: "Decompressed body size of the last scrape of the target."}
	TargetLastSuccess = Metric{Name: "kvwatch_target_last_success_timestamp_seconds", Type: Gauge, Unit: "seconds", Target: true,
		Help: "Unix time of the last successful scrape of the target (for staleness)."}
	TargetScrapeError = Metric{Name: "kvwatch_target_scrape_error", Type: Gauge, Unit: "", Target: true,
		Help:   "1 for the reason the last scrape failed (" + strings.Join(Reasons[:], ", ") + "); absent when it succeeded.",
		Labels: []string{LabelReason}}
	TargetWarnings = Metric{Name: "kvwatch_target_warnings", Type: Gauge, Unit: "", Target: true,
		Help:   "Warnings about the target's last page, by reason (negative, used_over_capacity, too_large, duplicate_series, two_engines, mixed_dialect, dialect_changed, mixed_escaping, version_mismatch): the values concerned by the first five are not exported; 0 when none.",
		Labels: []string{LabelReason}}
	TargetScrapes = Metric{Name: "kvwatch_target_scrapes_total", Type: Counter, Unit: "", Target: true,
		Help: "Scrapes of the target."}
	TargetScrapeFailures = Metric{Name: "kvwatch_target_scrape_failures_total", Type: Counter, Unit: "", Target: true,
		Help: "Failed scrapes of the target, by reason.", Labels: []string{LabelReason}}
	TargetInfo = Metric{Name: "kvwatch_target_info", Type: Gauge, Unit: "", Target: true,
		Help:   "Always 1; labels say how the target's last page was written: engine, version (where the engine says it on its version endpoint or llama.cpp's /props; empty otherwise), fingerprint (a hash of the family names kvwatch reads that it declares), format (Prometheus' scrape_protocols names) and escaping (underscores when colon names came as sglang_x, else what the page declares, else none).",
		Labels: []string{LabelEngine, LabelVersion, LabelFingerprint, LabelFormat, LabelEscaping}}
	TargetChanges = Metric{Name: "kvwatch_target_changes_total", Type: Counter, Unit: "", Target: true,
		Help:   "Changes of the target's page from one scrape to the next, by what changed (" + strings.Join(Changes[:], ", ") + "): an engine upgrade, a restart with other flags, another scraper setting; 0 while nothing changed.",
		Labels: []string{LabelWhat}}
)

// Labels of kvwatch_target_info and kvwatch_target_changes_total.
const (
	LabelVersion     = "version"
	LabelFingerprint = "fingerprint"
	LabelFormat      = "format"
	LabelEscaping    = "escaping"
	LabelWhat        = "what"
)

// What of a target's page can change (kvwatch_target_changes_total's what
// label): the engine, its version, the fingerprint of its metric names, the exposition
// format, the escaping of its colon names.
const (
	ChangeEngine      = "engine"
	ChangeVersion     = "version"
	ChangeFingerprint = "fingerprint"
	ChangeFormat      = "format"
	ChangeEscaping    = "escaping"
)

// Changes lists every change in documentation order.
var Changes = [...]string{ChangeEngine, ChangeVersion, ChangeFingerprint, ChangeFormat, ChangeEscaping}

// Families about kvwatch serve itself.
var (
	ConfigReloadSuccess = Metric{Name: "kvwatch_config_last_reload_successful", Type: Gauge, Unit: "", Self: true,
		Help: "1 if the last config reload (start, SIGHUP, POST /-/reload or a changed file_sd file) succeeded, else 0; a failed reload keeps the previous config running."}
	ConfigReloadTime = Metric{Name: "kvwatch_config_last_reload_success_timestamp_seconds", Type: Gauge, Unit: "seconds", Self: true,
		Help: "Unix time of the last successful config reload."}
	ScrapeDeadlineMisses = Metric{Name: "kvwatch_scrape_deadline_misses_total", Type: Counter, Unit: "", Self: true,
		Help: "Scheduled scrapes that could not start on time because the previous scrape of the same target (or the wait for a free scrape slot) was still running."}
	Targets = Metric{Name: "kvwatch_targets", Type: Gauge, Unit: "", Self: true,
		Help: "Targets serve scrapes (config file, command line, file_sd and service discovery)."}
)

// LabelTier is the label of the history families that are per tier:
// TierFull (every sample of the newest --history.full-resolution) or
// TierDownsampled (one per --history.downsample-step before that).
const (
	LabelTier       = "tier"
	TierFull        = "full"
	TierDownsampled = "downsampled"
)

// LabelLimit is the label of the history's series-limit counters: the
// limit that was reached, named by its config key under history.
const (
	LabelLimit              = "limit"
	LimitMaxSeries          = "max_series"
	LimitMaxSeriesPerTarget = "max_series_per_target"
)

// Families about serve's in-memory history (present with --history).
var (
	HistorySeries = Metric{Name: "kvwatch_history_series", Type: Gauge, Unit: "", Self: true,
		Help: "Series held in the in-memory history."}
	HistorySamples = Metric{Name: "kvwatch_history_samples", Type: Gauge, Unit: "", Self: true,
		Help: "Samples held in the in-memory history, by tier (full resolution or downsampled).", Labels: []string{LabelTier}}
	HistoryChunkBytes = Metric{Name: "kvwatch_history_chunk_bytes", Type: Gauge, Unit: "bytes", Self: true,
		Help: "Encoded size of the history's samples, by tier (open chunks at their buffer's capacity).", Labels: []string{LabelTier}}
	HistoryOffHeapBytes = Metric{Name: "kvwatch_history_off_heap_bytes", Type: Gauge, Unit: "bytes", Self: true,
		Help: "Memory mapped outside the Go heap for the history's closed chunks (not in go_memstats_*; part of process_resident_memory_bytes)."}
	HistoryDropped = Metric{Name: "kvwatch_history_samples_dropped_total", Type: Counter, Unit: "", Self: true,
		Help: "Samples the history refused because they were not newer than the series' last one."}
	HistorySeriesEvicted = Metric{Name: "kvwatch_history_series_evicted_total", Type: Counter, Unit: "", Self: true,
		Help:   "Stale series (absent from the latest gather) the history dropped with their samples to make room for new ones, by the series limit reached (history.max_series or history.max_series_per_target).",
		Labels: []string{LabelLimit}}
	HistorySeriesRefused = Metric{Name: "kvwatch_history_series_refused_total", Type: Counter, Unit: "", Self: true,
		Help:   "New series the history did not record because a series limit was reached and no stale series was left to drop, by limit; a series counts at every gather that brings it.",
		Labels: []string{LabelLimit}}
)

// History lists the families about serve's history in documentation order.
func History() []Metric {
	return []Metric{HistorySeries, HistorySamples, HistoryChunkBytes, HistoryOffHeapBytes, HistoryDropped,
		HistorySeriesEvicted, HistorySeriesRefused}
}

// Server lists the per-server normalized families in documentation order.
func Server() []Metric {
	return []Metric{KVCapacityTokens, KVUsedTokens, KVAvailableTokens, KVEvictableTokens,
		KVUsageRatio, KVReservedRatio, KVDemandTokens, KVDemandRatio, KVHeadroomRequests, ContextLengthTokens,
		RequestsRunning, RequestsQueued, PrefixCacheHitTokens, PrefixCacheQueryTokens,
		Preemptions, PromptTokens, GenerationTokens, RankSpreadRatio,
		RankKVUsageRatio, RankKVUsedTokens, RankKVCapacityTokens, RouterWorkers,
		ServerInfo, SignalInfo}
}

// Target lists the per-target scrape health families in documentation order.
func Target() []Metric {
	return []Metric{TargetUp, TargetScrapeDuration, TargetScrapeBytes, TargetLastSuccess,
		TargetScrapeError, TargetWarnings, TargetScrapes, TargetScrapeFailures, TargetInfo, TargetChanges}
}

// Self lists the families about kvwatch serve itself in documentation order.
func Self() []Metric {
	return []Metric{ConfigReloadSuccess, ConfigReloadTime, ScrapeDeadlineMisses, Targets}
}

// All lists every exported kvwatch_* family.
func All() []Metric {
	return append(append(append(append(append(append(append(append(Server(), Pools()...), Target()...), Self()...), Web()...), History()...), Planning()...), PoolPlanning()...), Projection()...)
}

// Signal names used as the signal label of SignalInfo.
const (
	SigCapacity      = "capacity"
	SigUsed          = "used"
	SigEvictable     = "evictable"
	SigUsageRatio    = "usage_ratio"
	SigReservedRatio = "reserved_ratio"
	SigDemandRatio   = "demand_ratio"
	SigRunning       = "running"
	SigQueued        = "queued"
	SigPrefixHit     = "prefix_hit"
	SigPreemptions   = "preemptions"
	SigPromptTokens  = "prompt_tokens"
	SigGenTokens     = "generation_tokens"
)

// Failure reasons for TargetScrapeError and TargetScrapeFailures.
const (
	ReasonRefused   = "refused"
	ReasonTimeout   = "timeout"
	ReasonHTTP404   = "http_404" // 404 on a metrics path: the engine's own answer with metrics off (SGLang, LMDeploy), or nothing served there
	ReasonHTTP501   = "http_501" // 501: metrics are off (llama.cpp without --metrics)
	ReasonHTTPError = "http_error"
	// ReasonNotMetrics: a 2xx answer that is not an exposition (HTML,
	// JSON, other text).
	ReasonNotMetrics    = "not_metrics"
	ReasonParse         = "parse"
	ReasonTooLarge      = "too_large"
	ReasonTruncated     = "truncated"
	ReasonUnknownEngine = "unknown_engine"
	ReasonLimit         = "limit"
	ReasonRedirect      = "redirect"
	ReasonTLS           = "tls" // certificate, handshake, or http:// to a TLS port and https:// to a plain one
	ReasonClosed        = "closed"
	// ReasonWrongPath: the URL's path is no metrics path (an OpenAI base
	// URL, a health check, a typo of /metrics) and the server answers no
	// metrics page there.
	ReasonWrongPath = "wrong_path"
	// ReasonWrongPort: the port is an engine's API port and the engine
	// serves metrics on a listener of their own (the SGLang router,
	// Triton).
	ReasonWrongPort = "wrong_port"
	// ReasonAuth: 401 or 403, credentials wanted or refused.
	ReasonAuth  = "auth"
	ReasonOther = "other"
)

// Reasons lists every failure reason, other last: serve counts failures
// per reason in this order, and the help of TargetScrapeError names them.
var Reasons = [...]string{ReasonRefused, ReasonTimeout, ReasonHTTP404, ReasonHTTP501,
	ReasonHTTPError, ReasonNotMetrics, ReasonParse, ReasonTooLarge,
	ReasonTruncated, ReasonUnknownEngine, ReasonLimit, ReasonRedirect,
	ReasonTLS, ReasonClosed, ReasonWrongPath, ReasonWrongPort, ReasonAuth, ReasonOther}
