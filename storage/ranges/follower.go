package ranges

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kgate/kgate/storage/registry"
)

// Source is the range table as its readers see it: a *Table that never
// changes, or a *Follower that changes with the registry.
type Source interface {
	// Current returns the table now. It is immutable.
	Current() *Table
	// Changed returns a channel closed at the next change (nil: never).
	// Changes coalesce: a follower takes the channel, reads Current, and
	// waits. It may also fire when the table stayed the same.
	Changed() <-chan struct{}
}

// Follower is the range table of a changing registry: Default's ranges of
// the registry's current resources, cut at the split keys of Config.
// A resource added brings its ranges (split when Config names them), a
// resource removed takes its ranges away; the other ranges keep their IDs
// and their *Range values, and a change that touches no range keeps the
// *Table. Safe for concurrent use; Current is lock-free once the table
// follows the registry's latest generation.
type Follower struct {
	reg *registry.Registry
	cfg Config

	mu  sync.Mutex // serializes rebuilds
	cur atomic.Pointer[followed]
}

// followed is the table made of one registry generation.
type followed struct {
	gen   uint64
	table *Table
	err   error // the rebuild of gen failed; table is the previous one
}

// Follow returns the table of reg's resources split by cfg, following
// reg's changes. Unlike WithSplits, a split of a range reg does not have
// (yet) is no error: it applies when the resource is added.
func Follow(reg *registry.Registry, cfg Config) (*Follower, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	f := &Follower{reg: reg, cfg: cfg}
	s := reg.Snapshot()
	t, err := f.build(s, nil)
	if err != nil {
		return nil, err
	}
	f.cur.Store(&followed{gen: s.Generation(), table: t})
	return f, nil
}

// Current returns the table of the registry's current resources.
func (f *Follower) Current() *Table {
	s := f.reg.Snapshot()
	if c := f.cur.Load(); c.gen >= s.Generation() {
		return c.table
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cur.Load()
	if c.gen >= s.Generation() {
		return c.table // a concurrent caller rebuilt it
	}
	t, err := f.build(s, c.table)
	if err != nil {
		// The registry refuses prefixes that nest, so this takes a range
		// id clash ("a.b" and "a_b"): keep the ranges we had.
		f.cur.Store(&followed{gen: s.Generation(), table: c.table, err: err})
		return c.table
	}
	f.cur.Store(&followed{gen: s.Generation(), table: t})
	return t
}

// Changed returns a channel closed at the registry's next change.
func (f *Follower) Changed() <-chan struct{} { return f.reg.Changed() }

// Err returns why the table could not follow the registry's latest
// change, or nil.
func (f *Follower) Err() error {
	f.Current()
	return f.cur.Load().err
}

// build makes the table of s, reusing the ranges (and the table) of prev
// that did not change.
func (f *Follower) build(s *registry.Snapshot, prev *Table) (*Table, error) {
	base, err := defaultOf(s)
	if err != nil {
		return nil, fmt.Errorf("cannot follow the registry: %w", err)
	}
	t, err := base.split(f.cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot follow the registry: %w", err)
	}
	if prev == nil {
		return t, nil
	}
	same := len(t.ranges) == len(prev.ranges)
	for i, r := range t.ranges {
		if old, ok := prev.byID[r.ID]; ok && old.Start == r.Start && old.End == r.End && old.Resource == r.Resource {
			t.ranges[i] = old
			t.byID[r.ID] = old
		}
		same = same && t.ranges[i] == prev.ranges[i]
	}
	if same {
		return prev, nil
	}
	return t, nil
}
