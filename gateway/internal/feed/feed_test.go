package feed

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/event"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// The nop dependencies stand in for a feed that is never started.
type (
	nopLister    struct{}
	nopWatcher   struct{}
	nopRevisions struct{}
)

func (nopLister) List(context.Context, string, client.ListOptions) (*client.List, error) {
	return nil, errors.New("no cache")
}

func (nopWatcher) WatchRanges([]string, int64, watchhub.Filter) (watchhub.Stream, error) {
	return nil, errors.New("no hub")
}

func (nopRevisions) Current(context.Context) (int64, error) { return 0, errors.New("no etcd") }

// builtin is the built-in registry and its default range table.
func builtin(t *testing.T) (*registry.Registry, *ranges.Table) {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	table, err := ranges.Default(reg)
	if err != nil {
		t.Fatal(err)
	}
	return reg, table
}

// TestNewSinks: each resource has exactly one sink, a Store of
// Resources or one of Sinks; with none the feed is synced at once.
func TestNewSinks(t *testing.T) {
	reg, table := builtin(t)
	quotas := corev1.SchemeGroupVersion.WithResource("resourcequotas")
	cfg := func(c Config) Config {
		c.Registry, c.Ranges, c.Codec, c.Logger = reg, table, codec.New(reg.Scheme()), storagetest.Logger(t)
		c.Cache, c.Hub, c.Revisions = nopLister{}, nopWatcher{}, nopRevisions{}
		return c
	}
	f, err := New(cfg(Config{}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Synced() || f.Ready(t.Context()) != nil {
		t.Error("a feed of nothing is not synced")
	}
	f, err = New(cfg(Config{Resources: []schema.GroupVersionResource{quotas}}))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Store(quotas) == nil || f.Synced() || f.Ready(t.Context()) == nil {
		t.Error("a store feed has no store or is synced before its list")
	}
	if _, err := New(cfg(Config{Resources: []schema.GroupVersionResource{quotas}, Sinks: map[schema.GroupVersionResource]Sink{quotas: NewStore()}})); err == nil {
		t.Error("two sinks for one resource accepted")
	}
	if _, err := New(cfg(Config{Sinks: map[schema.GroupVersionResource]Sink{quotas: nil}})); err == nil {
		t.Error("nil sink accepted")
	}
	if _, err := New(cfg(Config{Resources: []schema.GroupVersionResource{{Group: "no.such", Version: "v1", Resource: "things"}}})); err == nil {
		t.Error("unregistered resource accepted")
	}
}

// TestStore: the Sink the admission plugins read.
func TestStore(t *testing.T) {
	q := func(ns, name string) runtime.Object {
		return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	names := func(objs []runtime.Object) (out []string) {
		for _, o := range objs {
			m := o.(*corev1.ResourceQuota)
			out = append(out, m.Namespace+"/"+m.Name)
		}
		return out
	}
	s := NewStore(q("b", "x"), q("a", "y"), q("a", "x"))
	if got := names(s.List("")); len(got) != 3 || got[0] != "a/x" || got[1] != "a/y" || got[2] != "b/x" {
		t.Errorf("List(\"\") = %v", got)
	}
	gen := s.Generation()
	if err := s.Upsert(q("b", "y")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(q("a", "x")); err != nil {
		t.Fatal(err)
	}
	if got := names(s.List("b")); len(got) != 2 || got[0] != "b/x" || got[1] != "b/y" {
		t.Errorf("List(b) = %v", got)
	}
	if s.Generation() == gen {
		t.Error("generation unchanged by changes")
	}
	if err := s.Upsert(&runtime.Unknown{}); err == nil {
		t.Error("object without metadata accepted")
	}
	s.Replace([]runtime.Object{q("c", "z")})
	if got := names(s.List("")); len(got) != 1 || got[0] != "c/z" {
		t.Errorf("after Replace: %v", got)
	}
}

// skipper counts what the feed hands it and skips as told.
type skipper struct {
	skip             bool
	upserts, deletes int
}

func (s *skipper) Replace([]runtime.Object)    {}
func (s *skipper) Upsert(runtime.Object) error { s.upserts++; return nil }
func (s *skipper) Delete(runtime.Object) error { s.deletes++; return nil }
func (s *skipper) Skip(namespace, name string, _ []byte) bool {
	return s.skip && namespace == "ns" && name == "p"
}

// TestSkipper: a change a Skipper skips is neither decoded nor upserted;
// a delete is never offered to Skip.
func TestSkipper(t *testing.T) {
	reg, table := builtin(t)
	sink := &skipper{}
	f, err := New(Config{
		Registry: reg, Ranges: table, Codec: codec.New(reg.Scheme()), Logger: storagetest.Logger(t),
		Cache: nopLister{}, Hub: nopWatcher{}, Revisions: nopRevisions{},
		Sinks: map[schema.GroupVersionResource]Sink{corev1.SchemeGroupVersion.WithResource("pods"): sink},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"ns","name":"p"}}`)
	deliver := func(typ watchhub.Type, object []byte) error {
		return f.apply(f.sources[0], watchhub.Delivery{Type: typ, Event: &watchhub.Shared{Event: event.Event{Namespace: "ns", Name: "p", Object: object}}})
	}
	sink.skip = true
	if err := deliver(watchhub.Modified, []byte(`not JSON: never decoded`)); err != nil || sink.upserts != 0 {
		t.Fatalf("skipped change: %v, %d upserts", err, sink.upserts)
	}
	if err := deliver(watchhub.Deleted, pod); err != nil || sink.deletes != 1 {
		t.Fatalf("delete: %v, %d deletes", err, sink.deletes)
	}
	sink.skip = false
	if err := deliver(watchhub.Modified, pod); err != nil || sink.upserts != 1 {
		t.Fatalf("change not skipped: %v, %d upserts", err, sink.upserts)
	}
	if err := deliver(watchhub.Modified, []byte(`not JSON`)); err == nil {
		t.Fatal("a change not skipped was not decoded")
	}
}
