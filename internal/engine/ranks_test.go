package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
)

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
