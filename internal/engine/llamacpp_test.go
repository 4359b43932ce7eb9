package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

func TestLlamaCppExtras(t *testing.T) {
	page := string(readFixture(t, "llamacpp-real-load.prom"))
	slots := readFixture(t, "llamacpp-real-load.slots.json")
	props := readFixture(t, "llamacpp-real-props.json")
	base := kv.Signals{Running: dir(4), Queued: kv.Queues{Waiting: dir(4)},
		Counters: kv.Counters{PrefixHitTokens: dir(45), PrefixQueryTokens: der(4851), PromptTokens: dir(4806), GenerationTokens: dir(1536)}}
	with := func(f func(*kv.Signals)) kv.Signals { s := base; f(&s); return s }
	// unifiedSlots are /slots of a server started without -np (auto: 4
	// slots and a unified KV cache of 4096 tokens): every slot reports the
	// whole context (shared/reference/llamacpp-real.md §7), written by
	// hand from that observation.
	unifiedSlots := []byte(`[{"id":0,"n_ctx":4096,"id_task":7,"n_prompt_tokens":900,"is_processing":true},` +
		`{"id":1,"n_ctx":4096,"id_task":8,"n_prompt_tokens":700,"is_processing":true},{"id":2,"n_ctx":4096,"is_processing":false},{"id":3,"n_ctx":4096,"is_processing":false}]`)
	perSlot, shared := new(false), new(true)
	const needsConfig = "KV capacity unavailable: llama-server does not say whether its 4 slots share one KV cache (--kv-unified, its default when -np is not given: capacity 1024 tokens) or each hold their own (--parallel 4: 4 × 1024 = 4096 tokens); set kv_unified: true or false on its target in the config (kvwatch status and top: --kv-unified; llama-server logs kv_unified = '…' at startup)"
	tests := []struct {
		name      string
		extra     map[string][]byte
		kvUnified *bool
		want      summary
		why       string // the detail of the one kv.Unknown
	}{
		{
			name: "neither reachable: KV unavailable, not 0, and why",
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Signals: base,
				Unavailable: []string{kv.UnknownRemoved}},
			why: "llama.cpp removed kv_cache_usage_ratio and kv_cache_tokens from /metrics (PR #13660); KV comes from /slots and /props, and /props did not answer, /slots did not answer (llama-server --no-slots turns it off)",
		},
		{
			name:      "slots only: capacity from the slots' n_ctx",
			extra:     map[string][]byte{PathSlots: slots},
			kvUnified: perSlot,
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, ContextLength: dir(1024),
				Signals: with(func(s *kv.Signals) {
					s.Capacity, s.Used, s.UsageRatio = der(4096), der(1967), der(1967.0/4096)
				})},
		},
		{
			name:      "props only: capacity, used unknown",
			extra:     map[string][]byte{PathProps: props},
			kvUnified: perSlot,
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
				ContextLength: dir(1024), Signals: with(func(s *kv.Signals) { s.Capacity = der(4096) })},
		},
		{
			name:  "kv_unified not set: capacity unavailable, both candidates said, used still read",
			extra: map[string][]byte{PathSlots: slots, PathProps: props},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
				ContextLength: dir(1024), Signals: with(func(s *kv.Signals) { s.Used = der(1967) }),
				Unavailable: []string{kv.UnknownConfig}},
			why: needsConfig,
		},
		{
			name:  "kv_unified not set, props only: unavailable the same",
			extra: map[string][]byte{PathProps: props},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "/models/small-llama-f32.gguf",
				ContextLength: dir(1024), Signals: base, Unavailable: []string{kv.UnknownConfig}},
			why: needsConfig,
		},
		{
			name:  "kv_unified not set, slots only: unavailable the same",
			extra: map[string][]byte{PathSlots: slots},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified,
				ContextLength: dir(1024), Signals: with(func(s *kv.Signals) { s.Used = der(1967) }), Unavailable: []string{kv.UnknownConfig}},
			why: needsConfig,
		},
		{
			name:      "unified: capacity is the n_ctx every slot reports, not 4 times it",
			extra:     map[string][]byte{PathSlots: unifiedSlots},
			kvUnified: shared,
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, ContextLength: dir(4096),
				Signals: with(func(s *kv.Signals) { s.Capacity, s.Used, s.UsageRatio = der(4096), der(1600), der(1600.0/4096) })},
		},
		{
			name:  "one slot: no question, capacity is its n_ctx",
			extra: map[string][]byte{PathSlots: []byte(`[{"id":0,"n_ctx":8192,"id_task":1,"n_prompt_tokens":2048,"is_processing":true}]`)},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, ContextLength: dir(8192),
				Signals: with(func(s *kv.Signals) { s.Capacity, s.Used, s.UsageRatio = der(8192), der(2048), der(0.25) })},
		},
		{
			name:  "not JSON: unavailable",
			extra: map[string][]byte{PathSlots: []byte("<html>501</html>"), PathProps: []byte(`{"total_slots":"four"}`)},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Signals: base,
				Unavailable: []string{kv.UnknownRemoved}},
			why: "llama.cpp removed kv_cache_usage_ratio and kv_cache_tokens from /metrics (PR #13660); KV comes from /slots and /props, and /props is not llama-server's JSON, /slots is not llama-server's slot list",
		},
		{
			name:  "both answer but give nothing: still why",
			extra: map[string][]byte{PathSlots: []byte(`[]`), PathProps: []byte(`{"model_alias":"m"}`)},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, Model: "m", Signals: base,
				Unavailable: []string{kv.UnknownRemoved}},
			why: "llama.cpp removed kv_cache_usage_ratio and kv_cache_tokens from /metrics (PR #13660); KV comes from /slots and /props, and /slots lists no slot",
		},
		{
			name:      "a legacy slot without n_prompt_tokens makes used unknown",
			kvUnified: perSlot,
			extra:     map[string][]byte{PathSlots: []byte(`[{"id":0,"n_ctx":512,"id_task":3,"is_processing":true},{"id":1,"n_ctx":512,"n_prompt_tokens":100}]`)},
			want: summary{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified, ContextLength: dir(512),
				Signals: with(func(s *kv.Signals) { s.Capacity = der(1024) })},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := normalizeInput(t, page, "", Input{Extra: tt.extra, KVUnified: tt.kvUnified})
			if diff := cmp.Diff(tt.want, summarize(got), valueCmp); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
			if tt.why != "" && (len(got.Unavailable) != 1 || got.Unavailable[0].Detail != tt.why) {
				t.Errorf("Unavailable = %+v, want one saying %q", got.Unavailable, tt.why)
			}
		})
	}
}

func TestLlamaCppHeadroom(t *testing.T) {
	s := normalizeInput(t, string(readFixture(t, "llamacpp-real-load.prom")), "", Input{KVUnified: new(false), Extra: map[string][]byte{
		PathSlots: readFixture(t, "llamacpp-real-load.slots.json"),
		PathProps: readFixture(t, "llamacpp-real-props.json"),
	}})
	// 4096 − 1967 = 2129 free tokens: 2 requests of the 1024-token context.
	if got, want := s.Headroom(int(s.ContextLength.V)), der(2); !cmp.Equal(got, want, valueCmp) {
		t.Errorf("Headroom(1024) = %+v, want %+v", got, want)
	}
}

func TestLlamaCppInterfaces(t *testing.T) {
	a, err := NewRegistry().ByName("llamacpp")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.(MetricsPath); ok {
		t.Error("llamacpp implements MetricsPath; it serves /metrics")
	}
	if diff := cmp.Diff([]string{"/slots", "/props"}, a.(ExtraPaths).ExtraPaths()); diff != "" {
		t.Errorf("ExtraPaths (-want +got):\n%s", diff)
	}
	if got, want := a.(DisabledHint).DisabledHint(), "start llama-server with --metrics"; got != want {
		t.Errorf("DisabledHint() = %q, want %q", got, want)
	}
}

// TestLlamaCppSlotsLimit: the real capture under load has 4 requests in its
// 4 slots and 12 deferred while its KV (4 × 1024 tokens) has room: batch.
func TestLlamaCppSlotsLimit(t *testing.T) {
	s := normalizeInput(t, string(readFixture(t, "llamacpp-real-load-queued.prom")), "", Input{KVUnified: new(false), Extra: map[string][]byte{
		PathSlots: readFixture(t, "llamacpp-real-load-queued.slots.json"),
		PathProps: readFixture(t, "llamacpp-real-props.json"),
	}})
	if !cmp.Equal(s.MaxRunning, dir(4), valueCmp) {
		t.Fatalf("MaxRunning = %+v, want 4 (total_slots)", s.MaxRunning)
	}
	p := kv.PlanServer(&s, 0, kv.Value{}, 0.9)
	if p.Limit != kv.FactorBatch || !cmp.Equal(p.BatchHeadroom, der(0), valueCmp) {
		t.Errorf("limit = %s (%s), batch headroom %+v; want batch with 0 left (usage %+v)", p.Limit, p.Why, p.BatchHeadroom, s.UsageRatio)
	}
}
