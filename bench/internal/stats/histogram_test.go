package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	// Every bucket's bounds map back to it, buckets tile the values without
	// gaps, and a bucket is never wider than 1/128 of its lower bound.
	prevHi := uint64(0)
	for i := 0; i < 5000; i++ {
		lo, hi := bounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucket(lo) != i || bucket(hi) != i {
			t.Fatalf("bucket %d: bounds [%d, %d] map to %d and %d", i, lo, hi, bucket(lo), bucket(hi))
		}
		if lo >= linear && float64(hi-lo+1)/float64(lo) > 1.0/128+1e-12 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/128", i, lo, hi)
		}
		prevHi = hi
	}
	if b := bucket(math.MaxUint64); b <= 0 {
		t.Fatalf("bucket(MaxUint64) = %d", b)
	}
}

func TestQuantiles(t *testing.T) {
	f := func(name string, values []int64) {
		t.Helper()
		var h Histogram
		for _, v := range values {
			h.RecordValue(v)
		}
		sorted := slices.Clone(values)
		slices.Sort(sorted)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
			rank := int(math.Ceil(q * float64(len(sorted))))
			want := sorted[rank-1]
			got := h.Quantile(q)
			if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
				t.Errorf("%s: p%v = %d, want %d (±1%%), off by %.2f%%", name, q*100, got, want, rel*100)
			}
		}
		if h.Quantile(1) != sorted[len(sorted)-1] || h.Max() != sorted[len(sorted)-1] {
			t.Errorf("%s: max = %d / %d, want %d", name, h.Quantile(1), h.Max(), sorted[len(sorted)-1])
		}
		if h.Quantile(0) != sorted[0] || h.Min() != sorted[0] {
			t.Errorf("%s: min = %d, want %d", name, h.Quantile(0), sorted[0])
		}
		if h.Count() != uint64(len(values)) {
			t.Errorf("%s: count = %d, want %d", name, h.Count(), len(values))
		}
	}
	uniform := make([]int64, 100000)
	for i := range uniform {
		uniform[i] = int64(i+1) * 1000 // 1µs .. 100ms
	}
	f("uniform", uniform)

	r := rand.New(rand.NewPCG(1, 2))
	lognormal := make([]int64, 50000)
	for i := range lognormal {
		lognormal[i] = int64(math.Exp(r.NormFloat64()*1.5+14)) + 1 // ~1.2ms median, long tail
	}
	f("lognormal", lognormal)
	f("small integers", []int64{3, 1, 2, 5, 4, 7, 6, 9, 8, 10})
}

func TestQuantileExactSmall(t *testing.T) {
	// Below 256 every value has its own bucket: quantiles are exact.
	var h Histogram
	for v := int64(1); v <= 100; v++ {
		h.RecordValue(v)
	}
	for q, want := range map[float64]int64{0.5: 50, 0.9: 90, 0.99: 99, 1: 100, 0.001: 1} {
		if got := h.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %d, want %d", q, got, want)
		}
	}
}

func TestEmptyAndNegative(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.CDF([]float64{0.5}) != nil {
		t.Fatal("empty histogram should answer zeros")
	}
	h.Record(-time.Second)
	if h.Max() != 0 || h.Count() != 1 {
		t.Fatalf("negative value: max %d count %d", h.Max(), h.Count())
	}
}

func TestMerge(t *testing.T) {
	var a, b, all Histogram
	for v := int64(1); v <= 20000; v++ {
		all.RecordValue(v * 997)
		if v%3 == 0 {
			a.RecordValue(v * 997)
		} else {
			b.RecordValue(v * 997)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(nil)
	m.Merge(&Histogram{})
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Fatalf("merged count/min/max/mean %d/%d/%d/%v, want %d/%d/%d/%v",
			m.Count(), m.Min(), m.Max(), m.Mean(), all.Count(), all.Min(), all.Max(), all.Mean())
	}
	for _, q := range CDFQuantiles() {
		if m.Quantile(q) != all.Quantile(q) {
			t.Fatalf("merged p%v = %d, want %d", q*100, m.Quantile(q), all.Quantile(q))
		}
	}
}

func TestCDFMonotonic(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		h.RecordValue(r.Int64N(1e9))
	}
	pts := h.CDF(CDFQuantiles())
	for i := 1; i < len(pts); i++ {
		if pts[i].Value < pts[i-1].Value || pts[i].Q <= pts[i-1].Q {
			t.Fatalf("CDF not monotonic at %d: %+v then %+v", i, pts[i-1], pts[i])
		}
	}
	if last := pts[len(pts)-1]; last.Q != 1 || last.Value != h.Max() {
		t.Fatalf("CDF ends at %+v, want q=1 at max %d", last, h.Max())
	}
}
