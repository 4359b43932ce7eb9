package forecast

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTheilSen(t *testing.T) {
	cases := []struct {
		name string
		x, y []float64
		want Trend
		ok   bool
	}{
		{
			// Every pairwise slope is 2: the interval is that slope too.
			name: "exact line",
			x:    []float64{0, 1, 2, 3, 4}, y: []float64{1, 3, 5, 7, 9},
			want: Trend{Slope: 2, Intercept: 1, SlopeLow: 2, SlopeHigh: 2, InterceptLow: 1, InterceptHigh: 1, N: 5},
			ok:   true,
		},
		{
			// Slopes sorted: −26 1 1 1 1 1 1 10 14.5 28; the median is 1,
			// y − x is 0 0 0 27 0 (median 0). n = 5: σ_S = √(5·4·15/18) =
			// 4.08, 1.96σ = 8.00, so ranks round(1.0)−1 = 0 and round(9.0)
			// = 9: the lowest and highest slope; y + 26x is 0 27 54 108
			// 108 (median 54), y − 28x is 0 −27 −54 −54 −108 (median −54).
			name: "one outlier",
			x:    []float64{0, 1, 2, 3, 4}, y: []float64{0, 1, 2, 30, 4},
			want: Trend{Slope: 1, Intercept: 0, SlopeLow: -26, SlopeHigh: 28, InterceptLow: 54, InterceptHigh: -54, N: 5},
			ok:   true,
		},
		{
			// y = x² for x = 0..7: the slope between i and j is i + j. The
			// 28 sums sorted: 1 2 3 3 4 4 5 5 5 6 6 6 7 7 7 7 8 8 8 9 9 9 10
			// 10 11 11 12 13, median (7+7)/2 = 7. σ_S = √(8·7·21/18) =
			// 8.083, 1.96σ = 15.84: ranks round(6.08)−1 = 5 (slope 4) and
			// round(21.92) = 22 (slope 10). Intercepts: median of x²−7x
			// (0 −6 −10 −12 −12 −10 −6 0) = −8, of x²−4x (0 −3 −4 −3 0 5
			// 12 21) = 0, of x²−10x (0 −9 −16 −21 −24 −25 −24 −21) = −21.
			name: "parabola",
			x:    []float64{0, 1, 2, 3, 4, 5, 6, 7}, y: []float64{0, 1, 4, 9, 16, 25, 36, 49},
			want: Trend{Slope: 7, Intercept: -8, SlopeLow: 4, SlopeHigh: 10, InterceptLow: 0, InterceptHigh: -21, N: 8},
			ok:   true,
		},
		{
			// Days before now, as the plan fits them: y = 700 + 10x.
			name: "negative x",
			x:    []float64{-4, -3, -2, -1, 0}, y: []float64{660, 670, 680, 690, 700},
			want: Trend{Slope: 10, Intercept: 700, SlopeLow: 10, SlopeHigh: 10, InterceptLow: 700, InterceptHigh: 700, N: 5},
			ok:   true,
		},
		{name: "one point", x: []float64{1}, y: []float64{1}},
		{name: "no points"},
		{name: "one x", x: []float64{2, 2, 2}, y: []float64{1, 2, 3}},
		{name: "lengths differ", x: []float64{1, 2, 3}, y: []float64{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := TheilSen(c.x, c.y)
			if ok != c.ok {
				t.Fatalf("TheilSen(%v, %v) ok = %v, want %v", c.x, c.y, ok, c.ok)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("TheilSen(%v, %v) (-want +got):\n%s", c.x, c.y, diff)
			}
		})
	}
}

func TestServersToAdd(t *testing.T) {
	cases := []struct {
		name                             string
		load, w, capacity, size, largest float64
		want                             int
		ok                               bool
	}{
		// 4 × 100: the rest after draining one is 300, 0.9 × 300 = 270.
		{"fits n-1", 200, 0.9, 400, 100, 100, 0, true},
		{"at the threshold", 270, 0.9, 400, 100, 100, 0, true},
		// 0.9 × (400 + 100 − 100) = 360 ≥ 300.
		{"one more", 300, 0.9, 400, 100, 100, 1, true},
		// 0.9 × (300 + 100k) ≥ 600: 300 + 100k ≥ 666.7, k ≥ 3.67.
		{"several", 600, 0.9, 400, 100, 100, 4, true},
		// Draining the only server leaves nothing: one more, whose 90
		// tokens at 0.9 hold 10.
		{"single server", 10, 0.9, 100, 100, 100, 1, true},
		// 100 + 100 + 300: the 300 is drained. k = 1: 0.9 × 300 = 270 <
		// 300; k = 2: 0.9 × 400 = 360.
		{"mixed sizes", 300, 0.9, 500, 100, 300, 2, true},
		// 0.9 × (1000 + 250k − 250) ≥ 1600: k ≥ 4.11.
		{"growing pool at the horizon", 1600, 0.9, 1000, 250, 250, 5, true},
		{"no size", 300, 0.9, 400, 0, 100, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ServersToAdd(c.load, c.w, c.capacity, c.size, c.largest)
			if got != c.want || ok != c.ok {
				t.Errorf("ServersToAdd(%g, %g, %g, %g, %g) = %d, %v, want %d, %v", c.load, c.w, c.capacity, c.size, c.largest, got, ok, c.want, c.ok)
			}
		})
	}
}
