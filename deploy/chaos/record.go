package chaos

import (
	"fmt"
	"sync"
	"time"

	"github.com/kgate/kgate/deploy/chaos/report"
	"github.com/kgate/kgate/deploy/watchcheck"
)

// recorder keeps what the workload did and saw, for the checkers. It is
// safe for concurrent use.
type recorder struct {
	mu       sync.Mutex // guards every field below
	requests []report.Request
	kv       []KVOp
	lists    []listRead
	acks     []ack
	ackAt    map[int64]time.Time // by revision
	lags     []report.Lag
	problems []problem
	stale    []time.Time // resourceVersion=0 reads that went back in time
	falses   []time.Time // 409s without a conflict
	acked    int64       // the newest acknowledged revision
}

// ack is one acknowledged write as its client was told.
type ack struct {
	At   time.Time
	Rev  int64
	Op   watchcheck.Op
	Key  string
	Data string // "" for a delete
}

// listRead is one consistent LIST of the workload's namespace.
type listRead struct {
	At          time.Time
	Rev         int64
	AckedBefore int64
	Objects     map[string]*watchcheck.Object
}

// problem is one violation, with when it was seen (for the fault
// windows).
type problem struct {
	At   time.Time
	What string
}

func newRecorder() *recorder { return &recorder{ackAt: map[int64]time.Time{}} }

func (r *recorder) request(kind string, gw int, start time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, report.Request{Kind: kind, Gateway: gw, Start: start, End: time.Now(), Failed: err != nil})
}

func (r *recorder) ack(a ack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
	r.ackAt[a.Rev] = a.At
	r.acked = max(r.acked, a.Rev)
}

// ackedRev is the newest revision acknowledged so far.
func (r *recorder) ackedRev() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// firstAckAfter is the revision of the first write acknowledged after t,
// 0 when none yet.
func (r *recorder) firstAckAfter(t time.Time) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.acks) - 1; i >= 0; i-- {
		if r.acks[i].At.Before(t) {
			if i+1 < len(r.acks) {
				return r.acks[i+1].Rev
			}
			return 0
		}
	}
	if len(r.acks) > 0 {
		return r.acks[0].Rev
	}
	return 0
}

func (r *recorder) kvOp(op KVOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kv = append(r.kv, op)
}

func (r *recorder) list(l listRead) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists = append(r.lists, l)
}

// delivered records that a watcher on gateway gw received the event at
// rev now.
func (r *recorder) delivered(gw int, rev int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.ackAt[rev]; ok {
		r.lags = append(r.lags, report.Lag{Gateway: gw, At: now, Lag: max(0, now.Sub(at))})
	}
}

func (r *recorder) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, problem{At: time.Now(), What: fmt.Sprintf(format, args...)})
}

func (r *recorder) staleRead(format string, args ...any) {
	r.problem(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stale = append(r.stale, time.Now())
}

func (r *recorder) falseConflict(format string, args ...any) {
	r.problem(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.falses = append(r.falses, time.Now())
}
