// Package window keeps the most recent events of one range in revision
// order, bounded by count, bytes and age, and answers "every event after
// revision X" for watch catch-up, or says the window cannot prove it has
// them all.
//
// The bytes a window is charged are those it alone keeps alive: an
// event's object is the store's current version until a later event
// supersedes it, and that later event (its previous version) pays for
// it; a Deleted event pays for the deleted object too.
package window

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/cachenode/internal/store"
	"github.com/kgate/kgate/storage"
)

// Config bounds a window. Zero fields take the defaults.
type Config struct {
	MaxEvents int           // default 100,000
	MaxBytes  int64         // default 256 MiB, of the bytes only the window holds
	MaxAge    time.Duration // default 5 minutes
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Budget, when set, bounds this window together with the others
	// under it; Release takes the window out.
	Budget *Budget
}

// Defaults of Config.
const (
	DefaultMaxEvents = 100_000
	DefaultMaxBytes  = 256 << 20
	DefaultMaxAge    = 5 * time.Minute
)

func (c *Config) setDefaults() error {
	if c.MaxEvents < 0 || c.MaxBytes < 0 || c.MaxAge < 0 {
		return fmt.Errorf("cannot make window: negative bound in %+v", *c)
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Item is one event kept in the window: the event as published, and the
// store entry the key had before it (nil for Added), to rewind a snapshot.
// Items are immutable once appended.
type Item struct {
	event.Event
	Prev *store.Entry

	at time.Time
	// size is the memory the item alone keeps alive (charged to the
	// window and its budget); wire the bytes it takes to send.
	size, wire int64
}

// Change returns what store.Snapshot.Rewind needs to undo the item.
func (it *Item) Change() store.Change { return store.Change{Key: it.Key, Prev: it.Prev} }

// itemOverhead approximates the struct and its maps.
const itemOverhead = 512

// charge returns the memory an event with the previous entry prev keeps
// alive that the store does not: the superseded (or deleted) version,
// and a deleted object's last state. The current version of an Added or
// Modified object is the store's until the next event on its key, which
// pays for it then as that event's prev.
func charge(ev *event.Event, prev *store.Entry) int64 {
	n := int64(len(ev.Key)) + itemOverhead
	if prev != nil {
		n += prev.Size()
	} else {
		n += int64(len(ev.PrevObject))
	}
	if ev.Type == event.Deleted {
		n += int64(len(ev.Object))
	}
	return n
}

// Ring is the window of one range. It is safe for concurrent use: one
// writer (the reflector), many readers.
type Ring struct {
	cfg Config

	mu sync.RWMutex // guards everything below
	// buf is a circular buffer of n items starting at head; it grows by
	// doubling up to cfg.MaxEvents.
	buf   []*Item
	head  int
	n     int
	bytes int64
	// from is the revision the window is complete from: it holds every
	// event with from < Revision <= seen.
	from int64
	seen int64
	// budget is cfg.Budget until Release.
	budget *Budget
	// base is the bytes of the range's store, as last told (SetBase).
	base int64
}

// New returns an empty window complete from rev.
func New(cfg Config, rev int64) (*Ring, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Ring{cfg: cfg, buf: make([]*Item, min(64, cfg.MaxEvents)), from: rev, seen: rev, budget: cfg.Budget}
	if r.budget != nil {
		r.budget.add(r)
	}
	return r, nil
}

// Release takes the window out of its budget, when it is replaced or
// its range is no longer served. It may still be read; it must not be
// appended to.
func (r *Ring) Release() {
	r.mu.Lock()
	b := r.budget
	r.budget = nil
	if b != nil {
		b.total.Add(-r.bytes)
		b.base.Add(-r.base)
	}
	r.mu.Unlock()
	if b != nil {
		b.remove(r)
	}
}

// SetBase tells the window's budget how many bytes the range's store
// holds now: a budget with a share bounds the windows by a share of
// what their stores hold.
func (r *Ring) SetBase(bytes int64) {
	r.mu.Lock()
	b := r.budget
	if b != nil {
		b.base.Add(bytes - r.base)
	}
	r.base = bytes
	r.mu.Unlock()
	if b != nil {
		b.enforce()
	}
}

// Append adds the next event. Its revision must not be lower than the
// last one's (events of one etcd transaction share a revision).
func (r *Ring) Append(ev event.Event, prev *store.Entry) {
	it := &Item{Event: ev, Prev: prev, at: r.cfg.Now()}
	it.size = charge(&ev, prev)
	it.wire = int64(len(ev.Object)+len(ev.PrevObject)+len(ev.Key)) + itemOverhead
	r.mu.Lock()
	r.appendLocked(it)
	b := r.budget
	r.mu.Unlock()
	if b != nil {
		b.enforce()
	}
}

func (r *Ring) appendLocked(it *Item) {
	ev := &it.Event
	// A revision is complete only with its last event: a reader between
	// the events of one transaction must not be told it has them all.
	if complete := ev.Revision - 1; !ev.Last() && complete > r.seen {
		r.seen = complete
	} else if ev.Last() && ev.Revision > r.seen {
		r.seen = ev.Revision
	}
	if r.n == len(r.buf) {
		if len(r.buf) < r.cfg.MaxEvents {
			r.grow()
		} else {
			r.evictOldest()
		}
	}
	r.buf[(r.head+r.n)%len(r.buf)] = it
	r.n++
	r.bytes += it.size
	if r.budget != nil {
		r.budget.total.Add(it.size)
	}
	r.trimLocked(it.at)
}

func (r *Ring) grow() {
	size := min(2*len(r.buf), r.cfg.MaxEvents)
	buf := make([]*Item, size)
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}

// evictOldest drops the first item: the window is then complete only from
// its revision on.
func (r *Ring) evictOldest() {
	it := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.bytes -= it.size
	if r.budget != nil {
		r.budget.total.Add(-it.size)
	}
	if it.Revision > r.from {
		r.from = it.Revision
	}
}

// oldestEvictable returns the revision of the oldest event unless the
// window is down to its newest one.
func (r *Ring) oldestEvictable() (int64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.n <= 1 {
		return 0, false
	}
	return r.buf[r.head].Revision, true
}

// evictUpTo evicts for budget b the oldest events while b is over its
// bound, the window keeps its newest event, and (when upTo >= 0) they
// are not newer than upTo; at least one event when it can. It returns
// how many it evicted.
func (r *Ring) evictUpTo(upTo int64, b *Budget) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.budget != b {
		return 0 // released meanwhile
	}
	n := 0
	limit := b.Limit()
	var last time.Time
	for r.n > 1 && b.total.Load() > limit && (n == 0 || upTo < 0 || r.buf[r.head].Revision <= upTo) {
		last = r.buf[r.head].at
		r.evictOldest()
		n++
	}
	if n > 0 {
		b.evictions.Add(int64(n))
		b.evictedAge.Store(int64(r.cfg.Now().Sub(last)))
	}
	return n
}

// trimLocked evicts beyond the byte and age bounds; the newest item stays.
func (r *Ring) trimLocked(now time.Time) {
	for r.n > 1 {
		oldest := r.buf[r.head]
		if r.bytes <= r.cfg.MaxBytes && now.Sub(oldest.at) <= r.cfg.MaxAge {
			return
		}
		r.evictOldest()
	}
	if r.n == 1 && now.Sub(r.buf[r.head].at) > r.cfg.MaxAge {
		r.evictOldest()
	}
}

// Expire evicts events older than MaxAge; call it now and then on a quiet
// range.
func (r *Ring) Expire() {
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trimLocked(now)
}

// Advance records that the range saw no event up to rev.
func (r *Ring) Advance(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev > r.seen {
		r.seen = rev
	}
}

// at returns the i-th item from the oldest. Callers hold mu.
func (r *Ring) at(i int) *Item { return r.buf[(r.head+i)%len(r.buf)] }

// firstAfter returns the index of the first item with Revision > rev.
func (r *Ring) firstAfter(rev int64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).Revision > rev })
}

// Since appends to dst the events with Revision > rev, oldest first, and
// returns the revision the answer is complete up to. It stops before
// maxBytes of objects (0: no limit), but returns at least one event; seen
// is then the revision of the last event returned. A rev older than the
// window is storage.ErrCompacted.
func (r *Ring) Since(rev int64, dst []*Item, maxBytes int64) (items []*Item, seen int64, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if rev < r.from {
		return dst, 0, fmt.Errorf("cannot read events after %d: window starts at %d: %w", rev, r.from, storage.ErrCompacted)
	}
	var size int64
	for i := r.firstAfter(rev); i < r.n; i++ {
		it := r.at(i)
		size += it.wire
		if maxBytes > 0 && size > maxBytes && len(dst) > 0 && it.Revision != dst[len(dst)-1].Revision {
			return dst, dst[len(dst)-1].Revision, nil
		}
		dst = append(dst, it)
	}
	return dst, r.seen, nil
}

// Changes appends to dst the changes of the events with
// rev < Revision <= upTo, oldest first, or fails with storage.ErrCompacted
// when the window does not reach back to rev, or when there are more than
// max of them (0: no limit).
func (r *Ring) Changes(rev, upTo int64, dst []store.Change, max int) ([]store.Change, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if rev < r.from {
		return dst, fmt.Errorf("cannot rewind to %d: window starts at %d: %w", rev, r.from, storage.ErrCompacted)
	}
	for i := r.firstAfter(rev); i < r.n; i++ {
		it := r.at(i)
		if it.Revision > upTo {
			break
		}
		if max > 0 && len(dst) >= max {
			return dst, fmt.Errorf("cannot rewind to %d: more than %d changes: %w", rev, max, storage.ErrCompacted)
		}
		dst = append(dst, it.Change())
	}
	return dst, nil
}

// Stats returns the number of events held and their bytes.
func (r *Ring) Stats() (events int, bytes int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.n, r.bytes
}

// Bounds returns the revisions the window is complete between: it holds
// every event with from < Revision <= seen.
func (r *Ring) Bounds() (from, seen int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.from, r.seen
}
