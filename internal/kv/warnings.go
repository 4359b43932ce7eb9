package kv

import "fmt"

// Warning is one reason a server's numbers cannot be taken at face value:
// the page holds implausible values (negative, used beyond capacity, beyond
// 2^53) or is ambiguous (duplicate series, two engines on one page). Every
// face shows the warnings of a target, and serve exports them as
// kvwatch_target_warnings{reason}.
type Warning struct {
	// Reason is one of the Warn* constants: a stable label value.
	Reason string `json:"reason"`
	// Detail says what was seen, for people (which signal, which value).
	Detail string `json:"detail"`
}

// Warning reasons, the values of kvwatch_target_warnings' reason label.
const (
	// WarnNegative: a capacity, used, ratio, request count or queue is below 0.
	WarnNegative = "negative"
	// WarnOverCapacity: used exceeds capacity by more than rounding (or a
	// usage ratio is above 1).
	WarnOverCapacity = "used_over_capacity"
	// WarnTooLarge: a value is beyond 2^53, where float64 stops counting
	// every integer; no engine has that many KV slots or requests.
	WarnTooLarge = "too_large"
	// WarnDuplicateSeries: the page holds the same series (name and label
	// set) more than once; the adapter kept one and says which rule.
	WarnDuplicateSeries = "duplicate_series"
	// WarnTwoEngines: the page matches more than one engine (the adapter
	// picked one by the documented rule and says which), or it is read as
	// another engine than the target's previous page (scrape).
	WarnTwoEngines = "two_engines"
	// WarnDialect: the target's page changed its dialect (metric names,
	// exposition format or escaping) within the last minutes: an engine
	// upgrade or new flags; the detail names the change and the signals
	// whose meaning changed with it (scrape's drift sentinel).
	WarnDialect = "dialect_changed"
	// WarnMixedDialects: the page writes some names of one engine with a
	// colon (sglang:x) and others with an underscore (sglang_x): two
	// exporters or a partial relabelling on one page; kvwatch reads both
	// spellings as one name.
	WarnMixedDialects = "mixed_dialects"
)

// WarningReasons lists every reason in documentation order.
func WarningReasons() []string {
	return []string{WarnNegative, WarnOverCapacity, WarnTooLarge, WarnDuplicateSeries, WarnTwoEngines, WarnDialect, WarnMixedDialects}
}

// Warn adds a warning to s (once per reason and detail).
func (s *Server) Warn(reason, format string, args ...any) {
	w := Warning{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	for _, o := range s.Warnings {
		if o == w {
			return
		}
	}
	s.Warnings = append(s.Warnings, w)
}

// Warned reports whether s carries a warning of the given reason.
func (s *Server) Warned(reason string) bool {
	for _, w := range s.Warnings {
		if w.Reason == reason {
			return true
		}
	}
	return false
}
