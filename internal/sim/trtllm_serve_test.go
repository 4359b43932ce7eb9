package sim

import (
	"math"
	"testing"
	"time"
)

// TestTRTLLMServeVersions: the current collector (@050f80de) writes
// running and queued as num_requests_{running,waiting} beside the block
// gauges; the older one writes them as num_active_requests and
// server_queue_length, with the utilization and the prompt counters but
// no block gauge, limit or host utilization (engine-metrics.md §6.2).
func TestTRTLLMServeVersions(t *testing.T) {
	c := startCluster(t, "trtllm-serve")
	c.Advance(3 * time.Minute)
	ep := c.Endpoints()[0]
	tests := []struct {
		version         string
		running, queued string
		absent          []string
	}{
		{VersionCurrent, "trtllm_num_requests_running", "trtllm_num_requests_waiting",
			[]string{"trtllm_num_active_requests", "trtllm_server_queue_length"}},
		{VersionTRTLLMBefore, "trtllm_num_active_requests", "trtllm_server_queue_length",
			[]string{"trtllm_num_requests_running", "trtllm_num_requests_waiting", "trtllm_kv_cache_max_blocks", "trtllm_kv_cache_free_blocks",
				"trtllm_kv_cache_used_blocks", "trtllm_kv_cache_tokens_per_block", "trtllm_kv_cache_reused_blocks_total", "trtllm_kv_cache_missed_blocks_total",
				"trtllm_kv_cache_host_utilization", "trtllm_prompt_cache_hit_tokens_total", "trtllm_max_num_active_requests",
				"trtllm_generation_tokens_total", "trtllm_num_requests_completed_total", "trtllm_kv_cache_config_info",
				"trtllm_kv_cache_onboard_bytes_total", "trtllm_kv_cache_offload_bytes_total"}},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			if err := c.SetVersion(ep.Name, tc.version); err != nil {
				t.Fatal(err)
			}
			tr := c.Truth(ep.Name)
			if tr.Version != tc.version || tr.Running == 0 || tr.Queued == 0 || tr.UsedTokens == 0 {
				t.Fatalf("truth version %q running %d queued %d used %d: want %q, running and queued requests and KV in use",
					tr.Version, tr.Running, tr.Queued, tr.UsedTokens, tc.version)
			}
			_, body, err := get(t, ep.URL+ep.MetricsPath)
			if err != nil {
				t.Fatal(err)
			}
			fams := parse(t, body)
			if got := one(t, fams, tc.running); got != float64(tr.Running) {
				t.Errorf("%s = %v, want %d", tc.running, got, tr.Running)
			}
			if got := one(t, fams, tc.queued); got != float64(tr.Queued) {
				t.Errorf("%s = %v, want %d", tc.queued, got, tr.Queued)
			}
			block := tr.PageSize
			want := float64(tr.UsedTokens/block) / float64(tr.CapacityTokens/block)
			if got := one(t, fams, "trtllm_kv_cache_utilization"); math.Abs(got-want) > 1e-12 {
				t.Errorf("utilization = %v, want %v", got, want)
			}
			if got := one(t, fams, "trtllm_prompt_tokens_total"); got != float64(tr.Counters.FinishedPromptTokens) {
				t.Errorf("prompt tokens = %v, want %d", got, tr.Counters.FinishedPromptTokens)
			}
			if got, want := one(t, fams, "trtllm_prompt_cached_tokens_total"), tr.Counters.FinishedHitTokens+tr.Host.HitTokens; got != float64(want) {
				t.Errorf("cached prompt tokens = %v, want %d", got, want)
			}
			for _, n := range tc.absent {
				if fams[n] != nil {
					t.Errorf("%s on the page", n)
				}
			}
		})
	}
}
