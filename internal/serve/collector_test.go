package serve

import (
	"github.com/kvwatch/kvwatch/internal/config"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/scrape"
	"github.com/kvwatch/kvwatch/internal/signal"
	"github.com/kvwatch/kvwatch/internal/testenv"
)

// rank is one engine rank reporting capacity and used tokens; a negative
// value is one the rank does not report.
func rank(dp, tp, pp string, capacity, used float64) kv.Rank {
	r := kv.Rank{RankID: kv.RankID{DP: dp, TP: tp, PP: pp}}
	if capacity >= 0 {
		r.Capacity = kv.Of(capacity)
	}
	if used >= 0 {
		r.Used = kv.Of(used)
	}
	return r
}

// TestCollectorRankSeriesPerDPRank checks that the kvwatch_rank_* families
// come once per DP rank with the dp_rank label only, TP and PP ranks
// collapsed, and not at all for servers with one DP rank.
func TestCollectorRankSeriesPerDPRank(t *testing.T) {
	const (
		usage = "kvwatch_rank_kv_usage_ratio"
		used  = "kvwatch_rank_kv_used_tokens"
		capa  = "kvwatch_rank_kv_capacity_tokens"
	)
	for _, c := range []struct {
		name  string
		ranks []kv.Rank
		// want maps family → label set → value, worked out by hand.
		want map[string]map[string]float64
	}{
		{
			name: "dp2 tp2 pp2",
			ranks: []kv.Rank{
				rank("0", "0", "0", 1000, 300), rank("0", "1", "0", 1000, 300),
				rank("0", "0", "1", 1000, 300), rank("0", "1", "1", 1000, 300),
				rank("1", "0", "0", 1000, 600), rank("1", "1", "0", 1000, 600),
				rank("1", "0", "1", 1000, 600), rank("1", "1", "1", 1000, 600),
			},
			want: map[string]map[string]float64{
				usage: {"dp_rank=0": 0.3, "dp_rank=1": 0.6},
				used:  {"dp_rank=0": 300, "dp_rank=1": 600},
				capa:  {"dp_rank=0": 1000, "dp_rank=1": 1000},
			},
		},
		{
			// One TP rank of DP 1 reports no used tokens: the other's counts.
			name: "dp2 tp2, a TP rank without used",
			ranks: []kv.Rank{
				rank("0", "0", "", 800, 200), rank("0", "1", "", 800, 200),
				rank("1", "0", "", 800, -1), rank("1", "1", "", 800, 400),
			},
			want: map[string]map[string]float64{
				usage: {"dp_rank=0": 0.25, "dp_rank=1": 0.5},
				used:  {"dp_rank=0": 200, "dp_rank=1": 400},
				capa:  {"dp_rank=0": 800, "dp_rank=1": 800},
			},
		},
		{
			// Unknown is not zero: DP 1's capacity, and so its ratio, are absent.
			name: "dp2, one DP rank without capacity",
			ranks: []kv.Rank{
				rank("0", "", "", 1000, 100), rank("1", "", "", -1, 700),
			},
			want: map[string]map[string]float64{
				usage: {"dp_rank=0": 0.1},
				used:  {"dp_rank=0": 100, "dp_rank=1": 700},
				capa:  {"dp_rank=0": 1000},
			},
		},
		{
			name: "dp4 as vLLM engines",
			ranks: []kv.Rank{
				rank("0", "", "", 100, 10), rank("1", "", "", 100, 20),
				rank("2", "", "", 100, 30), rank("3", "", "", 100, 40),
			},
			want: map[string]map[string]float64{
				usage: {"dp_rank=0": 0.1, "dp_rank=1": 0.2, "dp_rank=2": 0.3, "dp_rank=3": 0.4},
				used:  {"dp_rank=0": 10, "dp_rank=1": 20, "dp_rank=2": 30, "dp_rank=3": 40},
				capa:  {"dp_rank=0": 100, "dp_rank=1": 100, "dp_rank=2": 100, "dp_rank=3": 100},
			},
		},
		{
			// TP=4 without DP: the rank series would repeat the server's.
			name: "tp4 without DP label",
			ranks: []kv.Rank{
				rank("", "0", "0", 1000, 500), rank("", "1", "0", 1000, 500),
				rank("", "2", "0", 1000, 500), rank("", "3", "0", 1000, 500),
			},
			want: map[string]map[string]float64{usage: {}, used: {}, capa: {}},
		},
		{
			name: "one DP rank labelled 0, tp2",
			ranks: []kv.Rank{
				rank("0", "0", "0", 1000, 500), rank("0", "1", "0", 1000, 500),
			},
			want: map[string]map[string]float64{usage: {}, used: {}, capa: {}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, Ranks: c.ranks}
			s.Rollup()
			e := entry{
				target:  &scrape.Target{Name: "srv", Labels: map[string]string{config.TargetLabelCluster: "c1", config.TargetLabelPool: "p1"}},
				scraped: true,
				res:     scrape.Result{Server: s},
				role:    kv.RoleDecode,
			}
			reg := prometheus.NewPedanticRegistry()
			if err := reg.Register(newCollector(func() []entry { return []entry{e} })); err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]float64{usage: {}, used: {}, capa: {}}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			ident := map[string]string{"server": "srv", "role": "decode", "kv_cluster": "c1", "pool": "p1"}
			for _, mf := range mfs {
				if got[mf.GetName()] == nil {
					continue
				}
				for _, m := range mf.GetMetric() {
					var rest []string
					for _, l := range m.GetLabel() {
						if want, ok := ident[l.GetName()]; ok {
							if l.GetValue() != want {
								t.Errorf("%s: label %s=%q, want %q", mf.GetName(), l.GetName(), l.GetValue(), want)
							}
							continue
						}
						rest = append(rest, l.GetName()+"="+l.GetValue())
					}
					got[mf.GetName()][strings.Join(rest, ",")] = value(m)
				}
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("rank series (-want +got):\n%s", d)
			}
		})
	}
}

// Walk yields exactly the samples Gather does (what the history records
// from either is the same).
func TestWalkEqualsGather(t *testing.T) {
	a := testenv.EngineServer(t, "", page(t, "sglang-dp2.prom"))
	d := start(t, Options{Pipeline: pipe(t, config.Sources{Config: configWith(t, a.URL, "http://127.0.0.1:1/metrics")})})
	waitFor(t, "the first round", d.Ready)
	type sample struct {
		name    string
		counter bool
		v       float64
		labels  string
	}
	key := func(pairs []string) string {
		var kv []string
		for i := 0; i+1 < len(pairs); i += 2 {
			if pairs[i+1] != "" {
				kv = append(kv, pairs[i]+"="+pairs[i+1])
			}
		}
		slices.Sort(kv)
		return strings.Join(kv, ",")
	}
	var walked []sample
	d.Walk(func(name string, counter bool, v float64, pairs ...string) {
		walked = append(walked, sample{name, counter, v, key(pairs)})
	})
	mfs, err := d.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var gathered []sample
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var pairs []string
			for _, lp := range m.GetLabel() {
				pairs = append(pairs, lp.GetName(), lp.GetValue())
			}
			v := m.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			gathered = append(gathered, sample{mf.GetName(), mf.GetType() == dto.MetricType_COUNTER, v, key(pairs)})
		}
	}
	less := func(a, b sample) int { return strings.Compare(a.name+"{"+a.labels, b.name+"{"+b.labels) }
	slices.SortFunc(walked, less)
	slices.SortFunc(gathered, less)
	if len(gathered) < 40 {
		t.Fatalf("gathered only %d samples", len(gathered))
	}
	if diff := cmp.Diff(gathered, walked, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("Walk differs from Gather (-gather +walk):\n%s", diff)
	}
}

// gatherEntry returns what the collector exports for one entry: family →
// labels beyond the identity labels → value.
func gatherEntry(t *testing.T, e entry) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(newCollector(func() []entry { return []entry{e} })); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ident := map[string]bool{"server": true, "role": true, "kv_cluster": true, "pool": true}
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			var rest []string
			for _, l := range m.GetLabel() {
				if !ident[l.GetName()] {
					rest = append(rest, l.GetName()+"="+l.GetValue())
				}
			}
			got[mf.GetName()][strings.Join(rest, ",")] = value(m)
		}
	}
	return got
}

// TestCollectorDemandPartialImplausible: demand is its own family (above 1
// under overload), reserved stays absent for SGLang; a partial sum and an
// implausible value are not exported, and the warnings are, by reason.
func TestCollectorDemandPartialImplausible(t *testing.T) {
	s := &kv.Server{Engine: "sglang", Role: kv.RoleDecode, Ranks: []kv.Rank{
		{RankID: kv.RankID{DP: "0"}, Signals: kv.Signals{Capacity: kv.Of(1000), Used: kv.Of(900),
			DemandRatio: kv.Of(17.6), Running: kv.Of(-2)}},
		{RankID: kv.RankID{DP: "1"}, Signals: kv.Signals{Capacity: kv.Of(1000), DemandRatio: kv.Of(0.4)}},
	}}
	s.Rollup()
	s.Check()
	e := entry{target: &scrape.Target{Name: "srv"}, scraped: true, res: scrape.Result{Server: s}, role: kv.RoleDecode}
	got := gatherEntry(t, e)
	// Demand: 17,600 + 400 tokens over 2,000 = 9.
	if v, ok := got["kvwatch_kv_demand_tokens"][""]; !ok || v != 18000 {
		t.Errorf("demand tokens = %v (%v), want 18000", v, ok)
	}
	if v, ok := got["kvwatch_kv_demand_ratio"][""]; !ok || v != 9 {
		t.Errorf("demand ratio = %v (%v), want 9", v, ok)
	}
	if v, ok := got["kvwatch_kv_capacity_tokens"][""]; !ok || v != 2000 {
		t.Errorf("capacity = %v (%v), want 2000", v, ok)
	}
	for _, absent := range []string{"kvwatch_kv_reserved_ratio", "kvwatch_kv_used_tokens", "kvwatch_kv_usage_ratio",
		"kvwatch_requests_running", "kvwatch_kv_available_tokens", "kvwatch_kv_rank_spread_ratio"} {
		if len(got[absent]) > 0 {
			t.Errorf("%s exported: %v; want absent (partial, implausible or not reported)", absent, got[absent])
		}
	}
	want := map[string]float64{}
	for _, r := range kv.WarningReasons() {
		want["reason="+r] = 0
	}
	want["reason="+kv.WarnNegative] = 1 // running -2 on dp0
	if d := cmp.Diff(want, got["kvwatch_target_warnings"]); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	info := got["kvwatch_signal_info"]
	for _, k := range []string{"provenance=partial,signal=used", "provenance=implausible,signal=running",
		"provenance=derived,signal=demand_ratio"} {
		if _, ok := info[k]; !ok {
			t.Errorf("signal info lacks %s: %v", k, info)
		}
	}
}

// TestWarningReasonsDocumented: every reason kv defines is in the HELP of
// kvwatch_target_warnings.
func TestWarningReasonsDocumented(t *testing.T) {
	for _, r := range kv.WarningReasons() {
		if !strings.Contains(signal.TargetWarnings.Help, r) {
			t.Errorf("reason %s missing from %s's help", r, signal.TargetWarnings.Name)
		}
	}
}
