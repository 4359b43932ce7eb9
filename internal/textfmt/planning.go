package textfmt

import (
	"fmt"
	"math"
	"strings"

	"github.com/kvwatch/kvwatch/internal/kv"
)

// TimeToFull writes a pool's demand-aware time to full (kv.FillForecast,
// docs/planning.md): "full in 12m", "full now (queue)", "full now", "not
// filling", "trend after 20s" while the trend is shorter than min asks,
// else "time to full --".
func TimeToFull(f *kv.FillForecast, min kv.FillTrend) string {
	if f == nil {
		return "time to full " + NA
	}
	switch f.TimeToFullState {
	case kv.FillFilling:
		return kv.Mark(f.TimeToFullSeconds, "full in "+Duration(f.TimeToFullSeconds.V))
	case kv.FillFull:
		s := "full now"
		if f.FullByQueue {
			s += " (queue)"
		}
		return kv.Mark(f.TimeToFullSeconds, s)
	case kv.FillNotFilling:
		return "not filling"
	}
	if f.TrendWarming {
		if left := min.MinSpan.Seconds() - f.TrendSeconds; left >= 1 {
			return fmt.Sprintf("trend after %.0fs", math.Ceil(left))
		}
		return "trend after the next sample"
	}
	return "time to full " + NA
}

// Limiters names the servers that limit a pool's admission, with their
// factor and, where their queue waits on another server, on what:
// "limited by decode-1 (kv), prefill-0 (queue: waits on decode's
// pre-allocation)"; "nothing limits admission" when none does.
func Limiters(ls []kv.Limiter) string {
	if len(ls) == 0 {
		return "nothing limits admission"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		f := string(l.Factor)
		if l.WaitsOn != "" {
			f += ": waits on " + l.WaitsOn
		}
		parts[i] = l.Server + " (" + f + ")"
	}
	return "limited by " + strings.Join(parts, ", ")
}

// State is a diagnosis in words, the same on every face: "leak suspected",
// "stuck", "full", "pressure", "ok", "idle"; -- when unknown.
func State(s kv.State) string {
	if s == kv.StateUnknown {
		return NA
	}
	return strings.ReplaceAll(string(s), "_", " ")
}
