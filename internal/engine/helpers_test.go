package engine

import (
	"fmt"
	"math"
	"strings"
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
}

func summarize(s kv.Server) summary {
	out := summary{Engine: s.Engine, Generation: s.Generation, Model: s.Model, Role: s.Role,
		ContextLength: s.ContextLength, Signals: s.Signals, Spread: s.Spread, Ranks: len(s.Ranks), Router: s.Router,
		Pools: s.CachePools}
	for _, w := range s.Warnings {
		out.Warnings = append(out.Warnings, w.Reason)
	}
	return out
}

// normalizeBody parses body with the registry's Want, detects the engine
// and normalizes, failing the test on any error.
func normalizeBody(t testing.TB, body, contentType string, extra map[string][]byte) kv.Server {
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
	s, err := a.Normalize(Input{Page: p, Extra: extra})
	if err != nil {
		t.Fatalf("%s.Normalize: %v", a.Name(), err)
	}
	return s
}

// dropEllipses removes the lines that are only "..." (elisions in the
// documents the fixtures were copied from; not valid exposition).
func dropEllipses(body string) string {
	lines := strings.SplitAfter(body, "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.TrimSpace(l) == "..." {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// TestRanksGet: get finds each rank again whatever the order asked (the
// rank after the last one found is only where it looks first), and list
// keeps the order first seen, with no rank twice.
func TestRanksGet(t *testing.T) {
	r := newRanks()
	id := func(tp string) kv.RankID { return kv.RankID{DP: "0", TP: tp} }
	for i, tp := range []string{"0", "1", "2", "2", "0", "1", "1", "2", "0", "3", "0"} {
		r.get(id(tp)).Running = sumValue(r.get(id(tp)).Running, float64(i))
	}
	got := r.list()
	want := []kv.Rank{
		{RankID: id("0"), Signals: kv.Signals{Running: dir(0 + 4 + 8 + 10)}},
		{RankID: id("1"), Signals: kv.Signals{Running: dir(1 + 5 + 6)}},
		{RankID: id("2"), Signals: kv.Signals{Running: dir(2 + 3 + 7)}},
		{RankID: id("3"), Signals: kv.Signals{Running: dir(9)}},
	}
	if diff := cmp.Diff(want, got, valueCmp); diff != "" {
		t.Errorf("ranks (-want +got):\n%s", diff)
	}
}

func sumValue(v kv.Value, x float64) kv.Value {
	if !v.OK() {
		return kv.Of(x)
	}
	return kv.Of(v.V + x)
}

// TestRanksOutliveTheirPage: a server's ranks are its own. The ranks are
// collected and rolled up in a pooled slice that the next page reuses; a
// server kept from an earlier page (serve keeps the last one per target,
// and its web UI and exporter read it meanwhile) must not change when
// later pages are read.
func TestRanksOutliveTheirPage(t *testing.T) {
	page := func(used int) string {
		var b strings.Builder
		for tp := range 4 {
			fmt.Fprintf(&b, "sglang:max_total_num_tokens{tp_rank=\"%d\"} 1000\nsglang:kv_used_tokens{tp_rank=\"%d\"} %d\n", tp, tp, used+tp)
		}
		b.WriteString("sglang:prompt_tokens_total 5\n") // the tokenizer's unlabelled entry, dropped by Rollup
		return b.String()
	}
	first := normalizeBody(t, page(100), "", nil)
	for used := 200; used < 600; used += 100 {
		normalizeBody(t, page(used), "", nil)
	}
	if len(first.Ranks) != 4 || cap(first.Ranks) != 4 {
		t.Fatalf("first page: %d ranks (cap %d), want 4 (cap 4)", len(first.Ranks), cap(first.Ranks))
	}
	for tp, r := range first.Ranks {
		if want := dir(float64(100 + tp)); r.TP != fmt.Sprint(tp) || r.Used != want {
			t.Errorf("first page's rank %d after later pages: tp %q used %v, want tp %d used %v", tp, r.TP, r.Used, tp, want)
		}
	}
}
