package fairness

import (
	"math"
	"time"
)

// bucket is a token bucket: it fills at rate tokens per second up to
// burst. Its balance may go negative when a cost is charged after the
// fact (list bytes); it then refills from below zero.
type bucket struct {
	tokens float64
	last   time.Time
}

func newBucket(burst float64, now time.Time) bucket { return bucket{tokens: burst, last: now} }

func (b *bucket) refill(rate, burst float64, now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = math.Min(burst, b.tokens+dt*rate)
	}
	b.last = now
}

// take takes n tokens if it can; otherwise it says how long until it
// could.
func (b *bucket) take(n, rate, burst float64, now time.Time) (ok bool, wait time.Duration) {
	b.refill(rate, burst, now)
	if b.tokens >= n {
		b.tokens -= n
		return true, 0
	}
	return false, seconds((n - b.tokens) / rate)
}

// debt is how long until the balance is back to zero.
func (b *bucket) debt(rate, burst float64, now time.Time) time.Duration {
	b.refill(rate, burst, now)
	if b.tokens >= 0 {
		return 0
	}
	return seconds(-b.tokens / rate)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// retryAfter rounds a wait up to whole seconds, at least one, as
// Retry-After carries it.
func retryAfter(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
