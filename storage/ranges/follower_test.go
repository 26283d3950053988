package ranges

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage/registry"
)

// without returns a registry of the built-ins minus the resources named.
func without(t *testing.T, names ...string) (*registry.Registry, map[string]registry.Resource) {
	t.Helper()
	scheme, err := registry.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	var keep []registry.Resource
	left := map[string]registry.Resource{}
	for _, r := range registry.Builtin() {
		if r.Group == "" && slices.Contains(names, r.Resource) {
			left[r.Resource] = r
			continue
		}
		keep = append(keep, r)
	}
	reg, err := registry.New(scheme, keep)
	if err != nil {
		t.Fatal(err)
	}
	return reg, left
}

func TestFollower(t *testing.T) {
	reg, left := without(t, "configmaps", "pods")
	f, err := Follow(reg, Config{Splits: map[string][]string{"pods": {"g", "n"}, "events": {"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := f.Current()
	if _, ok := t0.ByID("configmaps"); ok {
		t.Fatal("configmaps range before the resource")
	}
	if _, ok := t0.ByID("pods-0"); ok {
		t.Fatal("pods range before the resource")
	}
	ev0, ok := t0.ByID("events-1")
	if !ok {
		t.Fatalf("events not split: %v", ids(t0.All()))
	}
	if f.Current() != t0 {
		t.Error("Current changed without a registry change")
	}

	changed := f.Changed()
	if err := reg.Add(left["configmaps"], left["pods"]); err != nil {
		t.Fatal(err)
	}
	<-changed
	t1 := f.Current()
	if t1 == t0 {
		t.Fatal("table did not follow Add")
	}
	cm, ok := t1.ByID("configmaps")
	if !ok || cm.Start != "/registry/configmaps/" || cm.Resource.Kind != "ConfigMap" {
		t.Fatalf("configmaps range %+v, %v", cm, ok)
	}
	for _, id := range []string{"pods-0", "pods-1", "pods-2"} {
		if r, ok := t1.ByID(id); !ok || r.Resource.Kind != "Pod" {
			t.Errorf("range %s: %+v, %v", id, r, ok)
		}
	}
	if r, _ := t1.Lookup("/registry/pods/kube-system/x"); r == nil || r.ID != "pods-1" {
		t.Errorf("kube-system pods in %v, want pods-1", r)
	}
	if ev1, _ := t1.ByID("events-1"); ev1 != ev0 {
		t.Error("an unchanged range got a new *Range")
	}
	if got, want := len(t1.All()), len(t0.All())+1+3; got != want {
		t.Errorf("%d ranges, want %d", got, want)
	}
	// The earlier table is unchanged.
	if _, ok := t0.ByID("configmaps"); ok {
		t.Error("Add changed an earlier table")
	}

	changed = f.Changed()
	if err := reg.Remove(schema.GroupVersionResource{Version: "v1", Resource: "pods"}); err != nil {
		t.Fatal(err)
	}
	<-changed
	t2 := f.Current()
	if _, ok := t2.ByID("pods-0"); ok {
		t.Error("pods ranges after Remove")
	}
	if r, _ := t2.ByID("configmaps"); r != cm {
		t.Error("configmaps got a new *Range on an unrelated Remove")
	}
	if r, ok := t2.Lookup("/registry/pods/default/x"); ok {
		t.Errorf("a removed range still holds keys: %v", r.ID)
	}

	// A change that touches no range (a create-only resource) keeps the
	// table.
	tr := registry.Resource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews", Kind: "TokenReview", Verbs: []string{"create"}}
	if err := reg.Remove(tr.GVR()); err != nil {
		t.Fatal(err)
	}
	if f.Current() != t2 {
		t.Error("a change touching no range made a new table")
	}
	if err := f.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
}

func TestFollowBadSplits(t *testing.T) {
	reg := builtin(t)
	if _, err := Follow(reg, Config{Splits: map[string][]string{"pods": {"n", "g"}}}); !errors.Is(err, ErrBadSplits) {
		t.Errorf("keys out of order: %v, want ErrBadSplits", err)
	}
	// A range not (yet) in the table is no error, unlike WithSplits.
	if _, err := Follow(reg, Config{Splits: map[string][]string{"widgets": {"n"}}}); err != nil {
		t.Errorf("split of a future range: %v", err)
	}
}

// TestFollowerIDClash: a change the table cannot follow keeps the ranges
// it had and says why.
func TestFollowerIDClash(t *testing.T) {
	reg, left := without(t, "configmaps", "secrets")
	f, err := Follow(reg, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := f.Current()
	a, b := left["configmaps"], left["secrets"]
	a.Prefix, b.Prefix = "/registry/a.b", "/registry/a_b" // both "a_b"
	if err := reg.Add(a, b); err != nil {
		t.Fatal(err)
	}
	if f.Current() != t0 {
		t.Error("a table with a clash replaced the last good one")
	}
	if f.Err() == nil {
		t.Error("Err is nil after a failed rebuild")
	}
}

func TestFollowerConcurrent(t *testing.T) {
	reg, left := without(t, "configmaps")
	f, err := Follow(reg, DefaultSplits())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				tbl := f.Current()
				pods, ok := tbl.ByID("pods-0")
				if !ok || pods.Resource.Kind != "Pod" {
					t.Error("pods-0 missing")
					return
				}
				if r, ok := tbl.ByID("configmaps"); ok && r.Resource.GVR() != gvr {
					t.Errorf("configmaps range for %v", r.Resource.GVR())
					return
				}
			}
		})
	}
	for range 100 {
		if err := reg.Add(left["configmaps"]); err != nil {
			t.Fatal(err)
		}
		if err := reg.Remove(gvr); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if _, ok := f.Current().ByID("configmaps"); ok {
		t.Error("configmaps range after the last Remove")
	}
}
