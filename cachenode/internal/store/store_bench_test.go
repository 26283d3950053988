package store

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// benchStore holds 10k pods in 10 namespaces; one in ten has app=db.
func benchStore() *Store {
	json := make([]byte, 4700)
	var es []*Entry
	for i := range 10000 {
		ns := fmt.Sprintf("ns-%d", i%10)
		name := fmt.Sprintf("pod-%05d", i)
		app := "web"
		if i%10 == 3 {
			app = "db"
		}
		es = append(es, NewEntry("/registry/pods/"+ns+"/"+name, ns, name, int64(i+1),
			labels.Set{"app": app, "tier": "backend"},
			fields.Set{"metadata.name": name, "metadata.namespace": ns, "status.phase": "Running"}, json, nil, nil))
	}
	return Load(es, 10001)
}

func BenchmarkStoreGet(b *testing.B) {
	snap := benchStore().Snapshot()
	key := "/registry/pods/ns-7/pod-04567"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := snap.Get(key); !ok {
			b.Fatal("missing")
		}
	}
}

func benchList(b *testing.B, sel labels.Selector, prefix string) {
	snap := benchStore().Snapshot()
	dst := make([]*Entry, 0, 500)
	b.ReportAllocs()
	for b.Loop() {
		after, pages := "", 0
		for {
			var res ListResult
			dst, res = snap.List(dst[:0], ListOptions{Prefix: prefix, After: after, Limit: 500, Label: sel})
			pages++
			if !res.More {
				break
			}
			after = dst[len(dst)-1].Key
		}
		if pages == 0 {
			b.Fatal("no pages")
		}
	}
}

// BenchmarkStoreList lists all 10k pods in pages of 500 (20 pages per op).
func BenchmarkStoreList(b *testing.B) { benchList(b, nil, "/registry/pods/") }

// BenchmarkStoreListLabel lists the 1k pods with app=db in pages of 500
// (2 pages per op, each scanning the range).
func BenchmarkStoreListLabel(b *testing.B) {
	sel, err := labels.Parse("app=db")
	if err != nil {
		b.Fatal(err)
	}
	benchList(b, sel, "/registry/pods/")
}

// BenchmarkStoreListPage is one page of 500 (no selector).
func BenchmarkStoreListPage(b *testing.B) {
	snap := benchStore().Snapshot()
	dst := make([]*Entry, 0, 500)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = snap.List(dst[:0], ListOptions{Prefix: "/registry/pods/", After: "/registry/pods/ns-5/pod-00005", Limit: 500})
	}
}

func BenchmarkStoreSnapshotAfterWrite(b *testing.B) {
	s := benchStore()
	e := NewEntry("/registry/pods/ns-1/pod-00001", "ns-1", "pod-00001", 1, nil, nil, nil, nil, nil)
	rev := int64(20000)
	b.ReportAllocs()
	for b.Loop() {
		rev++
		s.Put(e, rev)
		_ = s.Snapshot()
	}
}
