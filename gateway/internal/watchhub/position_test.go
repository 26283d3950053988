package watchhub

import (
	"testing"

	"github.com/kgate/kgate/cachenode/event"
)

func TestPosition(t *testing.T) {
	ev := func(rev, prev int64, idx, count uint32) *event.Event {
		return &event.Event{Type: event.Added, Revision: rev, PrevRangeRevision: prev, Index: idx, Count: count}
	}
	f := func(name string, p position, e *event.Event, covers, next bool) {
		t.Helper()
		if got := p.covers(e); got != covers {
			t.Errorf("%s: covers = %v, want %v", name, got, covers)
		}
		if got := p.next(e); got != next {
			t.Errorf("%s: next = %v, want %v", name, got, next)
		}
	}
	f("next single event", through(10), ev(12, 10, 0, 1), false, true)
	f("after a progress", through(11), ev(12, 10, 0, 1), false, true)
	f("gap", through(10), ev(14, 12, 0, 1), false, false)
	f("duplicate", through(12), ev(12, 10, 0, 1), true, false)
	f("older", through(12), ev(11, 10, 0, 1), true, false)
	f("unknown chain", through(10), ev(12, 0, 0, 1), false, false)
	f("second of a transaction", at(ev(12, 10, 0, 2)), ev(12, 10, 1, 2), false, true)
	f("skipped inside a transaction", at(ev(12, 10, 0, 3)), ev(12, 10, 2, 3), false, false)
	f("after an incomplete transaction", at(ev(12, 10, 0, 2)), ev(13, 12, 0, 1), false, false)
	f("first of a transaction missed", through(10), ev(12, 10, 1, 2), false, false)
	f("duplicate inside a transaction", at(ev(12, 10, 1, 3)), ev(12, 10, 0, 3), true, false)

	if p := at(ev(12, 10, 0, 2)); p.since() != 11 || p.resourceVersion() != 11 {
		t.Errorf("incomplete position: since %d rv %d, want 11 11", p.since(), p.resourceVersion())
	}
	if p := at(ev(12, 10, 1, 2)); p.since() != 12 || p.resourceVersion() != 12 || !p.complete {
		t.Errorf("complete position: %+v since %d rv %d", p, p.since(), p.resourceVersion())
	}
	pr := &event.Event{Type: event.Progress, Revision: 20, PrevRangeRevision: 12}
	if !through(12).quietAfter(pr) || at(ev(12, 10, 0, 2)).quietAfter(pr) || through(11).quietAfter(pr) {
		t.Error("quietAfter wrong")
	}
	if !at(ev(12, 10, 0, 2)).less(at(ev(12, 10, 1, 2))) || !at(ev(12, 10, 1, 3)).less(through(12)) || through(12).less(at(ev(12, 10, 0, 1))) {
		t.Error("less wrong")
	}
}
