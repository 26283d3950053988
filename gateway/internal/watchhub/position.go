package watchhub

import "github.com/kgate/kgate/cachenode/event"

// position is a place in a range's sequence of events, which are ordered
// by (Revision, Index): every event at or before it has been handled.
// complete says every event of rev is at or before it.
type position struct {
	rev      int64
	idx      uint32
	complete bool
}

// through is the position after every event up to and including rev.
func through(rev int64) position { return position{rev: rev, complete: true} }

// at is the position of ev itself.
func at(ev *event.Event) position {
	return position{rev: ev.Revision, idx: ev.Index, complete: ev.Last()}
}

// covers reports whether ev is at or before p.
func (p position) covers(ev *event.Event) bool {
	return ev.Revision < p.rev || ev.Revision == p.rev && (p.complete || ev.Index <= p.idx)
}

// next reports whether ev comes right after p, with nothing in between.
func (p position) next(ev *event.Event) bool {
	if ev.Revision == p.rev {
		return !p.complete && ev.Index == p.idx+1
	}
	return ev.Revision > p.rev && p.complete && ev.Index == 0 &&
		ev.PrevRangeRevision != 0 && ev.PrevRangeRevision <= p.rev
}

// quietAfter reports whether a progress event pr (the range saw nothing
// after its last event at pr.PrevRangeRevision) follows p with no gap.
func (p position) quietAfter(pr *event.Event) bool {
	return p.complete && pr.PrevRangeRevision != 0 && pr.PrevRangeRevision <= p.rev
}

// since is the revision to read a window after so that the answer holds
// every event after p.
func (p position) since() int64 {
	if p.complete {
		return p.rev
	}
	return p.rev - 1
}

// resourceVersion is the newest revision a client may resume from without
// missing an event: p.rev only once that revision is complete.
func (p position) resourceVersion() int64 {
	if p.complete {
		return p.rev
	}
	return p.rev - 1
}

// less orders positions.
func (p position) less(q position) bool {
	if p.rev != q.rev {
		return p.rev < q.rev
	}
	if p.complete != q.complete {
		return q.complete
	}
	return p.idx < q.idx
}
