package feedinformers

import (
	"fmt"
	"slices"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

var fsGVR = flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas")

func kinds(obj runtime.Object) (schema.GroupVersionResource, error) {
	if _, ok := obj.(*flowcontrolv1.FlowSchema); ok {
		return fsGVR, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("no resource for %T", obj)
}

func fs(name, rv string) *flowcontrolv1.FlowSchema {
	return &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// recorder notes each event as "add a 2 initial", "update a 2→3",
// "delete b".
type recorder struct{ events []string }

func (r *recorder) OnAdd(obj any, initial bool) {
	o := obj.(*flowcontrolv1.FlowSchema)
	e := "add " + o.Name + " " + o.ResourceVersion
	if initial {
		e += " initial"
	}
	r.events = append(r.events, e)
}

func (r *recorder) OnUpdate(old, obj any) {
	r.events = append(r.events, fmt.Sprintf("update %s %s→%s", obj.(*flowcontrolv1.FlowSchema).Name, old.(*flowcontrolv1.FlowSchema).ResourceVersion, obj.(*flowcontrolv1.FlowSchema).ResourceVersion))
}

func (r *recorder) OnDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		r.events = append(r.events, "delete "+d.Key+" (relist)")
		return
	}
	r.events = append(r.events, "delete "+obj.(*flowcontrolv1.FlowSchema).Name)
}

func (r *recorder) take() []string {
	e := r.events
	r.events = nil
	return e
}

// TestEventHandlers: handlers see the feed's lists and changes as a
// client-go informer's see its reflector's: the first list as the
// initial adds, then upserts and deletes, and a relist as the adds,
// updates (a new resourceVersion) and deletes it implies.
func TestEventHandlers(t *testing.T) {
	f := NewFactory(kinds)
	inf := f.Flowcontrol().V1().FlowSchemas().Informer()
	sinks, err := f.Sinks()
	if err != nil {
		t.Fatal(err)
	}
	sink := sinks[fsGVR]
	if sink == nil || len(sinks) != 1 {
		t.Fatalf("sinks %v", sinks)
	}
	early := &recorder{}
	reg, err := inf.AddEventHandler(early)
	if err != nil {
		t.Fatal(err)
	}
	if inf.HasSynced() || reg.HasSynced() {
		t.Fatal("synced before the first list")
	}
	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{"first list", func() error { sink.Replace([]runtime.Object{fs("a", "1"), fs("b", "2")}); return nil }, []string{"add a 1 initial", "add b 2 initial"}},
		{"update", func() error { return sink.Upsert(fs("a", "3")) }, []string{"update a 1→3"}},
		{"add", func() error { return sink.Upsert(fs("c", "4")) }, []string{"add c 4"}},
		{"delete", func() error { return sink.Delete(fs("b", "2")) }, []string{"delete b"}},
		{"relist", func() error {
			sink.Replace([]runtime.Object{fs("a", "5"), fs("d", "6")})
			return nil
		}, []string{"update a 3→5", "add d 6", "delete c (relist)"}},
		{"relist, nothing changed", func() error { sink.Replace([]runtime.Object{fs("a", "5"), fs("d", "6")}); return nil }, nil},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := early.take(); !slices.Equal(got, s.want) {
			t.Fatalf("%s: events %q, want %q", s.name, got, s.want)
		}
	}
	if !inf.HasSynced() || !reg.HasSynced() {
		t.Fatal("not synced after the first list")
	}
	// A handler added later sees what is held, not as the initial list.
	late := &recorder{}
	lateReg, err := inf.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	got := late.take()
	slices.Sort(got)
	if want := []string{"add a 5", "add d 6"}; !slices.Equal(got, want) {
		t.Fatalf("late handler: %q, want %q", got, want)
	}
	if err := inf.RemoveEventHandler(lateReg); err != nil {
		t.Fatal(err)
	}
	if err := sink.Upsert(fs("a", "7")); err != nil {
		t.Fatal(err)
	}
	if got := late.take(); got != nil {
		t.Fatalf("removed handler saw %q", got)
	}
	if got := early.take(); !slices.Equal(got, []string{"update a 5→7"}) {
		t.Fatalf("events %q", got)
	}
	lister := f.Flowcontrol().V1().FlowSchemas().Lister()
	if a, err := lister.Get("a"); err != nil || a.ResourceVersion != "7" {
		t.Fatalf("lister: %v, %v", a, err)
	}
}

// TestUnknownType: a type with no resource fails Sinks, so the caller
// cannot feed an informer it does not know.
func TestUnknownType(t *testing.T) {
	f := NewFactory(kinds)
	f.Core().V1().Pods().Informer()
	if _, err := f.Sinks(); err == nil {
		t.Fatal("Sinks accepted an informer of Pods, which kinds does not name")
	}
}
