package engine

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/expo"
	"github.com/kvwatch/kvwatch/internal/kv"
)

// Shorthands for expected values, written by hand in the tests.
func dir(x float64) kv.Value { return kv.Of(x) }
func der(x float64) kv.Value { return kv.DerivedOf(x) }
func res(x float64) kv.Value { return kv.ReservedOf(x) }

var na = kv.Value{}

// valueCmp compares Values: same provenance and, when known, the same number
// to 1e-9 relative.
var valueCmp = cmp.Comparer(func(a, b kv.Value) bool {
	if a.Prov != b.Prov {
		return false
	}
	if !a.OK() {
		return true
	}
	return math.Abs(a.V-b.V) <= 1e-9*math.Max(1, math.Max(math.Abs(a.V), math.Abs(b.V)))
})

// summary is the part of a kv.Server the table tests compare.
type summary struct {
	Engine, Generation, Model string
	Role                      kv.Role
	ContextLength             kv.Value
	kv.Signals
	Spread kv.Value
	Ranks  int
	Router *kv.Router
	// Warnings are the reasons of the server's warnings, in order.
	Warnings []string
	// Pools are the server's further KV pools.
	Pools []kv.CachePool
	// Unavailable are the reasons the server gives for unknown values.
	Unavailable []string
}

func summarize(s kv.Server) summary {
	out := summary{Engine: s.Engine, Generation: s.Generation, Model: s.Model, Role: s.Role,
		ContextLength: s.ContextLength, Signals: s.Signals, Spread: s.Spread, Ranks: len(s.Ranks), Router: s.Router,
		Pools: s.CachePools}
	for _, w := range s.Warnings {
		out.Warnings = append(out.Warnings, w.Reason)
	}
	for _, u := range s.Unavailable {
		out.Unavailable = append(out.Unavailable, u.Reason)
	}
	return out
}

// normalizeBody parses body with the registry's Want, detects the engine
// and normalizes, failing the test on any error.
func normalizeBody(t testing.TB, body, contentType string, extra map[string][]byte) kv.Server {
	t.Helper()
	return normalizeInput(t, body, contentType, Input{Extra: extra})
}

// normalizeInput is normalizeBody with in's other fields (in.Page is the
// parsed body).
func normalizeInput(t testing.TB, body, contentType string, in Input) kv.Server {
	t.Helper()
	r := NewRegistry()
	p, err := expo.NewParser(r.ColonPrefixes()...).Parse([]byte(body), contentType, r.Want)
	if err != nil {
		t.Fatalf("expo.Parse: %v", err)
	}
	a, err := r.Detect(p)
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	in.Page = p
	s, err := a.Normalize(in)
	if err != nil {
		t.Fatalf("%s.Normalize: %v", a.Name(), err)
	}
	return s
}
