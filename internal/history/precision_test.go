package history

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

func TestRoundSignificand(t *testing.T) {
	tests := []struct {
		name     string
		in, want float64
	}{
		{"zero", 0, 0},
		{"one", 1, 1},
		{"the smallest step above one is kept", 1 + 0x1p-20, 1 + 0x1p-20},
		{"below half a step rounds down", 1 + 0x1p-22, 1},
		{"half a step rounds away from zero", 1 + 0x1p-21, 1 + 0x1p-20},
		{"negative half a step", -(1 + 0x1p-21), -(1 + 0x1p-20)},
		{"carry into the exponent", 2 - 0x1p-30, 2},
		{"a quarter is exact", 0.25, 0.25},
		{"+Inf", math.Inf(1), math.Inf(1)},
		{"subnormal numbers stay", 0x1.23456789p-1030, 0x1.23456789p-1030},
		{"largest float64 does not become +Inf", math.MaxFloat64, math.Float64frombits(math.Float64bits(math.MaxFloat64) &^ (1<<32 - 1))},
	}
	for _, tt := range tests {
		if got := roundSignificand(tt.in); got != tt.want {
			t.Errorf("%s: roundSignificand(%v) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
	if got := roundSignificand(math.Float64frombits(value.StaleNaN)); !value.IsStaleNaN(got) {
		t.Errorf("roundSignificand(StaleNaN) = %x, want the staleness marker unchanged", math.Float64bits(got))
	}
}

// TestRoundSignificandError checks the documented bound (docs/web.md): the
// relative error is at most 2^-21 < 4.8e-7, and the 32 low significand
// bits are zero, which is what makes the XOR encoding cheap.
func TestRoundSignificandError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		v := math.Float64frombits(r.Uint64())
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) < 0x1p-1022 {
			continue
		}
		got := roundSignificand(v)
		if rel := math.Abs(got-v) / math.Abs(v); rel > 0x1p-21 {
			t.Fatalf("roundSignificand(%v) = %v, relative error %g > 2^-21", v, got, rel)
		}
		if low := math.Float64bits(got) & (1<<32 - 1); low != 0 {
			t.Fatalf("roundSignificand(%v) = %v has low bits %x, want 0", v, got, low)
		}
	}
}

// TestReducedPrecisionSeries appends through the store: ratios, durations
// and recording-rule rates, ratios and derivatives come back rounded
// (within 2^-21), token counts, counters, sums and timestamps exactly.
func TestReducedPrecisionSeries(t *testing.T) {
	st := New(Options{Retention: 24 * time.Hour})
	ts := t0.UnixMilli()
	tests := []struct {
		name    string
		v       float64
		rounded bool
	}{
		{"kvwatch_kv_usage_ratio", 0.123456789012345, true},
		{"kvwatch_rank_kv_usage_ratio", 0.987654321098765, true},
		{"kvwatch_target_scrape_duration_seconds", 0.002345678901234, true},
		{"kvwatch_kv_used_tokens", 123456789, false},
		{"kvwatch_prompt_tokens_total", 9007199254740991, false},
		{"kvwatch_target_last_success_timestamp_seconds", 1.8e9 + 0.123456, false},
		{"kvwatch_requests_running", 0.123456789012345, false},
		// Recording-rule results (level:metric:operations): rates, ratios
		// and derivatives are rounded, sums of token counts are not.
		{"server:kvwatch_prompt_tokens:rate5m", 1234.56789012345, true},
		{"server:kvwatch_prefix_cache_hit_per_query_tokens:ratio_rate5m", 0.456789012345678, true},
		{"server:kvwatch_kv_seconds_to_full:deriv15m", 345.678901234567, true},
		{"pool:kvwatch_kv_used_per_capacity:ratio", 0.876543210987654, true},
		{"server:kvwatch_generation_tokens:irate1m", 98765.4321098765, true},
		{"pool:kvwatch_kv_used_tokens:sum", 123456789012345, false},
		{"pool:kvwatch_generation_tokens:increase1h", 1234.56789012345, false},
		{"kvwatch_tokens:rate5m", 1234.56789012345, false}, // one colon: not a rule name
	}
	for _, tt := range tests {
		lset := labels.FromStrings(model.MetricNameLabel, tt.name, "server", "a")
		if !st.Append(lset, ts, tt.v) {
			t.Fatalf("Append(%s) refused", tt.name)
		}
		got := samplesOf(t, st.series[lset.Hash()][0].view(minInt64, maxInt64))
		if len(got) != 1 {
			t.Fatalf("%s: %d samples, want 1", tt.name, len(got))
		}
		v := got[0].V
		if !tt.rounded && v != tt.v {
			t.Errorf("%s: stored %v, want %v exactly", tt.name, v, tt.v)
		}
		if tt.rounded && (v == tt.v || math.Abs(v-tt.v)/tt.v > 0x1p-21) {
			t.Errorf("%s: stored %v for %v, want it rounded within 2^-21 relative", tt.name, v, tt.v)
		}
	}
	// A staleness marker on a rounded series stays a staleness marker.
	lset := labels.FromStrings(model.MetricNameLabel, "kvwatch_kv_usage_ratio", "server", "a")
	st.Append(lset, ts+5000, math.Float64frombits(value.StaleNaN))
	got := samplesOf(t, st.series[lset.Hash()][0].view(minInt64, maxInt64))
	if len(got) != 2 || !value.IsStaleNaN(got[1].V) {
		t.Errorf("kvwatch_kv_usage_ratio after a staleness marker: %v, want the marker last", got)
	}
}
