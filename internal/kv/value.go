// Package kv is kvwatch's normalized model of an inference server's KV cache
// and scheduler: values that carry their provenance, per-rank and per-server
// signals, the rank rollup (TP duplicates collapsed, DP ranks summed), the
// fleet view, headroom and counter rates. It does no I/O and knows no engine.
package kv

import (
	"encoding/json"
	"fmt"
	"math"
)

// Provenance says where a value comes from. The zero value is Unavailable,
// so a Value nobody set is unknown, never 0.
type Provenance uint8

const (
	// Unavailable: the engine does not report it (or the scrape failed).
	Unavailable Provenance = iota
	// Direct: read from an engine metric as is.
	Direct
	// Derived: computed from other values (e.g. vLLM used = ratio × capacity).
	Derived
	// Reserved: a reservation made at admission, not KV actually written
	// (TGI).
	Reserved
	// Partial: a sum over DP ranks where some ranks did not report the
	// value: a lower bound, not a total. Faces show it as "~900?"; the
	// exporter leaves it out (kvwatch_signal_info says partial).
	Partial
	// Implausible: the engine reported a value that cannot be true
	// (negative, used beyond capacity, beyond 2^53); the server carries a
	// Warning saying why. Faces flag it; nothing is computed from it.
	Implausible
)

var provNames = [...]string{"unavailable", "direct", "derived", "reserved", "partial", "implausible"}

func (p Provenance) String() string {
	if int(p) < len(provNames) {
		return provNames[p]
	}
	return fmt.Sprintf("provenance(%d)", uint8(p))
}

// MarshalText implements encoding.TextMarshaler.
func (p Provenance) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Provenance) UnmarshalText(b []byte) error {
	for i, n := range provNames {
		if n == string(b) {
			*p = Provenance(i)
			return nil
		}
	}
	return fmt.Errorf("unknown provenance %q", b)
}

// Value is one measurement and where it came from.
type Value struct {
	V    float64
	Prov Provenance
}

// Of returns a Value read directly from an engine; NaN and ±Inf are unknown.
func Of(v float64) Value { return with(v, Direct) }

// DerivedOf returns a Value computed from other values.
func DerivedOf(v float64) Value { return with(v, Derived) }

// ReservedOf returns a Value that is a reservation, not real use.
func ReservedOf(v float64) Value { return with(v, Reserved) }

func with(v float64, p Provenance) Value {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return Value{}
	}
	return Value{V: v, Prov: p}
}

// OK reports whether the value is known.
func (v Value) OK() bool { return v.Prov != Unavailable }

// Or returns v if known, else o.
func (v Value) Or(o Value) Value {
	if v.OK() {
		return v
	}
	return o
}

// As returns v with provenance p if v is known (used when a value computed
// from direct inputs is itself derived).
func (v Value) As(p Provenance) Value {
	if !v.OK() {
		return v
	}
	v.Prov = p
	return v
}

// combine gives the provenance of a value computed from a and b: the
// weaker of the two, at least Derived (Implausible > Partial > Reserved >
// Derived).
func combine(a, b Provenance) Provenance {
	return max(a, b, Derived)
}

// Trusted reports whether the value is known and neither partial nor
// implausible: a number that can be shown, summed or alerted on as is.
func (v Value) Trusted() bool { return v.OK() && v.Prov != Partial && v.Prov != Implausible }

// saturate keeps arithmetic finite: an overflow to ±Inf becomes ±MaxFloat64
// (such a value is implausible anyway, and Check flags it), NaN unknown.
func saturate(x float64, p Provenance) Value {
	switch {
	case math.IsNaN(x):
		return Value{}
	case math.IsInf(x, 0):
		return Value{V: math.Copysign(math.MaxFloat64, x), Prov: p}
	}
	return Value{V: x, Prov: p}
}

// Div returns v / d as a derived value; unknown if either is unknown or d is 0.
func (v Value) Div(d Value) Value {
	if !v.OK() || !d.OK() || d.V == 0 {
		return Value{}
	}
	return saturate(v.V/d.V, combine(v.Prov, d.Prov))
}

// Mul returns v × m as a derived value.
func (v Value) Mul(m Value) Value {
	if !v.OK() || !m.OK() {
		return Value{}
	}
	return saturate(v.V*m.V, combine(v.Prov, m.Prov))
}

// Sub returns v − s as a derived value.
func (v Value) Sub(s Value) Value {
	if !v.OK() || !s.OK() {
		return Value{}
	}
	return saturate(v.V-s.V, combine(v.Prov, s.Prov))
}

// jsonValue is the JSON form of a Value: value is null when unavailable.
type jsonValue struct {
	Value      *float64   `json:"value"`
	Provenance Provenance `json:"provenance"`
}

// MarshalJSON writes {"value": 12.5, "provenance": "direct"}, with
// "value": null when the value is unavailable.
func (v Value) MarshalJSON() ([]byte, error) {
	j := jsonValue{Provenance: v.Prov}
	if v.OK() {
		x := v.V
		j.Value = &x
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (v *Value) UnmarshalJSON(b []byte) error {
	var j jsonValue
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*v = Value{Prov: j.Provenance}
	if j.Value != nil && j.Provenance != Unavailable {
		v.V = *j.Value
	} else {
		v.Prov = Unavailable
	}
	return nil
}

// Mark adds the partial (~…?: a sum with missing parts) or implausible (!…:
// see the server's warnings) marks to s, the formatted v, for people-facing
// faces (status, top).
func Mark(v Value, s string) string {
	switch v.Prov {
	case Partial:
		return "~" + s + "?"
	case Implausible:
		return "!" + s
	}
	return s
}
