package watchhub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/storage"
)

// feed is the one subscription of a gateway to a range.
type feed struct {
	hub     *Hub
	rangeID string
	msgs    chan *nats.Msg
	subs    []*nats.Subscription
	quit    chan struct{} // closed by end: the range left the table
	endOnce sync.Once

	mu         sync.Mutex            // guards cursor, watchers, emptySince, stopped
	cursor     position              // every event at or before it was dispatched
	watchers   map[*Watcher]position // each watcher with where it joined
	emptySince time.Time
	stopped    bool

	needRepair bool // owned by the run goroutine

	// through mirrors the cursor for readers without mu: every revision
	// up to it was dispatched (cursor.resourceVersion()).
	through atomic.Int64

	// Progress requests to the range's primary (see requestProgress).
	reqSubject string
	askMu      sync.Mutex // guards asked, askedAt, askBuf
	asked      int64      // the revision last asked for
	askedAt    time.Time
	askBuf     []byte
}

// askRetry is how long a feed waits for the answer to a progress request
// before it asks again (a lost request or answer, a primary changing);
// cache nodes give requests made within a moment one answer.
const askRetry = 25 * time.Millisecond

func startFeed(h *Hub, rangeID string, since int64) (*feed, error) {
	f := &feed{
		hub:        h,
		rangeID:    rangeID,
		msgs:       make(chan *nats.Msg, h.cfg.FeedBuffer),
		cursor:     through(since),
		watchers:   map[*Watcher]position{},
		quit:       make(chan struct{}),
		emptySince: time.Now(),
		needRepair: true,
		reqSubject: event.ProgressRequestSubject(rangeID),
	}
	f.through.Store(since)
	for _, subj := range []string{event.RangeSubjects(rangeID), event.ProgressSubject(rangeID)} {
		sub, err := h.cfg.NATS.ChanSubscribe(subj, f.msgs)
		if err != nil {
			f.unsubscribe()
			return nil, fmt.Errorf("cannot subscribe to %s: %w", subj, err)
		}
		// The channel's capacity bounds what is held: NATS drops what does
		// not fit (a slow consumer), and the chain shows the gap.
		f.subs = append(f.subs, sub)
	}
	h.wg.Add(1)
	go f.run()
	return f, nil
}

func (f *feed) unsubscribe() {
	for _, s := range f.subs {
		_ = s.Unsubscribe()
	}
}

func (f *feed) run() {
	defer f.hub.wg.Done()
	defer f.unsubscribe()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if f.needRepair {
			f.repair()
			if f.isStopped() {
				return // compacted: its watchers failed or moved to a fresh feed
			}
		}
		select {
		case <-f.hub.ctx.Done():
			f.stop(ErrClosed)
			return
		case <-f.quit:
			return // stopped by end; the deferred unsubscribe drops NATS
		case m := <-f.msgs:
			var ev event.Event
			if err := ev.Unmarshal(m.Data); err != nil {
				f.hub.cfg.Logger.Warn("dropping undecodable event", "range", f.rangeID, "subject", m.Subject, "err", err)
				f.needRepair = true
				continue
			}
			f.handle(ev)
		case <-tick.C:
			if f.idleTooLong() {
				f.stop(ErrClosed)
				return
			}
			if f.hub.cfg.Metrics != nil {
				f.hub.cfg.Metrics.observeBacklog(f.rangeID, len(f.msgs))
			}
		}
	}
}

// handle applies one message in the order NATS delivered it.
func (f *feed) handle(ev event.Event) {
	f.mu.Lock()
	cursor := f.cursor
	f.mu.Unlock()
	if ev.Type == event.Progress {
		// The range is quiet up to ev.Revision; its last event was at
		// ev.PrevRangeRevision. Unless we have everything up to there, a
		// message was lost.
		if !cursor.quietAfter(&ev) {
			if ev.Revision > cursor.rev {
				f.needRepair = true
			}
			return
		}
		if ev.Revision > cursor.rev {
			f.dispatchProgress(ev.Revision)
		}
		return
	}
	switch {
	case cursor.covers(&ev):
		// already dispatched, from the window or a duplicate publisher
	case cursor.next(&ev):
		f.dispatch(newShared(ev))
	default:
		f.needRepair = true // something between cursor and ev is missing
	}
}

// repair reads the window after the cursor and dispatches what it holds.
func (f *feed) repair() {
	f.mu.Lock()
	cursor := f.cursor
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(f.hub.ctx, f.hub.cfg.RepairTimeout)
	defer cancel()
	evs, seen, err := f.hub.cfg.Source.Events(ctx, f.rangeID, cursor.since())
	if f.hub.cfg.Metrics != nil {
		f.hub.cfg.Metrics.repairs.WithLabelValues(f.rangeID).Inc()
	}
	switch {
	case errors.Is(err, storage.ErrCompacted):
		// The window no longer holds the feed's cursor (a cache node
		// relisted, or the feed started from an old revision). Watchers
		// that joined at or behind the cursor have lost continuity: 410,
		// from which their clients resume. Those that joined ahead of it
		// go back to their own position on a fresh feed.
		f.hub.cfg.Logger.Warn("range window no longer holds the feed's cursor", "range", f.rangeID, "cursor", cursor.rev)
		f.hub.forget(f)
		f.compacted(cursor, fmt.Errorf("cannot resume range %s after revision %d: %w", f.rangeID, cursor.since(), err))
		return
	case err != nil:
		f.hub.cfg.Logger.Warn("cannot repair feed, will retry", "range", f.rangeID, "err", err)
		return // needRepair stays set; retried on the next message or tick
	}
	f.needRepair = false
	for i := range evs {
		if !cursor.covers(&evs[i]) {
			f.dispatch(newShared(evs[i]))
			cursor = at(&evs[i])
		}
	}
	// The answer is complete up to seen: every revision up to it is whole.
	if seen >= cursor.rev {
		f.dispatchProgress(seen)
	}
}

// dispatch hands ev to every attached watcher and advances the cursor.
func (f *feed) dispatch(ev *Shared) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cursor.covers(&ev.Event) {
		return
	}
	f.setCursor(at(&ev.Event))
	through := f.through.Load()
	for w := range f.watchers {
		t, usePrev, ok := w.filter.classify(&ev.Event)
		if !ok {
			// Last catches up with the cursor when it is asked for; a
			// merge waiting on this range is told now.
			if w.answered(through) {
				w.offerProgress(Delivery{Type: Bookmark, Rev: through, at: f.cursor})
			}
			continue
		}
		w.answered(through)
		if !w.offer(Delivery{Type: t, Rev: ev.Revision, Event: ev, UsePrev: usePrev, at: f.cursor}) {
			delete(f.watchers, w)
			w.overflowed()
		}
	}
	if f.hub.cfg.Metrics != nil {
		f.hub.cfg.Metrics.events.WithLabelValues(f.rangeID).Inc()
	}
}

// dispatchProgress advances the cursor over a quiet stretch up to rev and
// tells the watchers, so their bookmarks can carry it.
func (f *feed) dispatchProgress(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := through(rev)
	if !f.cursor.less(p) {
		return
	}
	f.setCursor(p)
	for w := range f.watchers {
		w.answered(rev)
		w.offerProgress(Delivery{Type: Bookmark, Rev: rev, at: p})
	}
}

// setCursor moves the cursor to p. Callers hold mu.
func (f *feed) setCursor(p position) {
	f.cursor = p
	f.through.Store(p.resourceVersion())
}

// nudge hands w a Bookmark at the cursor if w waits for a revision the
// cursor is through and no delivery since told it so.
func (f *feed) nudge(w *Watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.watchers[w]; ok && w.answered(f.cursor.resourceVersion()) {
		w.offerProgress(Delivery{Type: Bookmark, Rev: f.cursor.resourceVersion(), at: f.cursor})
	}
}

// requestProgress asks the range's primary for its progress through rev,
// on behalf of a merge holding an event of another range at rev; the
// answer comes as a Progress on the feed. It asks at most once per
// askRetry until an answer moves the cursor past what it asked. covered
// reports that the feed is through rev already: no need to ask.
func (f *feed) requestProgress(rev int64) (covered bool) {
	if f.through.Load() >= rev {
		return true
	}
	now := time.Now()
	f.askMu.Lock()
	defer f.askMu.Unlock()
	if f.asked > f.through.Load() && now.Sub(f.askedAt) < askRetry {
		return false // an answer is on its way
	}
	f.asked, f.askedAt = rev, now
	f.askBuf = event.AppendProgressRequest(f.askBuf[:0], rev)
	if err := f.hub.cfg.NATS.Publish(f.reqSubject, f.askBuf); err != nil {
		f.hub.cfg.Logger.Debug("cannot ask for progress", "range", f.rangeID, "revision", rev, "err", err)
	}
	if f.hub.cfg.Metrics != nil {
		f.hub.cfg.Metrics.progressRequests.WithLabelValues(f.rangeID).Inc()
	}
	return false
}

// attach adds w, which has everything up to from, and returns the cursor
// it joined at; ok is false when the feed stopped (the caller gets a fresh
// feed).
func (f *feed) attach(w *Watcher, from position) (cursor position, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return position{}, false
	}
	joined := f.cursor
	if joined.less(from) {
		joined = from
	}
	f.watchers[w] = joined
	return f.cursor, true
}

// caughtUp returns the cursor when w has nothing queued and is attached:
// then every event up to the cursor that w should see was handed over.
func (f *feed) caughtUp(w *Watcher) (position, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, attached := f.watchers[w]; !attached || len(w.queue) > 0 {
		return position{}, false
	}
	return f.cursor, true
}

func (f *feed) detach(w *Watcher) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.watchers, w)
	if len(f.watchers) == 0 {
		f.emptySince = time.Now()
	}
}

func (f *feed) idleTooLong() bool {
	f.mu.Lock()
	idle := len(f.watchers) == 0 && time.Since(f.emptySince) > f.hub.cfg.Linger
	f.mu.Unlock()
	if idle {
		f.hub.forget(f)
		// A watcher may have found the feed between the check and forget;
		// keep serving it.
		f.mu.Lock()
		idle = len(f.watchers) == 0
		if idle {
			f.stopped = true
		}
		f.mu.Unlock()
	}
	return idle
}

func (f *feed) isStopped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped
}

// compacted stops the feed after its cursor fell out of the window: the
// watchers that joined ahead of the cursor attach again from their own
// position, the others fail with err.
func (f *feed) compacted(cursor position, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for w, joined := range f.watchers {
		if cursor.less(joined) {
			w.overflowed()
		} else {
			w.fail(err)
		}
	}
	clear(f.watchers)
}

// end stops the feed for good: its watchers fail with err now, its run
// goroutine returns. The hub forgot it already.
func (f *feed) end(err error) {
	f.unsubscribe() // first: once a watcher sees err, NATS is dropped
	f.stop(err)
	f.endOnce.Do(func() { close(f.quit) })
}

// stop ends every watcher with err.
func (f *feed) stop(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	for w := range f.watchers {
		w.fail(err)
	}
	clear(f.watchers)
}
