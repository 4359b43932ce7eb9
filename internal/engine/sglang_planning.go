package engine

import (
	"math"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// sgMaxRunningName is SGLang's running-request limit: a constant emitted at
// startup by each scheduler (newest collectors label it cap_source; the
// first generation, label "name", had it too). It is per DP rank: with DP
// attention the limit is divided among the ranks.
const sgMaxRunningName = "sglang:max_running_requests"

// sgMaxRunning returns the server's running-request limit: the maximum over
// the TP/PP ranks of each DP rank, summed over DP ranks; unavailable when
// the page does not carry it.
func sgMaxRunning(p *expo.Page) kv.Value {
	perDP := map[string]float64{}
	for _, s := range p.Samples(sgMaxRunningName) {
		if !expo.Finite(s.Value) || !sgTotals(s) {
			continue
		}
		dp := sgRank(s).DP
		if v, ok := perDP[dp]; !ok || s.Value > v {
			perDP[dp] = s.Value
		}
	}
	if len(perDP) == 0 {
		return kv.Value{}
	}
	sum := 0.0
	for _, v := range perDP {
		sum += v
	}
	if len(perDP) > 1 {
		return kv.DerivedOf(math.Round(sum))
	}
	return kv.Of(sum)
}
