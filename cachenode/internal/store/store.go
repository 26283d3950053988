// Package store is the ordered, in-memory copy of the objects of one range:
// a B-tree keyed by etcd key whose entries are immutable and hold the
// bytes served for them. Readers take O(1) copy-on-write snapshots, so a
// LIST sees one revision while the reflector keeps applying events.
package store

import (
	"errors"
	"strings"
	"sync"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

var errNoProtobuf = errors.New("store: no protobuf encoder for this entry")

// degree of the B-tree: 32 keeps nodes about a cache page of pointers.
const degree = 32

// item is what the tree holds: the key beside the entry so that a lookup
// needs no allocated probe.
type item struct {
	key string
	e   *Entry
}

func less(a, b item) bool { return a.key < b.key }

func newTree() *btree.BTreeG[item] { return btree.NewG(degree, less) }

// Store is the current state of one range. Its methods are safe for
// concurrent use; one writer (the reflector) and many readers is the
// intended use.
type Store struct {
	mu sync.Mutex // guards everything below
	// tree is written in place; readers never see it, only clones.
	tree  *btree.BTreeG[item]
	rev   int64 // the revision the tree is complete up to
	bytes int64 // sum of Entry.Size
	// snap is the latest snapshot handed out, reused until the next write.
	snap *Snapshot
}

// New returns an empty store at revision rev.
func New(rev int64) *Store { return &Store{tree: newTree(), rev: rev} }

// Load returns a store holding entries (in any order) at revision rev.
func Load(entries []*Entry, rev int64) *Store {
	s := New(rev)
	for _, e := range entries {
		if old, ok := s.tree.ReplaceOrInsert(item{e.Key, e}); ok {
			s.bytes -= old.e.Size()
		}
		s.bytes += e.Size()
	}
	return s
}

// Put stores e as the object at e.Key as of revision rev and returns the
// entry it replaced, if any.
func (s *Store) Put(e *Entry, rev int64) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap = nil
	old, ok := s.tree.ReplaceOrInsert(item{e.Key, e})
	s.bytes += e.Size()
	if rev > s.rev {
		s.rev = rev
	}
	if ok {
		s.bytes -= old.e.Size()
		return old.e
	}
	return nil
}

// Delete removes key as of revision rev and returns the entry removed.
func (s *Store) Delete(key string, rev int64) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap = nil
	if rev > s.rev {
		s.rev = rev
	}
	old, ok := s.tree.Delete(item{key: key})
	if !ok {
		return nil
	}
	s.bytes -= old.e.Size()
	return old.e
}

// Get returns the current entry at key.
func (s *Store) Get(key string) (*Entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.tree.Get(item{key: key})
	return it.e, ok
}

// Advance records that nothing changed up to rev.
func (s *Store) Advance(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev <= s.rev {
		return
	}
	s.rev = rev
	if s.snap != nil {
		s.snap = s.snap.At(rev)
	}
}

// Revision returns the revision the store is complete up to.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Stats returns the number of objects and their bytes.
func (s *Store) Stats() (objects int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Len(), s.bytes
}

// Snapshot returns a read-only view of the store now. It costs O(1), and
// nothing while the store does not change.
func (s *Store) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		s.snap = &Snapshot{t: &frozen{tree: s.tree.Clone()}, Revision: s.rev}
	}
	return s.snap
}

// Snapshot is the state of a range at Revision. It is immutable and safe
// for concurrent use.
type Snapshot struct {
	t        *frozen
	Revision int64
}

// frozen is a tree nobody writes; snapshots of equal content share it.
type frozen struct {
	cloneMu sync.Mutex // serialises Clone (btree: Clone must not run concurrently)
	tree    *btree.BTreeG[item]
}

func (f *frozen) clone() *btree.BTreeG[item] {
	f.cloneMu.Lock()
	defer f.cloneMu.Unlock()
	return f.tree.Clone()
}

// Len returns the number of objects.
func (s *Snapshot) Len() int { return s.t.tree.Len() }

// Get returns the entry at key.
func (s *Snapshot) Get(key string) (*Entry, bool) {
	it, ok := s.t.tree.Get(item{key: key})
	return it.e, ok
}

// At returns the same state labelled with another revision: nothing
// changed between the two.
func (s *Snapshot) At(rev int64) *Snapshot {
	if rev == s.Revision {
		return s
	}
	return &Snapshot{t: s.t, Revision: rev}
}

// Change is one event to undo by Rewind: the key and the entry it had
// before the event (nil when the event created it).
type Change struct {
	Key  string
	Prev *Entry
}

// Rewind returns the state at rev, given the changes made after rev up to
// s.Revision in the order they were made.
func (s *Snapshot) Rewind(rev int64, changes []Change) *Snapshot {
	if len(changes) == 0 {
		return s.At(rev)
	}
	t := s.t.clone()
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.Prev == nil {
			t.Delete(item{key: c.Key})
		} else {
			t.ReplaceOrInsert(item{c.Key, c.Prev})
		}
	}
	return &Snapshot{t: &frozen{tree: t}, Revision: rev}
}

// ListOptions select the entries of a List.
type ListOptions struct {
	// Prefix every key must start with.
	Prefix string
	// After, when not empty, is the last key of the previous page: the
	// list starts after it.
	After string
	// Limit is the most entries to return; 0 means no limit.
	Limit int
	// Label and Field select entries; nil or empty selects all.
	Label labels.Selector
	Field fields.Selector
}

// ListResult is the outcome of a List beyond its entries.
type ListResult struct {
	// More is true when entries matching the options remain after the
	// last one returned.
	More bool
	// Remaining is the number of those entries, counted only when there
	// are no selectors (as kube-apiserver's remainingItemCount); else 0.
	Remaining int64
}

// List appends to dst the entries matching o in key order.
func (s *Snapshot) List(dst []*Entry, o ListOptions) ([]*Entry, ListResult) {
	var res ListResult
	label := o.Label
	if label != nil && label.Empty() {
		label = nil
	}
	field := o.Field
	if field != nil && field.Empty() {
		field = nil
	}
	filtered := label != nil || field != nil
	start := o.Prefix
	if o.After != "" && o.After >= start {
		start = o.After + "\x00"
	}
	n := 0
	s.t.tree.AscendGreaterOrEqual(item{key: start}, func(it item) bool {
		if !strings.HasPrefix(it.key, o.Prefix) {
			return false
		}
		e := it.e
		if label != nil && !label.Matches(e.Labels) {
			return true
		}
		if field != nil && !field.Matches(e.Fields) {
			return true
		}
		if o.Limit > 0 && n >= o.Limit {
			res.More = true
			if filtered {
				return false
			}
			res.Remaining++
			return true
		}
		dst = append(dst, e)
		n++
		return true
	})
	return dst, res
}
