package forecast

import (
	"math"
	"slices"
)

// confidenceZ is the normal quantile of the slope's confidence interval:
// 1.96 for 95 %.
const confidenceZ = 1.96

// Trend is a straight line y = Intercept + Slope·x fitted by Theil–Sen:
// the slope is the median of the slopes between every two points, the
// intercept the median of y − Slope·x. Up to 29 % of the points can be
// anything (a day with a burst, one with a server down at its peak)
// without moving the line much, unlike least squares.
type Trend struct {
	Slope, Intercept float64
	// SlopeLow and SlopeHigh bound the slope at 95 % (Sen's interval,
	// from the distribution of Kendall's S: it needs no assumption about
	// the noise). InterceptLow and InterceptHigh are the intercepts of the
	// lines with those slopes (the median of y − slope·x).
	SlopeLow, SlopeHigh         float64
	InterceptLow, InterceptHigh float64
	// N is the number of points.
	N int
}

// At is the line's value at x.
func (t Trend) At(x float64) float64 { return t.Intercept + t.Slope*x }

// LowAt and HighAt are the values at x of the lines with the slope's
// bounds.
func (t Trend) LowAt(x float64) float64  { return t.InterceptLow + t.SlopeLow*x }
func (t Trend) HighAt(x float64) float64 { return t.InterceptHigh + t.SlopeHigh*x }

// TheilSen fits a Trend to the points (x[i], y[i]); the x are distinct.
// It needs at least 2 points; with fewer, ok is false.
func TheilSen(x, y []float64) (t Trend, ok bool) {
	n := len(x)
	if n < 2 || len(y) != n {
		return Trend{}, false
	}
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := range n {
		for j := i + 1; j < n; j++ {
			if x[j] != x[i] {
				slopes = append(slopes, (y[j]-y[i])/(x[j]-x[i]))
			}
		}
	}
	if len(slopes) == 0 {
		return Trend{}, false
	}
	slices.Sort(slopes)
	t.N = n
	t.Slope = median(slopes)
	// Sen's interval: the slopes ranked (N ∓ z·σ_S)/2, where σ_S² =
	// n(n−1)(2n+5)/18 is the variance of Kendall's S without ties.
	sigma := math.Sqrt(float64(n*(n-1)*(2*n+5)) / 18)
	m := float64(len(slopes))
	lo := int(math.Round((m-confidenceZ*sigma)/2)) - 1
	hi := int(math.Round((m + confidenceZ*sigma) / 2))
	t.SlopeLow = slopes[max(lo, 0)]
	t.SlopeHigh = slopes[min(hi, len(slopes)-1)]
	resid := make([]float64, n)
	intercept := func(b float64) float64 {
		for i := range n {
			resid[i] = y[i] - b*x[i]
		}
		slices.Sort(resid)
		return median(resid)
	}
	t.Intercept = intercept(t.Slope)
	t.InterceptLow = intercept(t.SlopeLow)
	t.InterceptHigh = intercept(t.SlopeHigh)
	return t, true
}

// median of sorted values (at least one).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
