// Package stats holds the harness's statistics: a log-linear latency
// histogram (HDR-like, relative error under 1%), throughput timelines and
// the median-with-spread of repeated runs.
package stats

import (
	"math"
	"math/bits"
	"time"
)

// precision is the number of significant bits a bucket keeps: values below
// 2^precision have a bucket each, larger values share a bucket with
// neighbours within 1/2^(precision-1) (0.8%) of them.
const precision = 8

const (
	linear = 1 << precision       // values with one bucket each
	half   = 1 << (precision - 1) // buckets per power of two above linear
)

// Histogram records non-negative durations (nanoseconds) in log-linear
// buckets. The zero value is empty and ready; it is not safe for
// concurrent use (give each goroutine its own and Merge them).
type Histogram struct {
	counts   []uint64
	count    uint64
	sum      float64
	min, max int64
}

// Record adds one duration; negative values count as zero.
func (h *Histogram) Record(d time.Duration) { h.RecordValue(int64(d)) }

// RecordValue adds one value; negative values count as zero.
func (h *Histogram) RecordValue(v int64) {
	if v < 0 {
		v = 0
	}
	i := bucket(uint64(v))
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.count++
	h.sum += float64(v)
}

// Merge adds every value of o.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.counts = append(h.counts, make([]uint64, len(o.counts)-len(h.counts))...)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.sum += o.sum
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.count }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() int64 { return h.min }
func (h *Histogram) Max() int64 { return h.max }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.count == 0 {
		return 0
	}
	return h.sum / float64(h.count)
}

// Quantile returns the value at quantile q in [0, 1]: the middle of the
// bucket holding the ceil(q·count)-th smallest value, clamped to the exact
// minimum and maximum. Quantile(1) is the exact maximum; an empty
// histogram returns 0.
func (h *Histogram) Quantile(q float64) int64 {
	if h.count == 0 {
		return 0
	}
	if q >= 1 {
		return h.max
	}
	if q <= 0 {
		return h.min
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bounds(i)
			v := int64(lo + (hi-lo)/2)
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// Point is one point of a cumulative distribution: the fraction Q of
// values at or below Value.
type Point struct {
	Q     float64 `json:"q"`
	Value int64   `json:"v"`
}

// CDF samples the distribution at the given quantiles.
func (h *Histogram) CDF(qs []float64) []Point {
	if h.count == 0 {
		return nil
	}
	out := make([]Point, len(qs))
	for i, q := range qs {
		out[i] = Point{Q: q, Value: h.Quantile(q)}
	}
	return out
}

// CDFQuantiles are the quantiles reports sample: every percent, then the
// tail.
func CDFQuantiles() []float64 {
	qs := make([]float64, 0, 105)
	for p := 1; p < 100; p++ {
		qs = append(qs, float64(p)/100)
	}
	return append(qs, 0.995, 0.999, 0.9995, 0.9999, 1)
}

// bucket is the index of the bucket holding v. Above the linear range the
// index is the power of two (shift) and the precision top bits of v, whose
// leading one is dropped (mantissa in [half, 2·half)).
func bucket(v uint64) int {
	if v < linear {
		return int(v)
	}
	shift := bits.Len64(v) - precision // ≥ 1
	mantissa := int(v >> shift)
	return linear + (shift-1)*half + mantissa - half
}

// bounds is the smallest and largest value bucket i holds.
func bounds(i int) (lo, hi uint64) {
	if i < linear {
		return uint64(i), uint64(i)
	}
	j := i - linear
	shift := j/half + 1
	mantissa := uint64(j%half + half)
	lo = mantissa << shift
	return lo, lo + (1 << shift) - 1
}
