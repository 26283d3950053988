package watchhub

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A merge asks a quiet range how far it is complete only when an event
// of another range waits on it, at once: its feed sends the range's
// primary a progress request, which the primary answers within an etcd
// round trip. In case an answer is lost, the merge kicks the ranges it
// waits on after mergeKickFirst, backing off to mergeKickMax while it
// still waits. An idle merge costs nothing.
const (
	mergeKickFirst = askRetry
	mergeKickMax   = 100 * time.Millisecond
)

// Stream is one client's watch: a Watcher of one range, or a Merged
// watch of several.
type Stream interface {
	Next(ctx context.Context) (Delivery, error)
	// Ready returns a delivery Next would return without waiting, if
	// there is one: what piled up while the last was written.
	Ready() (Delivery, bool)
	Last() int64
	Close()
}

// WatchRanges watches the ranges in key order as one stream in revision
// order. One range is a plain Watcher.
func (h *Hub) WatchRanges(rangeIDs []string, since int64, filter Filter) (Stream, error) {
	if len(rangeIDs) == 1 {
		return h.Watch(rangeIDs[0], since, filter)
	}
	if len(rangeIDs) == 0 {
		return nil, errors.New("cannot watch: no range")
	}
	ctx, cancel := context.WithCancel(h.ctx)
	m := &Merged{in: make(chan input, 64), cancel: cancel}
	for i, id := range rangeIDs {
		w, err := h.Watch(id, since, filter)
		if err != nil {
			m.Close()
			return nil, err
		}
		w.reportProgress = true
		s := &sub{w: w, safe: through(since)}
		s.ctx, s.cancel = context.WithCancelCause(ctx)
		m.subs = append(m.subs, s)
		m.wg.Go(func() { m.pump(ctx, i, s) })
	}
	return m, nil
}

// Merged merges the watchers of several ranges. An event is released only
// once every other range is known complete up to its revision (a
// watermark merge), so clients see revisions in order across ranges, as
// kube-apiserver's single watch cache gives them.
type Merged struct {
	subs   []*sub
	in     chan input
	cancel context.CancelFunc
	wg     sync.WaitGroup
	timer  *time.Timer // the next kick of the ranges an event waits on; consumer-owned
	failed *input      // an error Ready took from a pump, for Next; consumer-owned
}

// sub is one range of a merge.
type sub struct {
	w *Watcher

	// Owned by the consumer goroutine.
	queue  []Delivery // received, not yet released
	safe   position   // every event of the range at or before it was received
	kicked bool       // asked for progress, no input since

	// mu guards ctx and cancel: the context the pump waits in, cancelled
	// with errKick to make it report how far the range is complete.
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errKick is the cause of a kick: a watcher stops waiting for its next
// delivery, but a catch-up read in progress goes on (see catchUp).
var errKick = errors.New("watchhub: progress asked")

// kick asks the sub's pump to report its progress now.
func (s *sub) kick() {
	s.mu.Lock()
	s.cancel(errKick)
	s.mu.Unlock()
	s.kicked = true
}

// waitContext is the context the pump waits in; after a kick, a new one.
func (s *sub) waitContext(parent context.Context) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		s.ctx, s.cancel = context.WithCancelCause(parent)
	}
	return s.ctx
}

type input struct {
	sub int
	d   Delivery
	err error
}

// pump moves one watcher's deliveries (events and progress) to the merge.
// Kicked (its wait context cancelled), it reports how far the range is
// known complete: its feed may have moved over events the filter dropped,
// and an event of another range waits on it.
func (m *Merged) pump(ctx context.Context, i int, s *sub) {
	w := s.w
	defer func() {
		s.mu.Lock()
		s.cancel(context.Canceled)
		s.mu.Unlock()
	}()
	for {
		wctx := s.waitContext(ctx)
		d, err := w.Next(wctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, context.Canceled) && wctx.Err() != nil {
			rv := w.Last()
			d, err = Delivery{Type: Bookmark, Rev: rv, at: through(rv)}, nil
		}
		select {
		case m.in <- input{sub: i, d: d, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// Next returns the next event in revision order across the ranges.
func (m *Merged) Next(ctx context.Context) (Delivery, error) {
	backoff := mergeKickFirst
	var kickAt <-chan time.Time
	for {
		d, ok, blocked := m.release()
		if ok {
			return d, nil
		}
		if m.failed != nil {
			return Delivery{}, m.failed.err
		}
		if blocked {
			m.askBlockers()
			if kickAt == nil {
				kickAt = m.after(backoff)
			}
		}
		select {
		case in := <-m.in:
			if err := m.receive(in); err != nil {
				return Delivery{}, err
			}
		case <-kickAt:
			kickAt = nil
			m.kickBlockers()
			backoff = min(2*backoff, mergeKickMax)
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// Ready releases an event that is at hand: it takes what the pumps have
// sent without waiting and releases the earliest event if no range can
// still deliver an earlier one. An input that ends the merge (an error)
// is kept for Next.
func (m *Merged) Ready() (Delivery, bool) {
	for m.failed == nil {
		if d, ok, _ := m.release(); ok {
			return d, true
		}
		select {
		case in := <-m.in:
			if in.err != nil {
				m.failed = &in
				return Delivery{}, false
			}
			_ = m.receive(in)
		default:
			return Delivery{}, false
		}
	}
	return Delivery{}, false
}

// receive takes one input from a pump.
func (m *Merged) receive(in input) error {
	if in.err != nil {
		return in.err
	}
	s := m.subs[in.sub]
	s.kicked = false
	if in.d.Type != Bookmark {
		s.queue = append(s.queue, in.d)
	}
	if s.safe.less(in.d.at) {
		s.safe = in.d.at
	}
	return nil
}

// after is a channel that fires after d, from the merge's one timer.
func (m *Merged) after(d time.Duration) <-chan time.Time {
	if m.timer == nil {
		m.timer = time.NewTimer(d)
	} else {
		m.timer.Reset(d)
	}
	return m.timer.C
}

// askBlockers asks the ranges the earliest queued event waits on for
// their progress through its revision (see Watcher.requestProgress).
func (m *Merged) askBlockers() {
	cand, ok := m.candidate()
	if !ok {
		return
	}
	for _, s := range m.subs {
		if len(s.queue) == 0 && s.safe.rev < cand.Rev {
			s.w.requestProgress(cand.Rev)
		}
	}
}

// kickBlockers makes the ranges the earliest queued event waits on report
// their progress, and asks their primaries again: the fallback when an
// answer did not come.
func (m *Merged) kickBlockers() {
	cand, ok := m.candidate()
	if !ok {
		return
	}
	for _, s := range m.subs {
		if len(s.queue) == 0 && s.safe.rev < cand.Rev {
			s.w.requestProgress(cand.Rev)
			s.kick()
		}
	}
}

// Progress brings how far each range is known complete up to date, for
// a bookmark (Last): it asks every range and waits for their answers
// until ctx ends. Events received meanwhile are queued for Next.
func (m *Merged) Progress(ctx context.Context) error {
	if m.failed != nil {
		return m.failed.err
	}
	for _, s := range m.subs {
		s.kick()
	}
	for {
		waiting := false
		for _, s := range m.subs {
			waiting = waiting || s.kicked
		}
		if !waiting {
			return nil
		}
		select {
		case in := <-m.in:
			if err := m.receive(in); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release pops the earliest queued event if no range can still deliver
// an earlier one; blocked says an event waits on another range.
func (m *Merged) release() (d Delivery, ok, blocked bool) {
	best := m.earliest()
	if best < 0 {
		return Delivery{}, false, false
	}
	cand := m.subs[best].queue[0]
	for i, s := range m.subs {
		if i != best && len(s.queue) == 0 && s.safe.rev < cand.Rev {
			return Delivery{}, false, true // that range may still have something earlier
		}
	}
	s := m.subs[best]
	s.queue[0] = Delivery{}
	if len(s.queue) == 1 {
		s.queue = s.queue[:0] // keep the array: one event at a time allocates nothing
	} else {
		s.queue = s.queue[1:]
	}
	return cand, true, false
}

// earliest is the index of the sub whose first queued event is the
// earliest, or -1 when nothing is queued.
func (m *Merged) earliest() int {
	best := -1
	for i, s := range m.subs {
		if len(s.queue) == 0 {
			continue
		}
		if best < 0 || s.queue[0].at.less(m.subs[best].queue[0].at) {
			best = i
		}
	}
	return best
}

// candidate is the earliest queued event.
func (m *Merged) candidate() (Delivery, bool) {
	if best := m.earliest(); best >= 0 {
		return m.subs[best].queue[0], true
	}
	return Delivery{}, false
}

// Last is the revision up to which every range's events were released.
func (m *Merged) Last() int64 {
	var last int64 = -1
	for _, s := range m.subs {
		rv := s.safe.resourceVersion()
		if len(s.queue) > 0 {
			rv = s.queue[0].Rev - 1
		}
		if last < 0 || rv < last {
			last = rv
		}
	}
	return max(last, 0)
}

// Close ends the merge and its watchers.
func (m *Merged) Close() {
	m.cancel()
	m.wg.Wait()
	if m.timer != nil {
		m.timer.Stop()
	}
	for _, s := range m.subs {
		s.w.Close()
	}
}
