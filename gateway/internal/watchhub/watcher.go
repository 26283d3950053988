package watchhub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one thing a watcher hands its client.
type Delivery struct {
	Type Type
	Rev  int64
	// Event is the change; nil for a Bookmark.
	Event *Shared
	// UsePrev: send Event.PrevObject with its resourceVersion set to Rev
	// (an update that moved the object out of the watcher's selection).
	UsePrev bool

	at position // where in the range's sequence this puts the watcher
}

// Watcher is one client's watch. Next and Close may be called from one
// goroutine at a time (the one streaming to the client).
type Watcher struct {
	hub     *Hub
	rangeID string
	filter  Filter
	queue   chan Delivery
	signal  chan struct{} // capacity 1: the feed detached or failed us

	mu       sync.Mutex // guards feed, detached, err
	feed     *feed
	detached bool
	err      error

	// reportProgress: Next also returns Bookmark deliveries when the
	// watcher moves over a quiet stretch (a merge needs them).
	reportProgress bool

	// waitingFor is the revision a merge waits for this range to be
	// through (0: none): the feed then tells it when it moves past it
	// over events the filter drops, which it otherwise keeps quiet about.
	waitingFor atomic.Int64

	// Owned by the consumer goroutine.
	last        position
	joinedAt    position // the feed's cursor when we attached: catch up to it
	needCatchup bool
	pending     []Delivery
}

func newWatcher(h *Hub, rangeID string, since int64, filter Filter) *Watcher {
	return &Watcher{
		hub:     h,
		rangeID: rangeID,
		filter:  filter,
		queue:   make(chan Delivery, h.cfg.QueueLen),
		signal:  make(chan struct{}, 1),
		last:    through(since),
	}
}

// Watch starts a watcher on rangeID that sees every event with a revision
// after since that matches filter. since must be a revision the range's
// window still holds (or newer); otherwise the first Next fails with an
// error wrapping storage.ErrCompacted.
func (h *Hub) Watch(rangeID string, since int64, filter Filter) (*Watcher, error) {
	w := newWatcher(h, rangeID, since, filter)
	if err := w.attach(); err != nil {
		return nil, err
	}
	if h.cfg.Metrics != nil {
		h.cfg.Metrics.watchers.Inc()
	}
	return w, nil
}

// attach joins the range's feed; events the feed dispatched before we
// joined come from the window (needCatchup).
func (w *Watcher) attach() error {
	for {
		f, err := w.hub.feed(w.rangeID, w.last.since())
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.feed, w.detached = f, false
		w.mu.Unlock()
		cursor, ok := f.attach(w, w.last)
		if !ok {
			w.hub.forget(f)
			continue
		}
		w.joinedAt = cursor
		w.needCatchup = w.last.less(cursor)
		return nil
	}
}

// Last returns the revision up to which the watcher has seen everything:
// the resourceVersion a bookmark may carry. A watcher that has handed out
// everything queued moves up to its feed's cursor first: the events in
// between were not for it.
func (w *Watcher) Last() int64 {
	if len(w.pending) == 0 && !w.needCatchup {
		w.mu.Lock()
		f, detached := w.feed, w.detached
		w.mu.Unlock()
		if f != nil && !detached {
			if cur, ok := f.caughtUp(w); ok && w.last.less(cur) {
				w.last = cur
			}
		}
	}
	return w.last.resourceVersion()
}

// Next returns the next delivery, blocking until there is one, the watcher
// fails (410 Expired when it fell out of the window, ErrClosed on
// shutdown) or ctx ends. Progress over quiet stretches advances Last
// without a delivery.
func (w *Watcher) Next(ctx context.Context) (Delivery, error) {
	for {
		if d, ok := w.fromPending(); ok {
			return d, nil
		}
		if w.needCatchup {
			if err := w.failed(); err != nil {
				return Delivery{}, err // no catch-up from a range that ended
			}
			if err := w.catchUp(ctx); err != nil {
				return Delivery{}, err
			}
			continue
		}
		select {
		case d := <-w.queue:
			if w.take(d) {
				return d, nil
			}
		case <-w.signal:
			w.mu.Lock()
			err, detached := w.err, w.detached
			w.mu.Unlock()
			if err != nil {
				return Delivery{}, err
			}
			if detached {
				if w.hub.cfg.Metrics != nil {
					w.hub.cfg.Metrics.overflows.Inc()
				}
				w.drain()
				if err := w.attach(); err != nil {
					return Delivery{}, err
				}
			}
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// Ready returns a delivery that is at hand without waiting: one queued
// or caught up already. ok is false when Next would have to wait (or
// catch up, or learn of a failure); Next then takes over. A stream
// writer uses it to send what piled up in one write.
func (w *Watcher) Ready() (d Delivery, ok bool) {
	if d, ok := w.fromPending(); ok {
		return d, true
	}
	if w.needCatchup {
		return Delivery{}, false
	}
	for {
		select {
		case d := <-w.queue:
			if w.take(d) {
				return d, true
			}
		default:
			return Delivery{}, false
		}
	}
}

// fromPending pops the next delivery of a catch-up.
func (w *Watcher) fromPending() (Delivery, bool) {
	for len(w.pending) > 0 {
		d := w.pending[0]
		w.pending[0] = Delivery{}
		w.pending = w.pending[1:]
		if w.take(d) {
			return d, true
		}
	}
	return Delivery{}, false
}

// take moves the watcher to d and reports whether d is handed out:
// repeats are dropped, and progress marks are only reported to a merge.
func (w *Watcher) take(d Delivery) bool {
	if !w.last.less(d.at) {
		return false
	}
	w.last = d.at
	return d.Type != Bookmark || w.reportProgress
}

// catchUp reads the window after w.last into pending.
func (w *Watcher) catchUp(ctx context.Context) error {
	if w.hub.cfg.Metrics != nil {
		w.hub.cfg.Metrics.catchups.Inc()
	}
	// The caller's deadline is when it wants to send a bookmark, not a
	// limit on the read: a catch-up cut off there would end the watch.
	// Only a cancellation (the client went away) stops it early, not a
	// merge asking for progress (errKick).
	parent := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), w.hub.cfg.RepairTimeout)
	defer cancel()
	stop := context.AfterFunc(parent, func() {
		if errors.Is(parent.Err(), context.Canceled) && !errors.Is(context.Cause(parent), errKick) {
			cancel()
		}
	})
	defer stop()
	from := w.last.since()
	evs, seen, err := w.hub.cfg.Source.Events(ctx, w.rangeID, from)
	if err != nil {
		return fmt.Errorf("cannot catch up watch on range %s from revision %d: %w", w.rangeID, from, err)
	}
	if len(evs) == 0 && seen <= w.last.rev {
		// The node has not yet seen what the feed has (another replica
		// answered, or it is restarting): try again shortly.
		select {
		case <-time.After(50 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.pending = w.pending[:0]
	for i := range evs {
		ev := &evs[i]
		if w.last.covers(ev) {
			continue
		}
		t, usePrev, ok := w.filter.classify(ev)
		if !ok {
			continue
		}
		w.pending = append(w.pending, Delivery{Type: t, Rev: ev.Revision, Event: newShared(*ev), UsePrev: usePrev, at: at(ev)})
	}
	// Everything up to seen is known: let Last move over filtered events.
	end := through(seen)
	w.pending = append(w.pending, Delivery{Type: Bookmark, Rev: seen, at: end})
	// A large backlog comes in several answers: continue until we reach
	// the point from which the queue holds everything.
	w.needCatchup = end.less(w.joinedAt)
	return nil
}

func (w *Watcher) drain() {
	for {
		select {
		case <-w.queue:
		default:
			return
		}
	}
}

// requestProgress asks for the range's progress through rev for a merge
// that waits on it (see feed.requestProgress): the feed hands the watcher
// a Bookmark once it is through rev. covered reports that it was already.
func (w *Watcher) requestProgress(rev int64) (covered bool) {
	for {
		cur := w.waitingFor.Load()
		if cur >= rev || w.waitingFor.CompareAndSwap(cur, rev) {
			break
		}
	}
	w.mu.Lock()
	f, detached := w.feed, w.detached
	w.mu.Unlock()
	if f == nil || detached {
		return false // catching up: the merge's kicks follow it
	}
	if !f.requestProgress(rev) {
		return false
	}
	// The feed may have moved past rev over events the filter dropped
	// before waitingFor was set, and told no one.
	f.nudge(w)
	return true
}

// answered reports, once, that the feed is through the revision a merge
// waits for. Called by the feed with its lock held.
func (w *Watcher) answered(through int64) bool {
	wf := w.waitingFor.Load()
	return wf != 0 && wf <= through && w.waitingFor.CompareAndSwap(wf, 0)
}

// offer queues d without blocking; false when the queue is full. Called by
// the feed with its lock held.
func (w *Watcher) offer(d Delivery) bool {
	select {
	case w.queue <- d:
		return true
	default:
		return false
	}
}

// offerProgress queues a progress mark when there is room; a full queue
// has deliveries coming anyway.
func (w *Watcher) offerProgress(d Delivery) {
	select {
	case w.queue <- d:
	default:
	}
}

// overflowed is called by the feed after detaching w.
func (w *Watcher) overflowed() {
	w.mu.Lock()
	w.detached = true
	w.mu.Unlock()
	w.notify()
}

// fail ends the watcher with err; called by the feed.
func (w *Watcher) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.detached = true
	w.mu.Unlock()
	w.notify()
}

// failed returns the error the feed ended the watcher with, or nil.
func (w *Watcher) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Watcher) notify() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// Close detaches the watcher from its feed.
func (w *Watcher) Close() {
	w.mu.Lock()
	f := w.feed
	w.mu.Unlock()
	if f != nil {
		f.detach(w)
	}
	if w.hub.cfg.Metrics != nil {
		w.hub.cfg.Metrics.watchers.Dec()
	}
}
