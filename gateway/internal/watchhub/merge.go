package watchhub

import (
	"context"
	"errors"
	"sync"
	"time"
)

// mergeProgressTick is how long a merged range's watcher may go without a
// delivery before the merge asks how far the range is complete.
const mergeProgressTick = 100 * time.Millisecond

// Stream is one client's watch: a Watcher of one range, or a Merged
// watch of several.
type Stream interface {
	Next(ctx context.Context) (Delivery, error)
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
		m.subs = append(m.subs, &sub{w: w, safe: through(since)})
		m.wg.Go(func() { m.pump(ctx, i, w) })
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
}

// sub is one range of a merge; owned by the consumer goroutine.
type sub struct {
	w     *Watcher
	queue []Delivery // received, not yet released
	safe  position   // every event of the range at or before it was received
}

type input struct {
	sub int
	d   Delivery
	err error
}

// pump moves one watcher's deliveries (events and progress) to the merge.
func (m *Merged) pump(ctx context.Context, i int, w *Watcher) {
	var sent int64 = -1
	for {
		nctx, cancel := context.WithTimeout(ctx, mergeProgressTick)
		d, err := w.Next(nctx)
		quiet := errors.Is(err, context.DeadlineExceeded) && errors.Is(nctx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if quiet {
			// Nothing for this watcher lately: its feed may have moved
			// over events the filter dropped. Tell the merge how far the
			// range is known complete, or its other ranges' events wait.
			rv := w.Last()
			if rv <= sent {
				continue
			}
			d, err = Delivery{Type: Bookmark, Rev: rv, at: through(rv)}, nil
		}
		if err == nil {
			sent = max(sent, d.at.resourceVersion())
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
	for {
		if d, ok := m.release(); ok {
			return d, nil
		}
		select {
		case in := <-m.in:
			if in.err != nil {
				return Delivery{}, in.err
			}
			s := m.subs[in.sub]
			if in.d.Type != Bookmark {
				s.queue = append(s.queue, in.d)
			}
			if s.safe.less(in.d.at) {
				s.safe = in.d.at
			}
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// release pops the earliest queued event if no range can still deliver
// an earlier one.
func (m *Merged) release() (Delivery, bool) {
	best := -1
	for i, s := range m.subs {
		if len(s.queue) == 0 {
			continue
		}
		if best < 0 || s.queue[0].at.less(m.subs[best].queue[0].at) {
			best = i
		}
	}
	if best < 0 {
		return Delivery{}, false
	}
	cand := m.subs[best].queue[0]
	for i, s := range m.subs {
		if i != best && len(s.queue) == 0 && s.safe.rev < cand.Rev {
			return Delivery{}, false // that range may still have something earlier
		}
	}
	s := m.subs[best]
	s.queue[0] = Delivery{}
	s.queue = s.queue[1:]
	return cand, true
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
	for _, s := range m.subs {
		s.w.Close()
	}
}
