package stack

import (
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"

	"github.com/kvwatch/kvwatch/internal/signal"
)

// AlertTargetWarnings fires while kvwatch flags a target's page as
// implausible (kvwatch_target_warnings{reason} > 0: negative values, used
// beyond capacity, values beyond 2^53, duplicate series, a page that
// matches two engines). The values concerned are not exported, so the
// server's signals are partly unknown, and nothing else says so: the
// target is up. It has a section in docs/runbook.md.
const AlertTargetWarnings = "EngineValuesImplausible"

// targetWarningsFor is its hold time: a page with a transient glitch (a
// counter read mid-update, a restart) is no reason to warn anyone; a
// warning that stays this long is the engine's or the config's.
const targetWarningsFor = model.Duration(10 * time.Minute)

// targetWarningsAlert returns the rule of AlertTargetWarnings (in the
// health group).
func targetWarningsAlert(alert func(name, severity string, forD model.Duration, expr, summary, description string) rulefmt.Rule) rulefmt.Rule {
	return alert(AlertTargetWarnings, SeverityWarning, targetWarningsFor,
		signal.TargetWarnings.Name+" > 0",
		"Engine {{ $labels.server }} reports implausible values ({{ $labels.reason }})",
		"The last page of {{ $labels.server }} had {{ $value }} {{ $labels.reason }} warnings, and its pages have had some for "+targetWarningsFor.String()+
			": the values concerned are not exported, so its KV signals are partly unknown. `kvwatch status` shows each warning's text.")
}
