package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EngineLlamaCpp is the llama.cpp server, current build (/metrics, /slots, /props).
const EngineLlamaCpp = "llamacpp"

// llamaCppEngine is llama.cpp: a small context split into 4 slots, short
// requests at its slower rates, /slots and /props besides /metrics, and
// 501 on /metrics without --metrics.
var llamaCppEngine = engine{
	name: EngineLlamaCpp, render: renderLlamaCpp, slots: true,
	defaults: serverDefaults{contextLength: 4096, maxRunning: 4, promptMean: 400, outputMean: 150, outputMax: 192,
		decodeRate: 25, prefillRate: 1200},
	routes: func(s *server, mux *http.ServeMux) {
		mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Write(llamaSlots(s.snap.Load()))
		})
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Write(llamaProps(s.snap.Load()))
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

// renderLlamaCpp writes a current llama.cpp /metrics page: no labels,
// integers without ".0", 6 significant digits (as in the real captures;
// engine-metrics.md §4 and llamacpp-real.md §6).
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
	nctx := strconv.FormatInt(t.CapacityTokens/int64(max(len(t.Slots), 1)), 10)
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
	b = strconv.AppendInt(b, spec.CapacityTokens/nslots, 10)
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
