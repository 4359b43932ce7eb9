package sim

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestLlamaCppVersions: the current build's /metrics has no KV family and
// its /slots counts each slot's tokens; b5440's (before PR #13660) has
// kv_cache_usage_ratio and kv_cache_tokens, the truth's occupancy over the
// whole context, and a /slots without token counts (llamacpp-real.md §8).
// Both give the capacity through /props.
func TestLlamaCppVersions(t *testing.T) {
	c := startCluster(t, "mixed")
	c.Advance(3 * time.Minute)
	var url string
	for _, ep := range c.Endpoints() {
		if ep.Name == "llamacpp" {
			url = ep.URL
		}
	}
	tests := []struct {
		version string
		// present and absent are /metrics families; busyType is
		// n_busy_slots_per_decode's type.
		present, absent []string
		busyType        dto.MetricType
		// slotKeys and noSlotKeys are keys of every /slots entry and keys
		// of none; alias: /props has model_alias.
		slotKeys, noSlotKeys []string
		alias                bool
	}{
		{VersionCurrent,
			[]string{"llamacpp:prompt_tokens_cached_total", "llamacpp:n_tokens_max"},
			[]string{"llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_tokens"}, dto.MetricType_GAUGE,
			[]string{"id", "n_ctx", "is_processing"}, []string{"non_causal"}, true},
		{VersionLlamaCppBefore,
			[]string{"llamacpp:kv_cache_usage_ratio", "llamacpp:kv_cache_tokens"},
			[]string{"llamacpp:prompt_tokens_cached_total", "llamacpp:n_tokens_max", "llamacpp:spec_decode_num_drafts_total"}, dto.MetricType_COUNTER,
			[]string{"id", "id_task", "n_ctx", "is_processing", "non_causal", "params", "next_token"}, []string{"n_prompt_tokens", "n_prompt_tokens_cache"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			if err := c.SetVersion("llamacpp", tc.version); err != nil {
				t.Fatal(err)
			}
			tr := c.Truth("llamacpp")
			if tr.Version != tc.version || tr.UsedTokens == 0 {
				t.Fatalf("truth version %q used %d: want %q and a busy server", tr.Version, tr.UsedTokens, tc.version)
			}
			_, body, err := get(t, url+"/metrics")
			if err != nil {
				t.Fatal(err)
			}
			fams := parse(t, body)
			for _, n := range tc.present {
				if fams[n] == nil {
					t.Errorf("no %s", n)
				}
			}
			for _, n := range tc.absent {
				if fams[n] != nil {
					t.Errorf("%s on the page", n)
				}
			}
			if f := fams["llamacpp:n_busy_slots_per_decode"]; f == nil || f.GetType() != tc.busyType {
				t.Errorf("n_busy_slots_per_decode %v, want type %v", f, tc.busyType)
			}
			if fams["llamacpp:kv_cache_tokens"] != nil {
				if got := one(t, fams, "llamacpp:kv_cache_tokens"); got != float64(tr.UsedTokens) {
					t.Errorf("kv_cache_tokens = %v, want %d", got, tr.UsedTokens)
				}
				want := float64(tr.UsedTokens) / float64(tr.CapacityTokens)
				if got := one(t, fams, "llamacpp:kv_cache_usage_ratio"); math.Abs(got-want) > 1e-5 {
					t.Errorf("kv_cache_usage_ratio = %v, want %v", got, want)
				}
			}
			if got := one(t, fams, "llamacpp:requests_processing"); got != float64(tr.Running) {
				t.Errorf("requests_processing = %v, want %d", got, tr.Running)
			}

			_, sb, _ := get(t, url+"/slots")
			var slots []map[string]json.RawMessage
			if err := json.Unmarshal(sb, &slots); err != nil || len(slots) != len(tr.Slots) {
				t.Fatalf("/slots: %v, %d slots, want %d: %.300s", err, len(slots), len(tr.Slots), sb)
			}
			var used int64
			for i, s := range slots {
				for _, k := range tc.slotKeys {
					if _, ok := s[k]; !ok {
						t.Errorf("slot %d has no %s", i, k)
					}
				}
				for _, k := range tc.noSlotKeys {
					if _, ok := s[k]; ok {
						t.Errorf("slot %d has %s", i, k)
					}
				}
				var n int64
				if b, ok := s["n_prompt_tokens"]; ok && json.Unmarshal(b, &n) == nil {
					used += n
				}
			}
			if tc.version == VersionCurrent && used != tr.UsedTokens {
				t.Errorf("/slots Σ n_prompt_tokens = %d, want %d", used, tr.UsedTokens)
			}

			_, pb, _ := get(t, url+"/props")
			var props map[string]json.RawMessage
			var dgs struct {
				NCtx int64 `json:"n_ctx"`
			}
			var total int64
			if err := json.Unmarshal(pb, &props); err != nil {
				t.Fatalf("/props: %v: %.300s", err, pb)
			}
			if json.Unmarshal(props["default_generation_settings"], &dgs) != nil || json.Unmarshal(props["total_slots"], &total) != nil ||
				dgs.NCtx*total != tr.CapacityTokens {
				t.Errorf("/props n_ctx %d × total_slots %d, want capacity %d", dgs.NCtx, total, tr.CapacityTokens)
			}
			keys := make([]string, 0, len(props))
			for k := range props {
				keys = append(keys, k)
			}
			if slices.Contains(keys, "model_alias") != tc.alias {
				t.Errorf("/props keys %v: model_alias present %v, want %v", keys, !tc.alias, tc.alias)
			}
		})
	}
}
