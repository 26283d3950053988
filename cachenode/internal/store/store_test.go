package store

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

func pod(ns, name string, rev int64, l labels.Set, phase string) *Entry {
	key := "/registry/pods/" + ns + "/" + name
	f := fields.Set{"metadata.name": name, "metadata.namespace": ns, "status.phase": phase}
	return NewEntry(key, ns, name, rev, l, f, []byte(fmt.Sprintf(`{"name":%q,"rv":"%d"}`, name, rev)), nil, nil)
}

func names(es []*Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Namespace+"/"+e.Name)
	}
	return out
}

func testStore() *Store {
	return Load([]*Entry{
		pod("a", "p1", 2, labels.Set{"app": "web"}, "Running"),
		pod("a", "p2", 3, labels.Set{"app": "db"}, "Pending"),
		pod("a", "p3", 4, labels.Set{"app": "web"}, "Pending"),
		pod("b", "p1", 5, labels.Set{"app": "web"}, "Running"),
		pod("b", "p2", 6, nil, "Running"),
		pod("ab", "x", 7, nil, "Running"), // "ab/" sorts after "a/": prefix must not leak
	}, 10)
}

func TestList(t *testing.T) {
	snap := testStore().Snapshot()
	sel := func(s string) labels.Selector {
		l, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	fsel := func(s string) fields.Selector {
		f, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name string
		o    ListOptions
		want []string
		res  ListResult
	}{
		{"all", ListOptions{Prefix: "/registry/pods/"}, []string{"a/p1", "a/p2", "a/p3", "ab/x", "b/p1", "b/p2"}, ListResult{}},
		{"namespace", ListOptions{Prefix: "/registry/pods/a/"}, []string{"a/p1", "a/p2", "a/p3"}, ListResult{}},
		{"limit counts remaining", ListOptions{Prefix: "/registry/pods/", Limit: 2}, []string{"a/p1", "a/p2"}, ListResult{More: true, Remaining: 4}},
		{"continue", ListOptions{Prefix: "/registry/pods/", Limit: 2, After: "/registry/pods/a/p2"}, []string{"a/p3", "ab/x"}, ListResult{More: true, Remaining: 2}},
		{"last page", ListOptions{Prefix: "/registry/pods/", Limit: 2, After: "/registry/pods/ab/x"}, []string{"b/p1", "b/p2"}, ListResult{}},
		{"after a missing key", ListOptions{Prefix: "/registry/pods/", After: "/registry/pods/a/p20"}, []string{"a/p3", "ab/x", "b/p1", "b/p2"}, ListResult{}},
		{"after before prefix", ListOptions{Prefix: "/registry/pods/b/", After: "/registry/pods/a/p1"}, []string{"b/p1", "b/p2"}, ListResult{}},
		{"label", ListOptions{Prefix: "/registry/pods/", Label: sel("app=web")}, []string{"a/p1", "a/p3", "b/p1"}, ListResult{}},
		{"label limit: more, no count", ListOptions{Prefix: "/registry/pods/", Label: sel("app=web"), Limit: 1}, []string{"a/p1"}, ListResult{More: true}},
		{"label limit exact fit", ListOptions{Prefix: "/registry/pods/", Label: sel("app=web"), Limit: 3}, []string{"a/p1", "a/p3", "b/p1"}, ListResult{}},
		{"label not in", ListOptions{Prefix: "/registry/pods/", Label: sel("app notin (web)")}, []string{"a/p2", "ab/x", "b/p2"}, ListResult{}},
		{"field", ListOptions{Prefix: "/registry/pods/", Field: fsel("status.phase=Pending")}, []string{"a/p2", "a/p3"}, ListResult{}},
		{"field and label", ListOptions{Prefix: "/registry/pods/", Field: fsel("status.phase=Running"), Label: sel("app")}, []string{"a/p1", "b/p1"}, ListResult{}},
		{"field name", ListOptions{Prefix: "/registry/pods/", Field: fsel("metadata.name=p2,metadata.namespace!=a")}, []string{"b/p2"}, ListResult{}},
		{"empty selectors are no filter", ListOptions{Prefix: "/registry/pods/", Limit: 5, Label: labels.Everything(), Field: fields.Everything()}, []string{"a/p1", "a/p2", "a/p3", "ab/x", "b/p1"}, ListResult{More: true, Remaining: 1}},
		{"no match", ListOptions{Prefix: "/registry/pods/c/"}, []string{}, ListResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res := snap.List(nil, tt.o)
			if !reflect.DeepEqual(names(got), tt.want) || res != tt.res {
				t.Fatalf("List = %v %+v, want %v %+v", names(got), res, tt.want, tt.res)
			}
		})
	}
}

func TestSnapshotIsolation(t *testing.T) {
	s := testStore()
	before := s.Snapshot()
	if again := s.Snapshot(); again != before {
		t.Fatal("Snapshot without writes made a new snapshot")
	}
	if prev := s.Put(pod("a", "p1", 11, nil, "Failed"), 11); prev == nil || prev.ModRevision != 2 {
		t.Fatalf("Put returned %+v", prev)
	}
	if prev := s.Delete("/registry/pods/b/p2", 12); prev == nil || prev.ModRevision != 6 {
		t.Fatalf("Delete returned %+v", prev)
	}
	if prev := s.Delete("/registry/pods/none", 13); prev != nil {
		t.Fatalf("Delete of missing key returned %+v", prev)
	}
	s.Put(pod("c", "new", 14, nil, ""), 14)
	after := s.Snapshot()
	if before.Revision != 10 || after.Revision != 14 {
		t.Fatalf("revisions %d %d", before.Revision, after.Revision)
	}
	if e, _ := before.Get("/registry/pods/a/p1"); e.ModRevision != 2 {
		t.Fatalf("old snapshot sees %d", e.ModRevision)
	}
	if _, ok := before.Get("/registry/pods/b/p2"); !ok {
		t.Fatal("old snapshot lost a deleted key")
	}
	if e, _ := after.Get("/registry/pods/a/p1"); e.ModRevision != 11 {
		t.Fatalf("new snapshot sees %d", e.ModRevision)
	}
	if before.Len() != 6 || after.Len() != 6 {
		t.Fatalf("lens %d %d", before.Len(), after.Len())
	}
	s.Advance(20)
	if got := s.Snapshot(); got.Revision != 20 || got.Len() != 6 {
		t.Fatalf("after Advance: rev %d len %d", got.Revision, got.Len())
	}
	s.Advance(15) // never goes back
	if s.Revision() != 20 {
		t.Fatalf("Revision = %d", s.Revision())
	}
	if n, b := s.Stats(); n != 6 || b <= 0 {
		t.Fatalf("Stats = %d %d", n, b)
	}
}

func TestRewind(t *testing.T) {
	s := testStore()
	at10 := s.Snapshot()
	p1 := at10.t.tree // keep: rewinding must not touch the source tree
	old, _ := s.Get("/registry/pods/a/p1")
	s.Put(pod("a", "p1", 11, nil, "Failed"), 11)
	gone := s.Delete("/registry/pods/b/p2", 12)
	s.Put(pod("c", "new", 13, nil, ""), 13)
	now := s.Snapshot()
	changes := []Change{
		{Key: "/registry/pods/a/p1", Prev: old},
		{Key: "/registry/pods/b/p2", Prev: gone},
		{Key: "/registry/pods/c/new"},
	}
	back := now.Rewind(10, changes)
	want, _ := at10.List(nil, ListOptions{Prefix: "/"})
	got, _ := back.List(nil, ListOptions{Prefix: "/"})
	if !reflect.DeepEqual(got, want) || back.Revision != 10 {
		t.Fatalf("rewound to %d: %v, want %v", back.Revision, names(got), names(want))
	}
	mid := now.Rewind(12, changes[2:])
	if _, ok := mid.Get("/registry/pods/c/new"); ok || mid.Len() != 5 {
		t.Fatalf("rewind to 12: len %d", mid.Len())
	}
	if now.Len() != 6 || at10.t.tree != p1 {
		t.Fatal("rewind changed its source")
	}
	if same := now.Rewind(13, nil); same != now {
		t.Fatal("rewind to the same revision copied")
	}
}

func TestEntryProtobuf(t *testing.T) {
	calls := 0
	var mu sync.Mutex
	e := NewEntry("k", "", "n", 1, nil, nil, []byte("json"), nil, func(j []byte) ([]byte, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return append([]byte("pb:"), j...), nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if b, err := e.Protobuf(); err != nil || string(b) != "pb:json" {
				t.Errorf("Protobuf = %q, %v", b, err)
			}
		})
	}
	wg.Wait()
	if calls != 1 {
		t.Fatalf("encoder called %d times", calls)
	}
	pre := NewEntry("k", "", "n", 1, nil, nil, []byte("json"), []byte("given"), nil)
	if b, err := pre.Protobuf(); err != nil || string(b) != "given" {
		t.Fatalf("precomputed Protobuf = %q, %v", b, err)
	}
	none := NewEntry("k", "", "n", 1, nil, nil, []byte("json"), nil, nil)
	if _, err := none.Protobuf(); !errors.Is(err, errNoProtobuf) {
		t.Fatalf("Protobuf without encoder = %v", err)
	}
}

func TestConcurrentReadersAndWriter(t *testing.T) {
	s := testStore()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				snap := s.Snapshot()
				items, _ := snap.List(nil, ListOptions{Prefix: "/registry/pods/"})
				if len(items) != snap.Len() {
					t.Errorf("snapshot at %d: list %d, len %d", snap.Revision, len(items), snap.Len())
					return
				}
				snap.Rewind(snap.Revision-1, []Change{{Key: "/registry/pods/z/0"}})
			}
		})
	}
	for i := range 2000 {
		rev := int64(100 + i)
		s.Put(pod("z", fmt.Sprint(i%50), rev, nil, ""), rev)
		if i%3 == 0 {
			s.Delete(fmt.Sprintf("/registry/pods/z/%d", (i+7)%50), rev)
		}
	}
	close(done)
	wg.Wait()
}
