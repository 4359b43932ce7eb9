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

// State is a diagnosis in words, the same on every face: "leak suspected",
// "stuck", "full", "pressure", "ok", "idle"; -- when unknown.
func State(s kv.State) string {
	if s == kv.StateUnknown {
		return NA
	}
	return strings.ReplaceAll(string(s), "_", " ")
}
