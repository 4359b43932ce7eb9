package engine

import "slices"

// Meaning is a known change between two dialects of one engine that
// changes what one of kvwatch's signals means or where it is read from,
// told apart by the family names a page declares: the new dialect
// declares Marker (and no longer declares Gone, when set). Names are
// canonical family names without a counter's _total suffix.
type Meaning struct {
	Engine string
	// Marker is a family the new dialect declares and the old one does not.
	Marker string
	// Gone is a family the old dialect declares and the new one does not
	// ("": the change adds a name only).
	Gone string
	// Since is the first release with the change, for a change that
	// shows in no name (versionMeanings; Marker is empty then).
	Since string
	// Text says which signal's meaning changed and the engine change that
	// did it, for people.
	Text string
}

// meanings are the known changes, from the engines' sources and trackers
// (see docs/engines.md, "When an engine changes under you").
var meanings = []Meaning{
	{Engine: "sglang", Marker: "sglang:num_prefill_bootstrap_queue_reqs", Gone: "sglang:num_prefill_prealloc_queue_reqs",
		Text: "SGLang renamed num_prefill_prealloc_queue_reqs to num_prefill_bootstrap_queue_reqs (sglang#24341): the PD bootstrap queue is read from the new name, and dashboards on the old one go empty"},
	{Engine: "sglang", Marker: "sglang:full_token_usage",
		Text: "SGLang's token_usage is max(full, swa, mamba) since sglang#22555, not the KV ratio: KV usage is read from full_token_usage and kv_used_tokens, and a token_usage panel now shows the fullest pool"},
	{Engine: "sglang", Marker: "sglang:kv_used_tokens", Gone: "sglang:num_used_tokens",
		Text: "SGLang reports kv_used_tokens and kv_evictable_tokens (sglang#22726): used is the non-evictable part, and evictable prefix cache becomes known"},
	{Engine: "dynamo", Marker: "dynamo_component_total_blocks", Gone: "dynamo_component_kvstats_total_blocks",
		Text: "Dynamo replaced the dynamo_component_kvstats_* gauges with total_blocks and gpu_cache_usage_percent per dp_rank (ai-dynamo/dynamo#5704): usage is read per DP rank from the new names, used blocks are no longer on the page, and dashboards on kvstats_ go empty"},
	{Engine: "vllm", Marker: "vllm:kv_cache_usage_perc", Gone: "vllm:gpu_cache_usage_perc",
		Text: "vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc (0.9.2; the old name is gone from 0.12): usage is read from the new name"},
	{Engine: "vllm", Marker: "vllm:prefix_cache_hits", Gone: "vllm:gpu_prefix_cache_hits",
		Text: "vLLM renamed gpu_prefix_cache_{hits,queries} to prefix_cache_{hits,queries} (0.9.2); the old counters counted blocks in 0.8.x, the new ones tokens: the prefix hit ratio steps across the upgrade"},
}

// Meanings returns the known changes of engine between a page declaring
// the families before and one declaring after (both sorted), in table
// order: those whose marker or gone name appeared or disappeared with the
// page (a downgrade names the change too).
func Meanings(engine string, before, after []string) []Meaning {
	var out []Meaning
	has := func(list []string, name string) bool {
		_, ok := slices.BinarySearch(list, name)
		return ok
	}
	for _, m := range meanings {
		if m.Engine != engine {
			continue
		}
		if has(after, m.Marker) != has(before, m.Marker) || (m.Gone != "" && has(after, m.Gone) != has(before, m.Gone)) {
			out = append(out, m)
		}
	}
	return out
}
