// Package load drives an operation at a concurrency, for a duration,
// closed-loop or at an open-loop target rate, and records latency,
// throughput over time and errors by HTTP code.
package load

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kgate/kgate/bench/internal/stats"
)

// Options shape one load run.
type Options struct {
	// Concurrency is the number of workers (default 1).
	Concurrency int
	// Duration is how long operations are started (required).
	Duration time.Duration
	// Rate is the target operations per second over all workers. Zero
	// runs closed-loop: each worker starts its next operation when the
	// previous one returns. With a rate, operations are scheduled
	// open-loop at fixed intervals and latency is measured from the
	// scheduled start, so a server that falls behind shows as latency
	// (no coordinated omission) and, once the queue is full, as Missed.
	Rate float64
	// Interval is the width of one throughput-over-time bucket (default
	// Duration/40, at least 100ms).
	Interval time.Duration
	// Grace bounds how long operations still running at the end of
	// Duration may take before their context is cancelled (default 10s).
	Grace time.Duration
}

// Op is one operation; worker is in [0, Concurrency), seq counts the
// worker's operations from 0. A nil error is a success.
type Op func(ctx context.Context, worker int, seq int64) error

// Result is what a run measured.
type Result struct {
	// Ops counts finished operations, successful or not.
	Ops int64
	// Errors counts failed operations; ByCode splits them by Classify.
	Errors int64
	ByCode map[string]int64
	// Example is the first error message seen for each ByCode key.
	Example map[string]string
	// Missed counts open-loop operations never started because every
	// worker was busy and the queue was full, or the run had ended.
	Missed int64
	// Latency holds successful operations.
	Latency *stats.Histogram
	// Timeline counts successful operations by completion time.
	Timeline *stats.Timeline
	// Elapsed is from the start until the last operation returned.
	Elapsed time.Duration
	// Duration is Options.Duration.
	Duration time.Duration
}

// Throughput is successful operations per second of the run.
func (r *Result) Throughput() float64 {
	d := max(r.Elapsed, r.Duration)
	if d <= 0 {
		return 0
	}
	return float64(r.Latency.Count()) / d.Seconds()
}

// Merge adds o (another part of the same run, e.g. another client).
func (r *Result) Merge(o *Result) {
	r.Ops += o.Ops
	r.Errors += o.Errors
	r.Missed += o.Missed
	for k, v := range o.ByCode {
		r.ByCode[k] += v
	}
	for k, v := range o.Example {
		if _, ok := r.Example[k]; !ok {
			r.Example[k] = v
		}
	}
	r.Latency.Merge(o.Latency)
	r.Timeline.Merge(o.Timeline)
	r.Elapsed = max(r.Elapsed, o.Elapsed)
	r.Duration = max(r.Duration, o.Duration)
}

// NewResult is an empty result for a run of duration counted per interval.
func NewResult(duration, interval time.Duration) *Result {
	return &Result{Latency: &stats.Histogram{}, Timeline: stats.NewTimeline(interval), Duration: duration,
		ByCode: map[string]int64{}, Example: map[string]string{}}
}

// DefaultInterval is Options.Interval's default for a duration.
func DefaultInterval(d time.Duration) time.Duration {
	return max(d/40, 100*time.Millisecond)
}

// Run runs op until Duration has passed (or ctx ends) and every started
// operation returned.
func Run(ctx context.Context, o Options, op Op) (*Result, error) {
	if o.Duration <= 0 {
		return nil, errors.New("load: duration must be positive")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval(o.Duration)
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	// Operations run under opCtx, which outlives the duration by Grace
	// so that a slow last operation is measured, not cut short.
	opCtx, cancel := context.WithTimeout(ctx, o.Duration+o.Grace)
	defer cancel()

	start := time.Now()
	deadline := start.Add(o.Duration)
	recs := make([]*recorder, o.Concurrency)
	for i := range recs {
		recs[i] = &recorder{res: NewResult(o.Duration, o.Interval), start: start}
	}

	var queue chan time.Time
	var missed int64
	var sched sync.WaitGroup
	if o.Rate > 0 {
		queue = make(chan time.Time, max(o.Concurrency*4, int(o.Rate)))
		sched.Go(func() { missed = schedule(opCtx, queue, start, deadline, o.Rate) })
	}

	var wg sync.WaitGroup
	for w := range o.Concurrency {
		rec := recs[w]
		wg.Go(func() {
			for seq := int64(0); ; seq++ {
				var begin time.Time
				if queue != nil {
					t, ok := <-queue
					if !ok {
						return
					}
					if time.Now().After(deadline) {
						rec.res.Missed++ // scheduled in time, but no worker was free before the end
						continue
					}
					begin = t
				} else {
					begin = time.Now()
					if !begin.Before(deadline) || opCtx.Err() != nil {
						return
					}
				}
				err := op(opCtx, w, seq)
				rec.done(begin, time.Now(), err)
			}
		})
	}
	wg.Wait()
	sched.Wait()
	res := NewResult(o.Duration, o.Interval)
	for _, r := range recs {
		res.Merge(r.res)
	}
	res.Missed += missed
	res.Elapsed = time.Since(start)
	return res, ctx.Err()
}

// schedule sends the planned start time of every operation due before
// deadline, then closes queue. It returns how many it could not queue.
func schedule(ctx context.Context, queue chan<- time.Time, start, deadline time.Time, rate float64) (missed int64) {
	defer close(queue)
	step := time.Duration(float64(time.Second) / rate)
	next := start
	timer := time.NewTimer(0)
	defer timer.Stop()
	for next.Before(deadline) {
		now := time.Now()
		// Send every operation due by now (several per wake-up at high
		// rates, since timers are coarser than the step).
		for !next.After(now) && next.Before(deadline) {
			select {
			case queue <- next:
			default:
				missed++
			}
			next = next.Add(step)
		}
		timer.Reset(time.Until(next))
		select {
		case <-ctx.Done():
			return missed
		case <-timer.C:
		}
	}
	return missed
}

// recorder is one worker's share of the result; no locking needed.
type recorder struct {
	res   *Result
	start time.Time
}

func (r *recorder) done(begin, end time.Time, err error) {
	if err != nil {
		r.res.Fail(err)
		return
	}
	r.res.Observe(end.Sub(begin), end.Sub(r.start))
}

// Recorder lets a scenario record operations it drives itself (watch
// events, informer notifications) into a Result; safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex // guards res
	res *Result
	t0  time.Time
}

// NewRecorder records into a new Result starting now.
func NewRecorder(duration, interval time.Duration) *Recorder {
	return &Recorder{res: NewResult(duration, interval), t0: time.Now()}
}

// Start is the time offsets are counted from.
func (r *Recorder) Start() time.Time { return r.t0 }

// Observe records one success of the given latency completing at end.
func (r *Recorder) Observe(latency time.Duration, end time.Time) {
	r.mu.Lock()
	r.res.Observe(latency, end.Sub(r.t0))
	r.mu.Unlock()
}

// Fail records one failure.
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	r.res.Fail(err)
	r.mu.Unlock()
}

// Result ends recording: Elapsed is set to now − start.
func (r *Recorder) Result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Elapsed = time.Since(r.t0)
	return r.res
}

// Observe records one success of the given latency, completing at offset
// since the start (for a Result a single goroutine owns).
func (r *Result) Observe(latency, offset time.Duration) {
	r.Ops++
	r.Latency.Record(latency)
	r.Timeline.Add(offset)
}

// Fail records one failed operation.
func (r *Result) Fail(err error) {
	r.Ops++
	r.Errors++
	code := Classify(err)
	r.ByCode[code]++
	if _, ok := r.Example[code]; !ok {
		r.Example[code] = err.Error()
	}
}
