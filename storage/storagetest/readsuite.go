package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Read says which state a read sees, as resourceVersion and
// resourceVersionMatch do (and the cache node's read API):
//
//	ResourceVersion 0, Match ""       any state ("0"); on etcd, the latest, linearizably
//	ResourceVersion N, "NotOlderThan" the latest state, once N is reached
//	ResourceVersion N, "Exact"        the state at N
type Read struct {
	ResourceVersion int64
	Match           string
}

// Matches of Read.
const (
	NotOlderThan = string(metav1.ResourceVersionMatchNotOlderThan)
	Exact        = string(metav1.ResourceVersionMatchExact)
)

// ListOptions select a page of a list of one namespace.
type ListOptions struct {
	Read
	// Label and Field are selectors in their string form.
	Label, Field string
	// Limit is the most items returned; 0 means all.
	Limit int64
	// After is the exclusive start key: the Last of the previous page.
	After string
}

// ListResult is one page.
type ListResult struct {
	Items []*corev1.ConfigMap
	// Revision is the revision the page was read at.
	Revision int64
	// Last is the key of the last item when more remain, else "".
	Last string
	// Remaining is how many items follow, when known.
	Remaining int64
}

// ReadTarget is what RunReadSuite reads ConfigMaps through: etcd-backed
// storage or a cache node, each behind a small adapter in its own tests.
type ReadTarget interface {
	Get(ctx context.Context, ns, name string, r Read) (*corev1.ConfigMap, error)
	List(ctx context.Context, ns string, o ListOptions) (*ListResult, error)
	// Put creates or updates (unconditionally) a ConfigMap in etcd and
	// returns the revision of the write. Reads after it may have to
	// wait for the target to see it (a cache): the suite reads at that
	// revision first.
	Put(ctx context.Context, cm *corev1.ConfigMap) (int64, error)
	// Expire makes rev unreadable by an Exact read: etcd compacted past
	// it, or a cache's window moved past it.
	Expire(ctx context.Context, rev int64) error
}

// ReadSuiteOptions say where a target legitimately differs.
type ReadSuiteOptions struct {
	// Cached: the target is a cache node. A read without a revision
	// ("0") may be served from its state as it is, and NotOlderThan N
	// waits until N is seen (then serves the latest state it has); the
	// gateway's consistent read is NotOlderThan etcd's current revision.
	// Storage reads etcd directly: a read without a revision is
	// linearizable and a revision is always exact, so those rows do
	// not apply to it.
	Cached bool
	// Selectors: the target applies label and field selectors. Storage
	// does not (the REST handler filters what it reads from etcd).
	Selectors bool
}

// rvSetup is the history every row reads: in its namespace, a created,
// b created, a updated, c created, at these revisions.
type rvSetup struct {
	ns                      string
	revA, revB, revA2, revC int64
}

// RunReadSuite checks the read semantics of the resourceVersion table
// (docs/design.md; deploy/watchcheck's TestResourceVersionTable checks the same
// through a whole cluster) against target: GET and LIST with no revision,
// "0", NotOlderThan N, Exact N (and compacted), a revision not reached
// yet, limit and continue at the first page's revision, and selectors.
// Rows run in order on one target, each in its own namespace; the last
// expires a revision.
func RunReadSuite(t *testing.T, target ReadTarget, opts ReadSuiteOptions) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	n := 0
	setup := func(t *testing.T) *rvSetup {
		t.Helper()
		n++
		s := &rvSetup{ns: fmt.Sprintf("rv%d", n)}
		put := func(name, app, value string) int64 {
			t.Helper()
			rev, err := target.Put(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{"app": app}},
				Data:       map[string]string{"v": value},
			})
			if err != nil {
				t.Fatalf("cannot put %s: %v", name, err)
			}
			return rev
		}
		s.revA = put("a", "web", "a1")
		s.revB = put("b", "db", "b1")
		s.revA2 = put("a", "web", "a2")
		s.revC = put("c", "web", "c1")
		if !(s.revA < s.revB && s.revB < s.revA2 && s.revA2 < s.revC) {
			t.Fatalf("revisions %+v not increasing", s)
		}
		// A cache reaches the last write before the rows read.
		if opts.Cached {
			if _, err := target.Get(ctx, s.ns, "c", Read{ResourceVersion: s.revC, Match: NotOlderThan}); err != nil {
				t.Fatalf("cannot read the setup: %v", err)
			}
		}
		return s
	}
	// latest is the gateway's consistent read on target.
	latest := func(s *rvSetup) Read {
		if opts.Cached {
			return Read{ResourceVersion: s.revC, Match: NotOlderThan}
		}
		return Read{}
	}
	// tooLarge reads with a short deadline: a cache waits for the
	// revision until shortly before it.
	tooLarge := func(t *testing.T, what string, read func(ctx context.Context) error) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := read(sctx); !errors.Is(err, storage.ErrRevisionTooLarge) {
			t.Errorf("%s: error %v, want %v", what, err, storage.ErrRevisionTooLarge)
		}
	}

	t.Run("get", func(t *testing.T) {
		s := setup(t)
		get := func(name string, r Read, wantValue string, wantRV int64, wantErr error) {
			t.Helper()
			cm, err := target.Get(ctx, s.ns, name, r)
			if !errors.Is(err, wantErr) {
				t.Fatalf("get %s at %+v: error %v, want %v", name, r, err, wantErr)
			}
			if err != nil {
				return
			}
			if cm.Name != name || cm.Namespace != s.ns || cm.Data["v"] != wantValue || cm.ResourceVersion != strconv.FormatInt(wantRV, 10) {
				t.Errorf("get %s at %+v: %s/%s %q rv %s, want %q rv %d", name, r, cm.Namespace, cm.Name, cm.Data["v"], cm.ResourceVersion, wantValue, wantRV)
			}
		}
		// Consistent: the latest write.
		get("a", latest(s), "a2", s.revA2, nil)
		// Exact: the object as it was, with the resourceVersion of its
		// last change at or before N.
		get("a", Read{ResourceVersion: s.revA, Match: Exact}, "a1", s.revA, nil)
		get("a", Read{ResourceVersion: s.revB, Match: Exact}, "a1", s.revA, nil)
		get("a", Read{ResourceVersion: s.revC, Match: Exact}, "a2", s.revA2, nil)
		get("c", Read{ResourceVersion: s.revA2, Match: Exact}, "", 0, storage.ErrNotFound)
		get("missing", latest(s), "", 0, storage.ErrNotFound)
		if opts.Cached {
			// "0": whatever the cache has, here caught up.
			get("a", Read{}, "a2", s.revA2, nil)
			// NotOlderThan an old N: the latest state, not the state at N.
			get("a", Read{ResourceVersion: s.revA, Match: NotOlderThan}, "a2", s.revA2, nil)
			tooLarge(t, "get not older than a future revision", func(ctx context.Context) error {
				_, err := target.Get(ctx, s.ns, "a", Read{ResourceVersion: s.revC + 1000, Match: NotOlderThan})
				return err
			})
		}
		tooLarge(t, "get at a future revision", func(ctx context.Context) error {
			_, err := target.Get(ctx, s.ns, "a", Read{ResourceVersion: s.revC + 1000, Match: Exact})
			return err
		})
	})

	names := func(l *ListResult) string {
		var out []string
		for _, cm := range l.Items {
			out = append(out, cm.Name+"="+cm.Data["v"])
		}
		return strings.Join(out, " ")
	}
	list := func(t *testing.T, s *rvSetup, o ListOptions) *ListResult {
		t.Helper()
		l, err := target.List(ctx, s.ns, o)
		if err != nil {
			t.Fatalf("list %+v: %v", o, err)
		}
		return l
	}

	t.Run("list", func(t *testing.T) {
		s := setup(t)
		check := func(o ListOptions, want string, wantRev int64) {
			t.Helper()
			l := list(t, s, o)
			if got := names(l); got != want {
				t.Errorf("list %+v: %s, want %s", o, got, want)
			}
			if wantRev != 0 && l.Revision != wantRev {
				t.Errorf("list %+v at revision %d, want %d", o, l.Revision, wantRev)
			}
			if wantRev == 0 && l.Revision < s.revC {
				t.Errorf("list %+v at revision %d, older than the last write %d", o, l.Revision, s.revC)
			}
			if l.Last != "" {
				t.Errorf("list %+v: Last %q without a limit", o, l.Last)
			}
		}
		check(ListOptions{Read: latest(s)}, "a=a2 b=b1 c=c1", 0)
		check(ListOptions{Read: Read{ResourceVersion: s.revA2, Match: Exact}}, "a=a2 b=b1", s.revA2)
		check(ListOptions{Read: Read{ResourceVersion: s.revB, Match: Exact}}, "a=a1 b=b1", s.revB)
		check(ListOptions{Read: Read{ResourceVersion: s.revA, Match: Exact}}, "a=a1", s.revA)
		if opts.Cached {
			check(ListOptions{}, "a=a2 b=b1 c=c1", 0)
			check(ListOptions{Read: Read{ResourceVersion: s.revA, Match: NotOlderThan}}, "a=a2 b=b1 c=c1", 0)
			tooLarge(t, "list not older than a future revision", func(ctx context.Context) error {
				_, err := target.List(ctx, s.ns, ListOptions{Read: Read{ResourceVersion: s.revC + 1000, Match: NotOlderThan}})
				return err
			})
		}
		tooLarge(t, "list at a future revision", func(ctx context.Context) error {
			_, err := target.List(ctx, s.ns, ListOptions{Read: Read{ResourceVersion: s.revC + 1000, Match: Exact}})
			return err
		})
		// Another namespace's objects are not listed.
		other := setup(t)
		if got := names(list(t, s, ListOptions{Read: latest(other)})); got != "a=a2 b=b1 c=c1" {
			t.Errorf("list after another namespace's writes: %s", got)
		}
	})

	t.Run("pages", func(t *testing.T) {
		s := setup(t)
		first := list(t, s, ListOptions{Read: latest(s), Limit: 1})
		if names(first) != "a=a2" || first.Last == "" || first.Remaining != 2 {
			t.Fatalf("first page %s last %q remaining %d", names(first), first.Last, first.Remaining)
		}
		// Writes after the first page are not in the next pages: they
		// are read at the first page's revision.
		if _, err := target.Put(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "b"}, Data: map[string]string{"v": "b2"}}); err != nil {
			t.Fatal(err)
		}
		rev, err := target.Put(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "bb"}, Data: map[string]string{"v": "new"}})
		if err != nil {
			t.Fatal(err)
		}
		if opts.Cached {
			if _, err := target.Get(ctx, s.ns, "bb", Read{ResourceVersion: rev, Match: NotOlderThan}); err != nil {
				t.Fatal(err)
			}
		}
		page := first
		got := names(first)
		for i := 0; page.Last != ""; i++ {
			if i > 5 {
				t.Fatal("too many pages")
			}
			page = list(t, s, ListOptions{Read: Read{ResourceVersion: first.Revision, Match: Exact}, Limit: 1, After: page.Last})
			if page.Revision != first.Revision {
				t.Errorf("page %d at revision %d, want %d", i+2, page.Revision, first.Revision)
			}
			got += " " + names(page)
		}
		if got != "a=a2 b=b1 c=c1" {
			t.Errorf("pages: %s, want a=a2 b=b1 c=c1 as of the first page", got)
		}
		// A limit larger than what remains ends the list.
		if l := list(t, s, ListOptions{Read: Read{ResourceVersion: first.Revision, Match: Exact}, Limit: 5, After: first.Last}); l.Last != "" || names(l) != "b=b1 c=c1" {
			t.Errorf("rest of the list: %s last %q", names(l), l.Last)
		}
	})

	if opts.Selectors {
		t.Run("selectors", func(t *testing.T) {
			s := setup(t)
			for _, tc := range []struct {
				o    ListOptions
				want string
			}{
				{ListOptions{Label: "app=web"}, "a=a2 c=c1"},
				{ListOptions{Label: "app!=web"}, "b=b1"},
				{ListOptions{Label: "app in (db,web),app!=db"}, "a=a2 c=c1"},
				{ListOptions{Label: "missing"}, ""},
				{ListOptions{Field: "metadata.name=b"}, "b=b1"},
				{ListOptions{Field: "metadata.name!=b"}, "a=a2 c=c1"},
				{ListOptions{Field: "metadata.namespace=" + s.ns, Label: "app=web"}, "a=a2 c=c1"},
				{ListOptions{Field: "metadata.namespace=elsewhere"}, ""},
				// At a revision: the labels as they were.
				{ListOptions{Label: "app=web", Read: Read{ResourceVersion: s.revB, Match: Exact}}, "a=a1"},
			} {
				if tc.o.Read == (Read{}) {
					tc.o.Read = latest(s)
				}
				if got := names(list(t, s, tc.o)); got != tc.want {
					t.Errorf("list %+v: %s, want %s", tc.o, got, tc.want)
				}
			}
			// With a limit, a page holds only matching items.
			l := list(t, s, ListOptions{Read: latest(s), Label: "app=web", Limit: 1})
			if names(l) != "a=a2" || l.Last == "" {
				t.Fatalf("first selected page %s last %q", names(l), l.Last)
			}
			l = list(t, s, ListOptions{Read: Read{ResourceVersion: l.Revision, Match: Exact}, Label: "app=web", Limit: 1, After: l.Last})
			if names(l) != "c=c1" {
				t.Errorf("second selected page %s", names(l))
			}
		})
	}

	t.Run("expired", func(t *testing.T) {
		s := setup(t)
		if err := target.Expire(ctx, s.revB); err != nil {
			t.Fatalf("cannot expire revision %d: %v", s.revB, err)
		}
		for _, rev := range []int64{s.revA, s.revB} {
			if _, err := target.Get(ctx, s.ns, "a", Read{ResourceVersion: rev, Match: Exact}); !errors.Is(err, storage.ErrCompacted) {
				t.Errorf("get at expired %d: error %v, want %v", rev, err, storage.ErrCompacted)
			}
			if _, err := target.List(ctx, s.ns, ListOptions{Read: Read{ResourceVersion: rev, Match: Exact}}); !errors.Is(err, storage.ErrCompacted) {
				t.Errorf("list at expired %d: error %v, want %v", rev, err, storage.ErrCompacted)
			}
		}
		// The latest state is still there.
		if got := names(list(t, s, ListOptions{Read: latest(s)})); got != "a=a2 b=b1 c=c1" {
			t.Errorf("list after expiry: %s", got)
		}
		if opts.Cached {
			if got := names(list(t, s, ListOptions{Read: Read{ResourceVersion: s.revA, Match: NotOlderThan}})); got != "a=a2 b=b1 c=c1" {
				t.Errorf("not older than an expired revision: %s", got)
			}
		}
	})
}

// PutConfigMap creates cm through s, or replaces its labels and data when
// it exists, and returns the revision of the write: the Put of a
// ReadTarget's adapter.
func PutConfigMap(ctx context.Context, s *storage.Store, res *registry.Resource, cm *corev1.ConfigMap) (int64, error) {
	out, err := s.Create(ctx, res, cm.DeepCopy())
	if errors.Is(err, storage.ErrAlreadyExists) {
		out, err = s.Update(ctx, res, cm.Namespace, cm.Name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
			next := cur.(*corev1.ConfigMap).DeepCopy()
			next.Labels, next.Data = cm.Labels, cm.Data
			return next, nil
		})
	}
	if err != nil {
		return 0, err
	}
	m, err := meta.Accessor(out)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m.GetResourceVersion(), 10, 64)
}
