package stats

import (
	"math"
	"slices"
)

// Spread is how a figure varied over repeated runs: the median, the
// smallest and largest value, and how many runs gave a value.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Of is the spread of values; NaN and ±Inf values (a run that could not
// measure the figure) are left out. The median of an even count is the
// mean of the two middle values. No values give a zero Spread (N == 0).
func Of(values []float64) Spread {
	vs := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return Spread{}
	}
	slices.Sort(vs)
	n := len(vs)
	med := vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return Spread{Median: med, Min: vs[0], Max: vs[n-1], N: n}
}

// Ratios is the spread of b[i]/a[i] over runs measured side by side (run i
// of both targets in the same harness run); pairs where either value is
// missing or a[i] is zero are left out.
func Ratios(a, b []float64) Spread {
	n := min(len(a), len(b))
	rs := make([]float64, 0, n)
	for i := range n {
		if a[i] == 0 || math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			continue
		}
		rs = append(rs, b[i]/a[i])
	}
	return Of(rs)
}

// Slope is the least-squares slope of ys over xs (how much y grows per
// unit of x), robust to noise that averages out, such as a garbage
// collector's sawtooth. ok is false with fewer than two distinct xs.
func Slope(xs, ys []float64) (slope float64, ok bool) {
	n := min(len(xs), len(ys))
	if n < 2 {
		return 0, false
	}
	var mx, my float64
	for i := range n {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var cov, vx float64
	for i := range n {
		dx := xs[i] - mx
		cov += dx * (ys[i] - my)
		vx += dx * dx
	}
	if vx == 0 {
		return 0, false
	}
	return cov / vx, true
}
