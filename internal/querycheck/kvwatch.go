package querycheck

import (
	"slices"

	"github.com/kvwatch/kvwatch/internal/catalog"
	"github.com/kvwatch/kvwatch/internal/signal"
)

// KVWatchCatalog is the default catalog plus kvwatch's own exported
// metrics (from package signal), so kvwatch's generated dashboards and
// rules are known offline. Families that exist only in some deployments
// carry the condition (catalog.Metric.Conditional): against a store
// without them, their absence is a warning, not an error.
func KVWatchCatalog() *catalog.Catalog {
	def := catalog.Default()
	ms := def.Metrics()
	conds := kvwatchConditions()
	for _, m := range kvwatchFamilies() {
		t := catalog.Gauge
		if m.Type == signal.Counter {
			t = catalog.Counter
		}
		l := slices.Clone(m.Labels)
		if !m.Self {
			l = append(signal.ServerLabels(), l...)
		}
		ms = append(ms, catalog.Metric{Engine: "kvwatch", Name: m.Name, Type: t, Labels: l, Source: "kvwatch internal/signal/signal.go", Conditional: conds[m.Name]})
	}
	es := append(def.Engines(), catalog.Engine{Name: "kvwatch", Display: "kvwatch", Prefixes: []string{"kvwatch_"}, Source: "kvwatch internal/signal/signal.go"})
	return catalog.New(ms, def.Renames(), es).WithChanges(def.Changes())
}

// kvwatchFamilies are every family kvwatch serve exports: signal.All and
// the remote writer's own.
func kvwatchFamilies() []signal.Metric {
	return append(signal.All(), signal.RemoteWrite()...)
}

// kvwatchConditions says when each of kvwatch's own families that not
// every deployment has exists at all (docs/metrics.md): a calm fleet of
// single-rank servers without cache tiers has none of them.
func kvwatchConditions() map[string]string {
	out := map[string]string{signal.TargetScrapeError.Name: "only while a target's scrapes fail"}
	set := func(cond string, ms ...signal.Metric) {
		for _, m := range ms {
			out[m.Name] = cond
		}
	}
	set("only for engines that report evictable prefix cache (SGLang)", signal.KVEvictableTokens)
	set("only for engines that reserve KV at admission (TGI)", signal.KVReservedRatio)
	set("only for servers that report queued KV demand (SGLang PD decode)", signal.KVDemandTokens, signal.KVDemandRatio)
	set("only for servers of more than one DP rank", signal.RankKVUsageRatio, signal.RankKVUsedTokens, signal.RankKVCapacityTokens)
	set("only for servers with further KV pools or cache tiers (SWA or Mamba pools, SGLang HiCache, vLLM offloading, LMCache, Dynamo KVBM)",
		signal.KVPoolCapacityTokens, signal.KVPoolCapacityBytes, signal.KVPoolUsedTokens, signal.KVPoolUsedBytes,
		signal.KVPoolCapacitySlots, signal.KVPoolUsedSlots, signal.KVPoolUsageRatio, signal.KVPoolHitTokens, signal.KVPoolHitRate, signal.KVPoolTransferBytes)
	set("only while requests run", signal.KVPerRunningRequestTokens, signal.KVWorkloadHeadroomRequests, signal.PoolWorkloadHeadroomRequests,
		signal.KVCapacityRequests, signal.ConcurrencyRequests, signal.BindingPool)
	set("only for hybrid models whose engine reports its state pool's counts (SGLang Mamba or SWA pools)", signal.StateCapacityRequests, signal.StateHeadroomRequests)
	set("only once requests have finished, on engines with per-request token histograms (vLLM, SGLang)",
		signal.FinishedRequestTokens, signal.FinishedHeadroomRequests, signal.PoolFinishedHeadroomRequests)
	set("only for pools of more than one server", signal.DrainMarginTokens, signal.DrainMarginRatio,
		signal.PoolDrainMarginTokens, signal.PoolDrainMarginRatio)
	set("only for routers", signal.RouterWorkers)
	set("only while serve remote-writes (--remote-write.url)", signal.RemoteWrite()...)
	set("only while serve keeps a history (--history)", signal.History()...)
	set("only on serve's own /metrics, while its history keeps 5 days (not in serve's history)", signal.Projection()...)
	for _, m := range kvwatchFamilies() {
		if _, ok := out[m.Name]; !ok && m.Self {
			// serve's history holds the fleet's series, not its own.
			out[m.Name] = "only where serve's own /metrics are scraped or pushed (not in serve's history)"
		}
	}
	return out
}

// normalizedAs names the kvwatch_* series that kvwatch exports for an
// engine's own metric (what its adapter reads it into, internal/engine),
// for a store that holds kvwatch's series but not the engines' (kvwatch
// serve, or a Prometheus that scrapes only serve).
func normalizedAs() map[string]string {
	waiting := signal.RequestsQueued.Name + `{` + signal.LabelQueue + `="` + signal.QueueWaiting + `"}`
	queue := func(q string) string {
		return signal.RequestsQueued.Name + `{` + signal.LabelQueue + `="` + q + `"}`
	}
	transfer := func(d string) string {
		return signal.KVPoolTransferBytes.Name + `{` + signal.LabelKVTier + `="host",` + signal.LabelDirection + `="` + d + `"}`
	}
	return map[string]string{
		// kvwatch's ratio is the full-attention KV pool's; token_usage is
		// that pool's only on a model without SWA or Mamba layers (#22555).
		"sglang:token_usage":                      signal.KVUsageRatio.Name,
		"sglang:full_token_usage":                 signal.KVUsageRatio.Name,
		"sglang:num_prefill_prealloc_queue_reqs":  queue(signal.QueueBootstrap),
		"sglang:kv_used_tokens":                   signal.KVUsedTokens.Name,
		"sglang:num_used_tokens":                  signal.KVUsedTokens.Name,
		"sglang:kv_available_tokens":              signal.KVAvailableTokens.Name,
		"sglang:kv_evictable_tokens":              signal.KVEvictableTokens.Name,
		"sglang:max_total_num_tokens":             signal.KVCapacityTokens.Name,
		"sglang:context_len":                      signal.ContextLengthTokens.Name,
		"sglang:num_running_reqs":                 signal.RequestsRunning.Name,
		"sglang:num_queue_reqs":                   waiting,
		"sglang:num_prefill_bootstrap_queue_reqs": queue(signal.QueueBootstrap),
		"sglang:num_prefill_inflight_queue_reqs":  queue(signal.QueueInflight),
		"sglang:num_decode_prealloc_queue_reqs":   queue(signal.QueuePrealloc),
		"sglang:num_decode_transfer_queue_reqs":   queue(signal.QueueTransfer),
		"sglang:num_retracted_requests_total":     signal.Preemptions.Name,
		"sglang:cached_tokens_total":              signal.PrefixCacheHitTokens.Name,
		"sglang:prompt_tokens_total":              signal.PromptTokens.Name,
		"sglang:generation_tokens_total":          signal.GenerationTokens.Name,
		"vllm:kv_cache_usage_perc":                signal.KVUsageRatio.Name,
		"vllm:gpu_cache_usage_perc":               signal.KVUsageRatio.Name,
		"vllm:cache_config_info":                  signal.KVCapacityTokens.Name,
		"vllm:num_requests_running":               signal.RequestsRunning.Name,
		"vllm:num_requests_waiting":               waiting,
		"vllm:prefix_cache_hits_total":            signal.PrefixCacheHitTokens.Name,
		"vllm:prefix_cache_queries_total":         signal.PrefixCacheQueryTokens.Name,
		"vllm:num_preemptions_total":              signal.Preemptions.Name,
		"vllm:prompt_tokens_total":                signal.PromptTokens.Name,
		"vllm:generation_tokens_total":            signal.GenerationTokens.Name,
		"vllm:kv_offload_load_bytes_total":        transfer(signal.DirectionLoad),
		"vllm:kv_offload_store_bytes_total":       transfer(signal.DirectionStore),
		"vllm:kv_offload_total_bytes_total":       signal.KVPoolTransferBytes.Name + `{` + signal.LabelKVTier + `="host"}`,
		"llamacpp:kv_cache_usage_ratio":           signal.KVUsageRatio.Name,
		"llamacpp:kv_cache_tokens":                signal.KVUsedTokens.Name,
		"llamacpp:requests_processing":            signal.RequestsRunning.Name,
		"llamacpp:requests_deferred":              waiting,
		"llamacpp:prompt_tokens_total":            signal.PromptTokens.Name,
		"llamacpp:tokens_predicted_total":         signal.GenerationTokens.Name,
		"tgi_batch_max_total_tokens":              signal.KVCapacityTokens.Name,
		"tgi_batch_current_max_tokens":            signal.KVUsedTokens.Name,
		"tgi_batch_current_size":                  signal.RequestsRunning.Name,
		"tgi_queue_size":                          waiting,
		"trtllm_kv_cache_utilization":             signal.KVUsageRatio.Name,
		"trtllm_num_requests_running":             signal.RequestsRunning.Name,
		"trtllm_num_active_requests":              signal.RequestsRunning.Name,
		"trtllm_server_queue_length":              waiting,
		"trtllm_num_requests_waiting":             waiting,
		"trtllm_prompt_tokens_total":              signal.PromptTokens.Name,
		"trtllm_generation_tokens_total":          signal.GenerationTokens.Name,
		"trtllm_kv_cache_onboard_bytes_total":     transfer(signal.DirectionLoad),
		"trtllm_kv_cache_offload_bytes_total":     transfer(signal.DirectionStore),
		"lmdeploy:gpu_cache_usage_perc":           signal.KVUsageRatio.Name,
		"lmdeploy:num_requests_running":           signal.RequestsRunning.Name,
		"lmdeploy:num_requests_waiting":           waiting,
		"lmdeploy:prompt_tokens_total":            signal.PromptTokens.Name,
		"lmdeploy:generation_tokens_total":        signal.GenerationTokens.Name,
	}
}
