package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EngineLlamaCpp is the llama.cpp server (/metrics, /slots, /props).
const EngineLlamaCpp = "llamacpp"

// VersionLlamaCppBefore is llama.cpp release b5440, the last before PR
// #13660 removed kv_cache_usage_ratio and kv_cache_tokens from /metrics:
// its /metrics has both and no prompt_tokens_cached_total, and its /slots
// has id_task on every slot but no n_prompt_tokens (llamacpp-real.md §8).
// VersionCurrent is the current build: no KV metric, KV from /slots and
// /props.
const VersionLlamaCppBefore = "before-13660"

// llamaCppEngine is llama.cpp: a small context split into 4 slots, short
// requests at its slower rates, /slots and /props besides /metrics, and
// 501 on /metrics without --metrics.
var llamaCppEngine = engine{
	name: EngineLlamaCpp, render: renderLlamaCpp, slots: true, versions: []string{VersionCurrent, VersionLlamaCppBefore},
	defaults: serverDefaults{contextLength: 4096, maxRunning: 4, promptMean: 400, outputMean: 150, outputMax: 192,
		decodeRate: 25, prefillRate: 1200},
	routes: func(s *server, mux *http.ServeMux) {
		mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			p := s.snap.Load()
			if p.truth.Version == VersionLlamaCppBefore {
				w.Write(llamaSlotsB5440(p))
				return
			}
			w.Write(llamaSlots(p))
		})
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			p := s.snap.Load()
			if p.truth.Version == VersionLlamaCppBefore {
				w.Write(llamaPropsB5440(p))
				return
			}
			w.Write(llamaProps(p))
		})
	},
	header: func(h http.Header, p *snapshot) {
		h.Set("Content-Type", "text/plain; version=0.0.4")
		h.Set("Process-Start-Time-Unix", strconv.FormatInt(int64(p.truth.At/time.Microsecond)+2007966438, 10))
	},
	metricsOff: func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusNotImplemented)
		w.Write([]byte(`{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with ` + "`--metrics`" + `","type":"not_supported_error"}}`))
	},
}

// renderLlamaCpp writes a llama.cpp /metrics page: no labels, integers
// without ".0", 6 significant digits (as in the real captures;
// engine-metrics.md §4 and llamacpp-real.md §6). The current build's
// families, or b5440's (VersionLlamaCppBefore; llamacpp-real.md §8): its
// HELP texts, n_busy_slots_per_decode typed counter, no cached-prompt,
// n_tokens_max or speculative counters, and the KV gauges: used cells over
// the whole context and the tokens in the cache, idle slots' kept tokens
// included.
func renderLlamaCpp(p *snapshot) []byte {
	g, live := p.gauges(), &p.truth
	c := live.Counters
	w := &page{style: cppNum, b: make([]byte, 0, 4<<10)}
	one := func(name, help, typ string, v float64) {
		w.family("llamacpp:"+name, help, typ)
		w.sample("llamacpp:"+name, "", v)
	}
	rate := func(tok int64, sec float64) float64 {
		if sec == 0 {
			return 0
		}
		return float64(tok) / sec
	}
	busy := 0.0
	if c.DecodeSteps > 0 {
		busy = float64(g.Running)
	}
	if live.Version == VersionLlamaCppBefore {
		one("prompt_tokens_total", "Number of prompt tokens processed.", "counter", float64(c.ComputedTokens))
		one("prompt_seconds_total", "Prompt process time", "counter", c.PromptSeconds)
		one("tokens_predicted_total", "Number of generation tokens processed.", "counter", float64(c.GenerationTokens))
		one("tokens_predicted_seconds_total", "Predict process time", "counter", c.GenerationSeconds)
		one("n_decode_total", "Total number of llama_decode() calls", "counter", float64(c.DecodeSteps))
		one("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "counter", busy)
		one("prompt_tokens_seconds", "Average prompt throughput in tokens/s.", "gauge", rate(c.ComputedTokens, c.PromptSeconds))
		one("predicted_tokens_seconds", "Average generation throughput in tokens/s.", "gauge", rate(c.GenerationTokens, c.GenerationSeconds))
		one("kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.", "gauge", float64(g.UsedTokens)/float64(g.CapacityTokens))
		one("kv_cache_tokens", "KV-cache tokens.", "gauge", float64(g.UsedTokens))
		one("requests_processing", "Number of requests processing.", "gauge", float64(g.Running))
		one("requests_deferred", "Number of requests deferred.", "gauge", float64(g.Queued))
		return w.b
	}
	one("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", "counter", float64(c.ComputedTokens))
	one("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", "counter", float64(c.PrefixHitTokens))
	one("prompt_seconds_total", "Total time spent processing prompts", "counter", c.PromptSeconds)
	one("tokens_predicted_total", "Number of generation tokens processed", "counter", float64(c.GenerationTokens))
	one("tokens_predicted_seconds_total", "Total time spent generating tokens", "counter", c.GenerationSeconds)
	one("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", "counter", float64(c.DecodeSteps))
	one("n_tokens_max", "Largest observed sequence length (prompt + generation)", "counter", float64(c.MaxSeqLen))
	one("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", "counter", 0)
	one("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", "counter", 0)
	one("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", "counter", 0)
	one("prompt_tokens_seconds", "Average prompt throughput in tokens/s", "gauge", rate(c.ComputedTokens, c.PromptSeconds))
	one("predicted_tokens_seconds", "Average generation throughput in tokens/s", "gauge", rate(c.GenerationTokens, c.GenerationSeconds))
	one("requests_processing", "Number of requests processing", "gauge", float64(g.Running))
	one("requests_deferred", "Number of requests deferred", "gauge", float64(g.Queued))
	one("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", "gauge", busy)
	return w.b
}

// llamaParams is the fixed sampling-parameter object of a slot, in the key
// order of the real /slots capture.
const llamaParams = `{"seed":4294967295,"temperature":0.800000011920929,"dynatemp_range":0.0,"dynatemp_exponent":1.0,"top_k":40,"top_p":0.949999988079071,"min_p":0.05000000074505806,"top_n_sigma":-1.0,"xtc_probability":0.0,"xtc_threshold":0.10000000149011612,"typical_p":1.0,"repeat_last_n":64,"repeat_penalty":1.0,"presence_penalty":0.0,"frequency_penalty":0.0,"dry_multiplier":0.0,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":64,"mirostat":0,"mirostat_tau":5.0,"mirostat_eta":0.10000000149011612,"adaptive_target":-1.0,"adaptive_decay":0.8999999761581421,"max_tokens":MAXTOK,"n_predict":MAXTOK,"n_keep":0,"n_discard":0,"ignore_eos":false,"stream":false,"n_probs":0,"min_keep":0,"chat_format":"peg-native","reasoning_format":"deepseek","reasoning_in_content":false,"generation_prompt":"<|im_start|>assistant\n","samplers":["penalties","dry","top_n_sigma","top_k","typ_p","top_p","min_p","xtc","temperature"],"speculative.types":"none","timings_per_token":false,"post_sampling_probs":false,"backend_sampling":false,"lora":[]}`

// llamaSlots renders /slots like the current build: idle never-used slots
// have only id, n_ctx, speculative, is_processing.
func llamaSlots(p *snapshot) []byte {
	t := p.gauges()
	nctx := strconv.FormatInt(slotContext(p.srv.spec, t.CapacityTokens), 10)
	b := []byte{'['}
	for i, s := range t.Slots {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, int64(s.ID), 10)
		b = append(b, `,"n_ctx":`...)
		b = append(b, nctx...)
		b = append(b, `,"speculative":false,"is_processing":`...)
		b = strconv.AppendBool(b, s.Processing)
		if s.Task >= 0 {
			b = append(b, `,"id_task":`...)
			b = strconv.AppendInt(b, s.Task, 10)
			b = append(b, `,"n_prompt_tokens":`...)
			b = strconv.AppendInt(b, s.Tokens, 10)
			b = append(b, `,"n_prompt_tokens_processed":`...)
			b = strconv.AppendInt(b, s.Processed, 10)
			b = append(b, `,"n_prompt_tokens_cache":`...)
			b = strconv.AppendInt(b, s.Cache, 10)
			b = append(b, `,"params":`...)
			b = append(b, strings.ReplaceAll(llamaParams, "MAXTOK", strconv.FormatInt(p.srv.spec.Load.OutputMax, 10))...)
			b = append(b, `,"next_token":[{"has_next_token":`...)
			b = strconv.AppendBool(b, s.HasNext)
			b = append(b, `,"has_new_line":false,"n_remain":`...)
			b = strconv.AppendInt(b, s.Remain, 10)
			b = append(b, `,"n_decoded":`...)
			b = strconv.AppendInt(b, s.Decoded, 10)
			b = append(b, "}]"...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// llamaProps renders /props with the keys of the real capture.
func llamaProps(p *snapshot) []byte {
	spec := p.srv.spec
	nslots := int64(spec.MaxRunningRequests)
	model := "/models/" + spec.ModelName + ".gguf"
	b := []byte(`{"default_generation_settings":{"params":`)
	b = append(b, strings.ReplaceAll(llamaParams, "MAXTOK", "-1")...)
	b = append(b, `,"n_ctx":`...)
	b = strconv.AppendInt(b, slotContext(spec, spec.CapacityTokens), 10)
	b = append(b, `},"total_slots":`...)
	b = strconv.AppendInt(b, nslots, 10)
	m, _ := json.Marshal(model)
	b = append(b, `,"model_alias":`...)
	b = append(b, m...)
	b = append(b, `,"model_ftype":"all F32","model_path":`...)
	b = append(b, m...)
	b = append(b, `,"modalities":{"vision":false,"video":false,"audio":false},"endpoint_slots":true,"endpoint_props":false,"endpoint_metrics":`...)
	b = strconv.AppendBool(b, p.truth.Fault.Kind != FaultMetricsOff)
	b = append(b, `,"ui":true,"ui_settings":{},"chat_template":"","bos_token":"<s>","eos_token":"</s>","build_info":"b10587-3f545be","is_sleeping":false,"cors_proxy_enabled":false}`...)
	return b
}

// slotContext is the n_ctx each slot reports of capacity: the whole with
// a unified KV cache, its share otherwise.
func slotContext(spec ServerSpec, capacity int64) int64 {
	if spec.KVUnified {
		return capacity
	}
	return capacity / int64(max(spec.MaxRunningRequests, 1))
}

// llamaParamsB5440 is b5440's sampling-parameter object, in the key order
// of its /slots capture; STREAM is false in /slots, true in /props.
const llamaParamsB5440 = `{"n_predict":MAXTOK,"seed":4294967295,"temperature":0.800000011920929,"dynatemp_range":0.0,"dynatemp_exponent":1.0,"top_k":40,"top_p":0.949999988079071,"min_p":0.05000000074505806,"top_n_sigma":-1.0,"xtc_probability":0.0,"xtc_threshold":0.10000000149011612,"typical_p":1.0,"repeat_last_n":64,"repeat_penalty":1.0,"presence_penalty":0.0,"frequency_penalty":0.0,"dry_multiplier":0.0,"dry_base":1.75,"dry_allowed_length":2,"dry_penalty_last_n":4096,"dry_sequence_breakers":["\n",":","\"","*"],"mirostat":0,"mirostat_tau":5.0,"mirostat_eta":0.10000000149011612,"stop":[],"max_tokens":MAXTOK,"n_keep":0,"n_discard":0,"ignore_eos":false,"stream":STREAM,"logit_bias":[],"n_probs":0,"min_keep":0,"grammar":"","grammar_lazy":false,"grammar_triggers":[],"preserved_tokens":[],"chat_format":"Content-only","samplers":["penalties","dry","top_n_sigma","top_k","typ_p","top_p","min_p","xtc","temperature"],"speculative.n_max":16,"speculative.n_min":0,"speculative.p_min":0.75,"timings_per_token":false,"post_sampling_probs":false,"lora":[]}`

// llamaSlotB5440 appends one slot object as b5440 writes it: id_task on
// every slot (-1 before its first task), next_token an object, no token
// counts. The real slot also carries its detokenized prompt text, which
// the simulator does not have: left out.
func llamaSlotB5440(b []byte, s SlotTruth, nctx, maxTok int64, stream bool) []byte {
	hasNext, remain := s.HasNext, s.Remain
	if s.Task < 0 { // as a slot that never had a task reads in the capture
		hasNext, remain, maxTok = true, -1, -1
	}
	params := strings.NewReplacer("MAXTOK", strconv.FormatInt(maxTok, 10), "STREAM", strconv.FormatBool(stream)).Replace(llamaParamsB5440)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(s.ID), 10)
	b = append(b, `,"id_task":`...)
	b = strconv.AppendInt(b, s.Task, 10)
	b = append(b, `,"n_ctx":`...)
	b = strconv.AppendInt(b, nctx, 10)
	b = append(b, `,"speculative":false,"is_processing":`...)
	b = strconv.AppendBool(b, s.Processing)
	b = append(b, `,"non_causal":false,"params":`...)
	b = append(b, params...)
	b = append(b, `,"next_token":{"has_next_token":`...)
	b = strconv.AppendBool(b, hasNext)
	b = append(b, `,"has_new_line":false,"n_remain":`...)
	b = strconv.AppendInt(b, remain, 10)
	b = append(b, `,"n_decoded":`...)
	b = strconv.AppendInt(b, s.Decoded, 10)
	return append(b, `,"stopping_word":""}}`...)
}

// llamaSlotsB5440 renders /slots like b5440 (VersionLlamaCppBefore).
func llamaSlotsB5440(p *snapshot) []byte {
	t := p.gauges()
	nctx := t.CapacityTokens / int64(max(len(t.Slots), 1))
	b := []byte{'['}
	for i, s := range t.Slots {
		if i > 0 {
			b = append(b, ',')
		}
		b = llamaSlotB5440(b, s, nctx, p.srv.spec.Load.OutputMax, false)
	}
	return append(b, ']')
}

// llamaPropsB5440 renders /props like b5440: the default generation
// settings are an idle slot's object, no model_alias, and the build_info
// of the capture (a build from source).
func llamaPropsB5440(p *snapshot) []byte {
	spec := p.srv.spec
	nslots := int64(spec.MaxRunningRequests)
	b := []byte(`{"default_generation_settings":`)
	b = llamaSlotB5440(b, SlotTruth{Task: -1}, spec.CapacityTokens/nslots, -1, true)
	b = append(b, `,"total_slots":`...)
	b = strconv.AppendInt(b, nslots, 10)
	m, _ := json.Marshal("/models/" + spec.ModelName + ".gguf")
	b = append(b, `,"model_path":`...)
	b = append(b, m...)
	b = append(b, `,"modalities":{"vision":false},"chat_template":"","bos_token":"<s>","eos_token":"</s>","build_info":"b0-unknown"}`...)
	return b
}
