package stats

import "time"

// Timeline counts events per fixed interval since a start, for throughput
// over time. The zero value is unusable; make one with NewTimeline. Not
// safe for concurrent use: give each goroutine its own and Merge them.
type Timeline struct {
	interval time.Duration
	counts   []uint64
}

// NewTimeline counts per interval (at least one millisecond).
func NewTimeline(interval time.Duration) *Timeline {
	return &Timeline{interval: max(interval, time.Millisecond)}
}

// Add counts one event at offset since the start; negative offsets count
// in the first interval.
func (t *Timeline) Add(offset time.Duration) {
	i := max(int(offset/t.interval), 0)
	if i >= len(t.counts) {
		t.counts = append(t.counts, make([]uint64, i+1-len(t.counts))...)
	}
	t.counts[i]++
}

// Merge adds o's counts; both must have the same interval.
func (t *Timeline) Merge(o *Timeline) {
	if o == nil {
		return
	}
	if len(o.counts) > len(t.counts) {
		t.counts = append(t.counts, make([]uint64, len(o.counts)-len(t.counts))...)
	}
	for i, c := range o.counts {
		t.counts[i] += c
	}
}

// Interval is the width of one count.
func (t *Timeline) Interval() time.Duration { return t.interval }

// Rates is events per second in each interval, up to (excluding) the
// interval that starts at or after span; span ≤ 0 keeps every interval.
func (t *Timeline) Rates(span time.Duration) []float64 {
	n := len(t.counts)
	if span > 0 {
		n = int((span + t.interval - 1) / t.interval)
	}
	out := make([]float64, n)
	sec := t.interval.Seconds()
	for i := range n {
		if i < len(t.counts) {
			out[i] = float64(t.counts[i]) / sec
		}
	}
	return out
}
