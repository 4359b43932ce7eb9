package kv

import "fmt"

// Warning is one reason a server's numbers cannot be taken at face value:
// the page holds implausible values (negative, used beyond capacity, beyond
// 2^53) or is ambiguous (duplicate series, two engines on one page, one
// value under two versions' names that disagree). Every
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
	// WarnMixedDialect: the page carries an engine's old and new name of
	// one signal (a rename across versions) with different values; the
	// adapter read the new name and says which values disagreed.
	WarnMixedDialect = "mixed_dialect"
	// WarnDialect: the target's page changed its dialect (metric names,
	// exposition format or escaping) within the last minutes: an engine
	// upgrade or new flags; the detail names the change and the signals
	// whose meaning changed with it (scrape's drift sentinel).
	WarnDialect = "dialect_changed"
	// WarnMixedEscaping: the page writes some names of one engine with a
	// colon (sglang:x) and others with an underscore (sglang_x): two
	// exporters or a partial relabelling on one page; kvwatch reads both
	// spellings as one name.
	WarnMixedEscaping = "mixed_escaping"
	// WarnVersionMismatch: the engine says a version (its version
	// endpoint) whose releases do not have a name its page serves, or
	// no longer have it: two processes behind one address, or a version
	// endpoint of another server.
	WarnVersionMismatch = "version_mismatch"
)

// WarningReasons lists every reason in documentation order.
func WarningReasons() []string {
	return []string{WarnNegative, WarnOverCapacity, WarnTooLarge, WarnDuplicateSeries, WarnTwoEngines, WarnMixedDialect, WarnDialect, WarnMixedEscaping, WarnVersionMismatch}
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

// Unknown is one reason the page gives for values it leaves unavailable:
// not a warning (nothing on the page is implausible, no alert fires), but
// what every face can say instead of a bare "unknown".
type Unknown struct {
	// Reason is one of the Unknown* constants: a stable value.
	Reason string `json:"reason"`
	// Detail says which values and why, for people.
	Detail string `json:"detail"`
}

// Reasons for unavailable values.
const (
	// UnknownAsleep: the engine is asleep (vLLM's sleep mode) and has
	// released its KV cache; its KV values are unavailable, not 0 % used.
	UnknownAsleep = "asleep"
	// UnknownVersion: in the page's engine version a name does not mean
	// what kvwatch reads it as (SGLang's PD prefill running count before
	// sglang #31495, its token_usage as a max over pools).
	UnknownVersion = "version_semantics"
	// UnknownRemoved: the engine's version removed the names kvwatch read
	// a value from, and nothing else on the page (or its extra paths)
	// gives it (llama.cpp's KV gauges, PR #13660).
	UnknownRemoved = "removed"
	// UnknownConfig: the page cannot tell the value without a fact only
	// the operator knows, which a target key gives (llama.cpp's capacity
	// needs kv_unified: llama-server does not say whether its slots share
	// one KV cache).
	UnknownConfig = "needs_config"
)

// Explained reports whether s says values are unavailable for the reason.
func (s *Server) Explained(reason string) bool {
	for _, u := range s.Unavailable {
		if u.Reason == reason {
			return true
		}
	}
	return false
}

// Explain records why values are unavailable (once per reason and detail).
func (s *Server) Explain(reason, format string, args ...any) {
	u := Unknown{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	for _, o := range s.Unavailable {
		if o == u {
			return
		}
	}
	s.Unavailable = append(s.Unavailable, u)
}
