package engine

import (
	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Per-request size histograms, observed when a request finishes: the
// families' _count and _sum give the finished requests and their prompt and
// generation tokens (docs/planning.md).
const (
	vlReqPrompt = "vllm:request_prompt_tokens"
	vlReqGen    = "vllm:request_generation_tokens"
	sgReqPrompt = "sglang:prompt_tokens_histogram"
	sgReqGen    = "sglang:generation_tokens_histogram"
)

// histogramNames are the names MetricNames must list for histogram
// families: the family (for the page filter) and its _sum and _count.
func histogramNames(families ...string) []string {
	var out []string
	for _, f := range families {
		out = append(out, f, f+"_sum", f+"_count")
	}
	return out
}

// requestHistograms are the names finishedSizes reads: the _count and
// _sum of a prompt and a generation histogram, joined once, not per scrape.
type requestHistograms struct{ promptCount, promptSum, genCount, genSum string }

func requestHistogramsOf(prompt, gen string) requestHistograms {
	return requestHistograms{prompt + "_count", prompt + "_sum", gen + "_count", gen + "_sum"}
}

var (
	vlReqSizes = requestHistogramsOf(vlReqPrompt, vlReqGen)
	sgReqSizes = requestHistogramsOf(sgReqPrompt, sgReqGen)
)

// finishedSizes sums the _count of the prompt histogram and the _sum of
// both over every series of the page (DP engines, models); unavailable
// parts where the page has no such series.
func finishedSizes(p *expo.Page, h requestHistograms) kv.RequestSizes {
	sum := func(name string) kv.Value {
		var out kv.Value
		for _, s := range p.Samples(name) {
			if !expo.Finite(s.Value) {
				return kv.Value{}
			}
			if !out.OK() {
				out = kv.Of(0)
			}
			out.V += s.Value
		}
		return out
	}
	r := kv.RequestSizes{Requests: sum(h.promptCount), PromptTokens: sum(h.promptSum), GenerationTokens: sum(h.genSum)}
	// Both histograms observe every finished request: with different
	// counts the sizes do not describe the same requests.
	if c := sum(h.genCount); !c.OK() || !r.Requests.OK() || c.V != r.Requests.V {
		return kv.RequestSizes{}
	}
	return r
}
