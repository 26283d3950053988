// Package latency keeps, per request, the time kube-apiserver leaves out
// of its SLI latency (apiserver_request_sli_duration_seconds): the time
// spent in admission webhooks and waiting in a fairness queue, which the
// server does not control.
package latency

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Tracker sums a request's excluded time. Its methods are safe on a nil
// Tracker (a request that has none records nothing) and from several
// goroutines.
type Tracker struct{ excluded atomic.Int64 }

type key struct{}

// Start gives rc a Tracker; From finds it through any context derived
// from rc (fasthttp.RequestCtx.Value reads its user values).
func Start(rc *fasthttp.RequestCtx) *Tracker {
	t := &Tracker{}
	rc.SetUserValue(key{}, t)
	return t
}

// From returns ctx's Tracker, or nil.
func From(ctx context.Context) *Tracker {
	t, _ := ctx.Value(key{}).(*Tracker)
	return t
}

// Since adds the time since start, for `defer t.Since(time.Now())`.
func (t *Tracker) Since(start time.Time) {
	if t != nil {
		t.excluded.Add(int64(time.Since(start)))
	}
}

// Add adds d.
func (t *Tracker) Add(d time.Duration) {
	if t != nil {
		t.excluded.Add(int64(d))
	}
}

// Excluded is the time added so far.
func (t *Tracker) Excluded() time.Duration {
	if t == nil {
		return 0
	}
	return time.Duration(t.excluded.Load())
}
