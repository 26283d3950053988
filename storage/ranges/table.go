// Package ranges defines the range table: contiguous etcd key intervals
// [Start, End) that cache nodes reflect, each tied to the resource stored in
// it. Gateways and cache nodes build the same table from the registry and
// follow its changes (Follower).
package ranges

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kgate/kgate/storage/registry"
)

// Range is one key interval and the resource whose objects live there.
type Range struct {
	// ID names the range in URLs and NATS subjects: only [a-z0-9_-].
	ID    string
	Start string // inclusive
	End   string // exclusive
	// Resource is a resource stored under the range; when several resources
	// share a prefix (core and events.k8s.io events) it is the one whose
	// served kind equals the storage kind.
	Resource *registry.Resource
}

// Contains reports whether key lies in the range.
func (r *Range) Contains(key string) bool { return key >= r.Start && key < r.End }

// Table is an immutable, ordered set of non-overlapping ranges.
type Table struct {
	ranges []*Range // sorted by Start
	byID   map[string]*Range
}

// Default returns one range per distinct etcd prefix of reg's resources.
func Default(reg *registry.Registry) (*Table, error) { return defaultOf(reg.Snapshot()) }

// defaultOf returns one range per distinct etcd prefix of s's resources.
func defaultOf(s *registry.Snapshot) (*Table, error) {
	byPrefix := map[string]*registry.Resource{}
	var prefixes []string
	for _, res := range s.Resources() {
		if !res.Namespaced && len(res.SupportedVerbs()) == 1 {
			continue // create-only virtual resources have nothing stored
		}
		if res.Resource == "bindings" || res.Prefix == "" {
			continue // nothing stored
		}
		cur, seen := byPrefix[res.Prefix]
		if !seen {
			prefixes = append(prefixes, res.Prefix)
		}
		if !seen || (cur.StorageKind.Kind != "" && res.StorageKind.Kind == "") {
			byPrefix[res.Prefix] = res
		}
	}
	var rs []*Range
	for _, p := range prefixes {
		rs = append(rs, &Range{ID: IDFor(p), Start: p + "/", End: p + "0", Resource: byPrefix[p]})
	}
	return New(rs)
}

// New validates and indexes ranges.
func New(rs []*Range) (*Table, error) {
	t := &Table{byID: map[string]*Range{}}
	for _, r := range rs {
		if r.ID == "" || r.Start >= r.End || r.Resource == nil {
			return nil, fmt.Errorf("cannot build range table: bad range %q [%q, %q)", r.ID, r.Start, r.End)
		}
		for _, c := range r.ID {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return nil, fmt.Errorf("cannot build range table: range id %q has %q", r.ID, c)
			}
		}
		if _, dup := t.byID[r.ID]; dup {
			return nil, fmt.Errorf("cannot build range table: range id %q twice", r.ID)
		}
		t.byID[r.ID] = r
		t.ranges = append(t.ranges, r)
	}
	sort.Slice(t.ranges, func(i, j int) bool { return t.ranges[i].Start < t.ranges[j].Start })
	for i := 1; i < len(t.ranges); i++ {
		if t.ranges[i].Start < t.ranges[i-1].End {
			return nil, fmt.Errorf("cannot build range table: %q overlaps %q", t.ranges[i].ID, t.ranges[i-1].ID)
		}
	}
	return t, nil
}

// IDFor derives a range id from an etcd prefix: "/registry/services/specs"
// becomes "services-specs", dots become underscores.
func IDFor(prefix string) string {
	id := strings.TrimPrefix(prefix, "/registry/")
	id = strings.ToLower(id)
	id = strings.NewReplacer("/", "-", ".", "_").Replace(id)
	return id
}

// All returns the ranges in key order.
func (t *Table) All() []*Range { return t.ranges }

// Current returns t: a Table is a Source that never changes.
func (t *Table) Current() *Table { return t }

// Changed returns nil, a channel that never fires: t never changes.
func (t *Table) Changed() <-chan struct{} { return nil }

// ByID returns the range named id.
func (t *Table) ByID(id string) (*Range, bool) {
	r, ok := t.byID[id]
	return r, ok
}

// Lookup returns the range holding key.
func (t *Table) Lookup(key string) (*Range, bool) {
	i := sort.Search(len(t.ranges), func(i int) bool { return t.ranges[i].End > key })
	if i < len(t.ranges) && t.ranges[i].Contains(key) {
		return t.ranges[i], true
	}
	return nil, false
}

// Intersecting returns, in key order, the ranges that hold keys starting
// with prefix.
func (t *Table) Intersecting(prefix string) []*Range {
	end := prefixEnd(prefix)
	var out []*Range
	for _, r := range t.ranges {
		if r.End > prefix && (end == "" || r.Start < end) {
			out = append(out, r)
		}
	}
	return out
}

// prefixEnd returns the smallest key greater than every key with prefix,
// or "" when there is none.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
