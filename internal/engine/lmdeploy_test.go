package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

const lmdeployPage = `# TYPE lmdeploy:gpu_cache_usage_perc gauge
lmdeploy:gpu_cache_usage_perc{engine="0",model_name="internlm/internlm2_5-7b-chat"} 0.2
lmdeploy:gpu_cache_usage_perc{engine="1",model_name="internlm/internlm2_5-7b-chat"} 0.6
# TYPE lmdeploy:num_requests_running gauge
lmdeploy:num_requests_running{engine="0",model_name="internlm/internlm2_5-7b-chat"} 3
lmdeploy:num_requests_running{engine="1",model_name="internlm/internlm2_5-7b-chat"} 5
# TYPE lmdeploy:num_requests_waiting gauge
lmdeploy:num_requests_waiting{engine="0",model_name="internlm/internlm2_5-7b-chat"} 0
lmdeploy:num_requests_waiting{engine="1",model_name="internlm/internlm2_5-7b-chat"} 2
# TYPE lmdeploy:prompt_tokens counter
lmdeploy:prompt_tokens_total{engine="0",model_name="internlm/internlm2_5-7b-chat"} 100
lmdeploy:prompt_tokens_total{engine="1",model_name="internlm/internlm2_5-7b-chat"} 200
lmdeploy:prompt_tokens_created{engine="0",model_name="internlm/internlm2_5-7b-chat"} 1.7e9
# TYPE lmdeploy:generation_tokens counter
lmdeploy:generation_tokens_total{engine="0",model_name="internlm/internlm2_5-7b-chat"} 1000
lmdeploy:generation_tokens_total{engine="1",model_name="internlm/internlm2_5-7b-chat"} 3000
`

func TestLMDeploy(t *testing.T) {
	want := summary{Engine: "lmdeploy", Generation: "current", Model: "internlm/internlm2_5-7b-chat", Ranks: 2,
		Signals: kv.Signals{
			// No capacities: the two DP ranks weigh the same, (0.2 + 0.6) / 2.
			UsageRatio: der(0.4), Running: dir(8), Queued: kv.Queues{Waiting: dir(2)},
			Counters: kv.Counters{PromptTokens: dir(300), GenerationTokens: dir(4000)},
		},
		Spread: der(0.4)}
	// The cached counter without the prompt histogram: no hit ratio from
	// half a pair.
	half := lmdeployPage + "lmdeploy:cached_tokens_total{engine=\"0\",model_name=\"internlm/internlm2_5-7b-chat\"} 50\n"
	if got := normalizeBody(t, half, "", nil); got.Counters.PrefixHitTokens.OK() || got.Counters.PrefixQueryTokens.OK() {
		t.Errorf("prefix hit %v of %v, want both unavailable", got.Counters.PrefixHitTokens, got.Counters.PrefixQueryTokens)
	}
	for name, body := range map[string]string{
		"colon":      lmdeployPage,
		"underscore": strings.ReplaceAll(lmdeployPage, "lmdeploy:", "lmdeploy_"),
	} {
		t.Run(name, func(t *testing.T) {
			got := normalizeBody(t, body, "", nil)
			if diff := cmp.Diff(want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
		})
	}
}
