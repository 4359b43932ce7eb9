package engine

import (
	"encoding/json"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// llamacppSpec reads llama.cpp's llama-server. Its /metrics has no labels and,
// since release b5441, no KV metric: running (requests_processing), queued
// (requests_deferred) and the token counters come from /metrics; KV comes
// from /slots and /props, which the scraper fetches too (ExtraPaths) and
// passes in Input.Extra. Release b5440 and older export
// kv_cache_usage_ratio and kv_cache_tokens, read directly.
//
// Used tokens from /slots are Σ n_prompt_tokens over every slot (derived):
// n_prompt_tokens is the slot's token sequence, prompt plus every token
// generated so far, i.e. the tokens it holds in KV. Idle slots keep their
// tokens until they take a new task (they serve as prompt cache), so this
// is occupancy, as the legacy kv_cache_tokens was; a slot that never had a
// task holds none. Capacity depends on how the slots hold KV, which
// llama-server does not say over HTTP (only its startup log line
// kv_unified = '…'): with a unified KV cache (--kv-unified, its default
// when -np is not given) every slot reports the whole context as n_ctx
// and capacity is that n_ctx; with KV per slot (an explicit --parallel N)
// each slot reports its share and capacity is n_ctx × total_slots. So
// capacity comes from the target's kv_unified (Input.KVUnified): /props
// default_generation_settings.n_ctx, times total_slots when not unified
// (derived; else the largest or the sum of n_ctx over /slots). With one
// slot both agree; with more and no kv_unified, capacity is unavailable
// and the server says why (kv.UnknownConfig), with both candidates.
//
// When neither the page nor /slots and /props give any KV value, the
// server says why (Unavailable, kv.UnknownRemoved) (llama.cpp dropped its KV gauges in PR
// #13660, and which endpoint failed), beside what the page still tells:
// requests processing and deferred, the token counters.
//
// A slot is not a rank: all slots share one scheduler and one process, so
// the server has no ranks. Headroom is therefore computed on the pooled
// free tokens, while each slot can only take one request of at most n_ctx
// tokens.
var llamacppSpec = Spec{
	Name:         "llamacpp",
	DisabledHint: "start llama-server with --metrics",
	Answer:       llamacppMetricsOff,
	ExtraPaths:   []string{PathSlots, PathProps},
	Detect:       []string{lcProcessing, lcDeferred, lcPrompt, lcPredicted, lcDecode, lcKVRatio, lcKVTokens},
	Reads:        []string{lcCached},
	Normalize:    normalizeLlamaCpp,
}

const (
	lcProcessing = "llamacpp:requests_processing"
	lcDeferred   = "llamacpp:requests_deferred"
	lcPrompt     = "llamacpp:prompt_tokens_total"
	lcCached     = "llamacpp:prompt_tokens_cached_total"
	lcPredicted  = "llamacpp:tokens_predicted_total"
	lcDecode     = "llamacpp:n_decode_total"
	lcKVRatio    = "llamacpp:kv_cache_usage_ratio"
	lcKVTokens   = "llamacpp:kv_cache_tokens"

	// lcNoKV begins the reason a current page's KV is unavailable.
	lcNoKV = "llama.cpp removed kv_cache_usage_ratio and kv_cache_tokens from /metrics (PR #13660); KV comes from /slots and /props, and "

	// PathSlots and PathProps are llama-server's JSON endpoints read for KV.
	PathSlots = "/slots"
	PathProps = "/props"
)

// lcSlot is one entry of /slots; a field is nil when absent.
type lcSlot struct {
	NCtx         *float64 `json:"n_ctx"`
	IDTask       *float64 `json:"id_task"`
	NPrompt      *float64 `json:"n_prompt_tokens"`
	IsProcessing *bool    `json:"is_processing"`
}

// lcProps is the part of /props kvwatch reads.
type lcProps struct {
	Settings struct {
		NCtx *float64 `json:"n_ctx"`
	} `json:"default_generation_settings"`
	TotalSlots *float64 `json:"total_slots"`
	ModelAlias string   `json:"model_alias"`
	ModelPath  string   `json:"model_path"`
	// BuildInfo is the build, e.g. "b10587-3f545be" (build number and
	// commit); "b0-unknown" for a build made outside git.
	BuildInfo string `json:"build_info"`
}

// known returns *f as a value made by mk, unknown when nil, not finite or
// negative.
func known(f *float64, mk func(float64) kv.Value) kv.Value {
	if f == nil || *f < 0 {
		return kv.Value{}
	}
	return mk(*f)
}

// Normalize implements Adapter. An /slots or /props body that is missing
// or not the JSON llama-server writes leaves the values it would give
// unavailable.
func normalizeLlamaCpp(in Input) (kv.Server, error) {
	p := in.Page
	srv := kv.Server{Engine: "llamacpp", Generation: "current", Role: kv.RoleUnified}
	if p.Has(lcKVRatio) || p.Has(lcKVTokens) {
		srv.Generation = "legacy"
	}
	s := &srv.Signals
	s.Running = single(p, lcProcessing, nil, kv.Of)
	s.Queued.Waiting = single(p, lcDeferred, nil, kv.Of)
	s.Counters.PromptTokens = single(p, lcPrompt, nil, kv.Of)
	s.Counters.GenerationTokens = single(p, lcPredicted, nil, kv.Of)
	// prompt_tokens_total excludes cached tokens in the builds that
	// export prompt_tokens_cached_total: queried = cached + processed.
	if cached := single(p, lcCached, nil, kv.Of); cached.OK() && s.Counters.PromptTokens.OK() {
		s.Counters.PrefixHitTokens = cached
		s.Counters.PrefixQueryTokens = kv.DerivedOf(cached.V + s.Counters.PromptTokens.V)
	}
	s.UsageRatio = single(p, lcKVRatio, nil, kv.Of)
	s.Used = single(p, lcKVTokens, nil, kv.Of)

	unified := in.KVUnified
	if srv.Generation == "legacy" {
		// Before llama.cpp #14363 (July 2025; the KV gauges went in May)
		// there was one KV buffer, split evenly: each slot reports its
		// share, whatever the config says.
		unified = new(bool)
	}
	var why []string // what kept KV from /slots and /props
	var props lcProps
	b, ok := in.Extra[PathProps]
	switch {
	case !ok:
		why = append(why, PathProps+" did not answer")
	case json.Unmarshal(b, &props) != nil:
		why = append(why, PathProps+" is not llama-server's JSON")
	default:
		srv.Model = props.ModelAlias
		if v, err := checkVersion(props.BuildInfo); err == nil && v != "b0-unknown" {
			srv.EngineVersion = v
		}
		if srv.Model == "" {
			srv.Model = props.ModelPath
		}
		nctx := known(props.Settings.NCtx, kv.Of)
		srv.ContextLength = nctx
		s.Capacity = slotsCapacity(&srv, unified, nctx, known(props.TotalSlots, kv.Of))
		// One request per slot: the slots are the running-request limit.
		srv.MaxRunning = known(props.TotalSlots, kv.Of)
	}
	var slots []lcSlot
	b, ok = in.Extra[PathSlots]
	switch {
	case !ok:
		why = append(why, PathSlots+" did not answer (llama-server --no-slots turns it off)")
	case json.Unmarshal(b, &slots) != nil:
		why = append(why, PathSlots+" is not llama-server's slot list")
	case len(slots) == 0:
		why = append(why, PathSlots+" lists no slot")
	default:
		var used, nctxMax float64
		usedOK, capOK := true, true
		for _, sl := range slots {
			switch {
			case sl.NPrompt != nil && *sl.NPrompt >= 0:
				used += *sl.NPrompt
			case sl.IDTask == nil: // never had a task: holds nothing
			default: // b5440 and older: no per-slot token count
				usedOK = false
			}
			if sl.NCtx != nil && *sl.NCtx > 0 {
				nctxMax = max(nctxMax, *sl.NCtx)
			} else {
				capOK = false
			}
		}
		if usedOK && !s.Used.OK() {
			s.Used = kv.DerivedOf(used)
		}
		if capOK && !s.Capacity.OK() && !srv.Explained(kv.UnknownConfig) {
			s.Capacity = slotsCapacity(&srv, unified, kv.Of(nctxMax), kv.Of(float64(len(slots))))
		}
		if capOK && !srv.ContextLength.OK() {
			srv.ContextLength = kv.Of(nctxMax)
		}
	}
	if srv.Generation == "current" && !s.Capacity.OK() && !s.Used.OK() && !srv.Explained(kv.UnknownConfig) {
		if len(why) == 0 {
			why = append(why, "neither gives a context size or a slot's tokens")
		}
		srv.Explain(kv.UnknownRemoved, "%s", lcNoKV+strings.Join(why, ", "))
	}
	// Idle slots keep their tokens (prompt cache) in Used.
	srv.UsedHoldsCache = true
	srv.Rollup()
	return srv, nil
}

// slotsCapacity is the KV capacity of slots slots of nctx tokens each as
// llama-server reports them: nctx when they share one KV cache (unified;
// every slot reports the whole), nctx × slots when each holds its own,
// and unavailable, with why, when the config does not say and there is
// more than one slot.
func slotsCapacity(srv *kv.Server, unified *bool, nctx, slots kv.Value) kv.Value {
	switch {
	case !nctx.OK() || !slots.OK():
		return kv.Value{}
	case slots.V == 1 || (unified != nil && *unified):
		return kv.DerivedOf(nctx.V)
	case unified != nil:
		return nctx.Mul(slots)
	}
	n := int(slots.V)
	srv.Explain(kv.UnknownConfig, "KV capacity unavailable: llama-server does not say whether its %d slots share one KV cache "+
		"(--kv-unified, its default when -np is not given: capacity %.0f tokens) or each hold their own (--parallel %d: %d × %.0f = %.0f tokens); "+
		"set kv_unified: true or false on its target in the config (kvwatch status and top: --kv-unified; llama-server logs kv_unified = '…' at startup)",
		n, nctx.V, n, n, nctx.V, nctx.V*slots.V)
	return kv.Value{}
}
