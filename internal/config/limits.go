package config

import (
	"fmt"
	"net"
	"strings"
)

// Limits bound what one target may send, as Prometheus' scrape limits do.
// They are set under global (for every target) and may be overridden per
// target; an unset key takes the global value, else the default
// (DefaultLimits). 0 turns a limit off. A scrape over a limit fails with
// reason "limit" and keeps nothing of the page: no server, no series, no
// history.
type Limits struct {
	// SampleLimit bounds the samples kvwatch keeps from one page (the
	// families it reads, after the others are dropped).
	SampleLimit *int `yaml:"sample_limit,omitempty"`
	// LabelLimit bounds the labels of one sample, its name not counted.
	LabelLimit *int `yaml:"label_limit,omitempty"`
	// LabelNameLengthLimit and LabelValueLengthLimit bound one label's
	// name and value, in bytes.
	LabelNameLengthLimit  *int `yaml:"label_name_length_limit,omitempty"`
	LabelValueLengthLimit *int `yaml:"label_value_length_limit,omitempty"`
	// RankLimit bounds the ranks (DP × TP × PP workers) of one server.
	RankLimit *int `yaml:"rank_limit,omitempty"`
}

// TargetLimits are the limits in force for one target; 0 is no limit.
type TargetLimits struct {
	Samples          int
	Labels           int
	LabelNameLength  int
	LabelValueLength int
	Ranks            int
}

// DefaultLimits are the limits of a target whose config sets none. The
// simulator's faithful pages (scrape's TestDefaultLimitsFitRealPages)
// measure: SGLang DP=8 x TP=8 with DP attention 1,475 samples and 64 ranks,
// vLLM DP=8 16 labels on a sample (cache_config_info), label values of 58
// bytes; every default leaves at least 8 times that, while a cardinality
// bomb or a megabyte label stays far above it.
func DefaultLimits() TargetLimits {
	return TargetLimits{Samples: 20000, Labels: 128, LabelNameLength: 256, LabelValueLength: 2048, Ranks: 512}
}

// LimitKeys are the config keys of the limits, in TargetLimits' order.
var LimitKeys = []string{"sample_limit", "label_limit", "label_name_length_limit", "label_value_length_limit", "rank_limit"}

func (l *Limits) fields() []*int {
	return []*int{l.SampleLimit, l.LabelLimit, l.LabelNameLengthLimit, l.LabelValueLengthLimit, l.RankLimit}
}

// Resolve returns the limits in force for a target with limits l under
// the global limits g: l's value where set, else g's, else the default.
func (l Limits) Resolve(g Limits) TargetLimits {
	d := DefaultLimits()
	out := []*int{&d.Samples, &d.Labels, &d.LabelNameLength, &d.LabelValueLength, &d.Ranks}
	lf, gf := l.fields(), g.fields()
	for i := range out {
		switch {
		case lf[i] != nil:
			*out[i] = *lf[i]
		case gf[i] != nil:
			*out[i] = *gf[i]
		}
	}
	return d
}

// TargetLimits returns the limits in force for targets[i].
func (c *Config) TargetLimits(i int) TargetLimits {
	return c.Targets[i].Limits.Resolve(c.Global.Limits)
}

// validateLimits reports negative limits, global and per target.
func (c *Config) validateLimits(v *validator) {
	check := func(path []any, l *Limits) {
		for i, p := range l.fields() {
			if p != nil && *p < 0 {
				v.addf(append(append([]any{}, path...), LimitKeys[i]), "%d is negative; use a positive number, or 0 for no limit", *p)
			}
		}
	}
	check([]any{"global"}, &c.Global.Limits)
	for i := range c.Targets {
		check([]any{"targets", i}, &c.Targets[i].Limits)
	}
}

// Warnings returns what is valid in the config but probably not meant,
// for `check config` to show: probe.allow globs that look like addresses
// (a glob matches host names only, so "10.0.0.*" allows no address; write
// a CIDR such as 10.0.0.0/24).
func (c *Config) Warnings() []string {
	var out []string
	for i, a := range c.Probe.Allow {
		if LooksLikeAddress(a) {
			out = append(out, fmt.Sprintf("probe.allow[%d]: %q looks like an address but is a host name glob, which matches no IP address; write a CIDR such as %s", i, a, cidrHint(a)))
		}
	}
	return out
}

// LooksLikeAddress reports whether a probe.allow glob (no '/') is made of
// the characters of an IP address and glob characters only: "10.0.0.*",
// "192.168.?.1", "fd00::*".
func LooksLikeAddress(glob string) bool {
	if strings.Contains(glob, "/") || net.ParseIP(glob) != nil || !strings.ContainsAny(glob, "*?[") {
		return false
	}
	digits := false
	for _, r := range glob {
		switch {
		case r >= '0' && r <= '9':
			digits = true
		case r == '.' || r == ':' || r == '*' || r == '?' || r == '[' || r == ']' || r == '-' || r == '!' || r == '^':
		case (r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') && strings.Contains(glob, ":"):
		default:
			return false
		}
	}
	return digits
}

// cidrHint suggests a CIDR for an address-like glob: the fixed leading
// octets of an IPv4 glob, else an example.
func cidrHint(glob string) string {
	if strings.Contains(glob, ":") {
		return "fd00::/64"
	}
	parts := strings.Split(glob, ".")
	if len(parts) == 4 {
		var fixed []string
		for _, p := range parts {
			if strings.ContainsAny(p, "*?[") {
				break
			}
			fixed = append(fixed, p)
		}
		if len(fixed) > 0 && len(fixed) < 4 {
			for len(fixed) < 4 {
				fixed = append(fixed, "0")
			}
			return fmt.Sprintf("%s/%d", strings.Join(fixed, "."), 8*countFixed(parts))
		}
	}
	return "10.0.0.0/24"
}

func countFixed(parts []string) int {
	n := 0
	for _, p := range parts {
		if strings.ContainsAny(p, "*?[") {
			break
		}
		n++
	}
	return n
}
