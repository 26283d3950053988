package stats

import (
	"math"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	f := func(values []float64, want Spread) {
		t.Helper()
		if got := Of(values); got != want {
			t.Errorf("Of(%v) = %+v, want %+v", values, got, want)
		}
	}
	f(nil, Spread{})
	f([]float64{7}, Spread{Median: 7, Min: 7, Max: 7, N: 1})
	f([]float64{3, 1, 2}, Spread{Median: 2, Min: 1, Max: 3, N: 3})
	f([]float64{4, 1, 3, 2}, Spread{Median: 2.5, Min: 1, Max: 4, N: 4})
	f([]float64{5, math.NaN(), 1, math.Inf(1), 3}, Spread{Median: 3, Min: 1, Max: 5, N: 3})
	f([]float64{math.NaN()}, Spread{})
	// The input is not reordered.
	in := []float64{3, 1, 2}
	Of(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("Of reordered its input: %v", in)
	}
}

func TestRatios(t *testing.T) {
	f := func(a, b []float64, want Spread) {
		t.Helper()
		if got := Ratios(a, b); got != want {
			t.Errorf("Ratios(%v, %v) = %+v, want %+v", a, b, got, want)
		}
	}
	f([]float64{100, 200, 50}, []float64{50, 100, 50}, Spread{Median: 0.5, Min: 0.5, Max: 1, N: 3})
	f([]float64{10, 0, 10}, []float64{20, 5, 30}, Spread{Median: 2.5, Min: 2, Max: 3, N: 2})
	f([]float64{10, 10}, []float64{20}, Spread{Median: 2, Min: 2, Max: 2, N: 1})
	f([]float64{math.NaN()}, []float64{1}, Spread{})
}

func TestTimeline(t *testing.T) {
	a := NewTimeline(100 * time.Millisecond)
	b := NewTimeline(100 * time.Millisecond)
	for i := range 10 {
		a.Add(time.Duration(i) * 10 * time.Millisecond) // 10 in the first interval
	}
	b.Add(250 * time.Millisecond)
	b.Add(-time.Second)
	a.Merge(b)
	got := a.Rates(400 * time.Millisecond)
	want := []float64{110, 0, 10, 0}
	if len(got) != len(want) {
		t.Fatalf("Rates = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("Rates = %v, want %v", got, want)
		}
	}
	if n := len(a.Rates(0)); n != 3 {
		t.Fatalf("Rates(0) has %d intervals, want 3", n)
	}
}

func TestSlope(t *testing.T) {
	// 10 KB per object under a sawtooth of ±40 KB with a period of 7.
	var xs, ys []float64
	for i := range 700 {
		x := float64(i * 10)
		saw := float64(i%7-3) * 40000 / 3
		xs = append(xs, x)
		ys = append(ys, 5e6+x*10000+saw)
	}
	s, ok := Slope(xs, ys)
	if !ok || math.Abs(s-10000)/10000 > 0.01 {
		t.Fatalf("Slope = %v, %v; want 10000 ±1%%", s, ok)
	}
	if _, ok := Slope([]float64{1, 1}, []float64{2, 3}); ok {
		t.Fatal("Slope of a single x answered")
	}
	if _, ok := Slope([]float64{1}, []float64{2}); ok {
		t.Fatal("Slope of one point answered")
	}
}
