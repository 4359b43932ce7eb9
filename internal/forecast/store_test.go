package forecast

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kvwatch/kvwatch/internal/kv"
	"github.com/kvwatch/kvwatch/internal/signal"
)

func TestCoverage(t *testing.T) {
	cases := []struct {
		name     string
		samples  []*float64 // most samples per period, nil: none
		min      []*float64 // fewest
		coverage []float64
		gaps     []bool
	}{
		{
			// The median period has 288: the fourth has 100 of them.
			name:     "a short period",
			samples:  []*float64{ptr(288.0), ptr(288.0), ptr(288.0), ptr(100.0)},
			min:      []*float64{ptr(288.0), ptr(288.0), ptr(288.0), ptr(100.0)},
			coverage: []float64{1, 1, 1, 100.0 / 288},
			gaps:     []bool{false, false, false, false},
		},
		{
			// 270 of 288 is 93.75 %, under 95 %: a gap; 280 (97.2 %) is not.
			name:     "a server with a gap",
			samples:  []*float64{ptr(288.0), ptr(288.0), ptr(289.0)},
			min:      []*float64{ptr(270.0), ptr(280.0), ptr(289.0)},
			coverage: []float64{1, 1, 1},
			gaps:     []bool{true, false, false},
		},
		{
			name:     "a period without samples",
			samples:  []*float64{nil, ptr(5760.0), ptr(5760.0)},
			min:      []*float64{nil, ptr(5760.0), ptr(5760.0)},
			coverage: []float64{0, 1, 1},
			gaps:     []bool{false, false, false},
		},
		{
			name:     "none",
			samples:  []*float64{nil, nil},
			min:      []*float64{nil, nil},
			coverage: []float64{0, 0},
			gaps:     []bool{false, false},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := make([]Period, len(c.samples))
			for i := range ps {
				ps[i].Samples, ps[i].SamplesMin = c.samples[i], c.min[i]
			}
			coverage(ps)
			var cov []float64
			var gaps []bool
			for _, pe := range ps {
				cov, gaps = append(cov, pe.Coverage), append(gaps, pe.ServerGaps)
			}
			if diff := cmp.Diff(c.coverage, cov); diff != "" {
				t.Errorf("coverage (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.gaps, gaps); diff != "" {
				t.Errorf("server gaps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueries pins the PromQL Read asks, written out by hand; the pool's
// labels are signal's (another name for one changes them all).
func TestQueries(t *testing.T) {
	r := Request{Period: 24 * time.Hour, Resolution: 10 * time.Minute}
	l := strings.Join(signal.PoolLabels(), ", ")
	want := [nSeries]string{
		sLoad:       "max_over_time((sum by (L) (avg_over_time(kvwatch_kv_used_tokens[10m]) + avg_over_time(kvwatch_kv_demand_tokens[10m]) or avg_over_time(kvwatch_kv_used_tokens[10m])))[1d:10m])",
		sUsed:       "max_over_time((sum by (L) (avg_over_time(kvwatch_kv_used_tokens[10m])))[1d:10m])",
		sDemand:     "max_over_time((sum by (L) (avg_over_time(kvwatch_kv_demand_tokens[10m])))[1d:10m])",
		sRunning:    "max_over_time((sum by (L) (avg_over_time(kvwatch_requests_running[10m])))[1d:10m])",
		sCapacity:   "sum by (L) (max_over_time(kvwatch_kv_capacity_tokens[1d]))",
		sServers:    "count by (L) (max_over_time(kvwatch_kv_capacity_tokens[1d]))",
		sSamplesMax: "max by (L) (count_over_time(kvwatch_kv_used_tokens[1d]))",
		sSamplesMin: "min by (L) (count_over_time(kvwatch_kv_used_tokens[1d]))",
	}
	got := r.Queries()
	for i := range want {
		if w := strings.ReplaceAll(want[i], "(L)", "("+l+")"); got[i] != w {
			t.Errorf("query %d = %s, want %s", i, got[i], w)
		}
	}
	if got, want := r.ServersQuery(), "max_over_time(kvwatch_kv_capacity_tokens[1d])"; got != want {
		t.Errorf("ServersQuery = %s, want %s", got, want)
	}
}

func TestComparePools(t *testing.T) {
	keys := []kv.PoolKey{
		{Role: kv.RoleDecode, Cluster: "grown"},
		{Role: kv.RoleUnified},
		{Role: kv.RoleDecode, Cluster: "grow"},
		{Role: kv.RolePrefill, Cluster: "grow"},
		{Role: kv.RoleDecode, Cluster: "grow", Pool: "b"},
		{Role: kv.RolePrefill},
	}
	slices.SortFunc(keys, comparePools)
	want := []kv.PoolKey{
		{Role: kv.RolePrefill},
		{Role: kv.RoleUnified},
		{Role: kv.RolePrefill, Cluster: "grow"},
		{Role: kv.RoleDecode, Cluster: "grow"},
		{Role: kv.RoleDecode, Cluster: "grow", Pool: "b"},
		{Role: kv.RoleDecode, Cluster: "grown"},
	}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("sorted pools (-want +got):\n%s", diff)
	}
}
