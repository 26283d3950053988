package crdcontroller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// TestController runs the controller on real etcd: a CRD gets its names
// and is established, a second one asking for a kind the first has is
// refused, deleting the first removes its objects as clients' deletes
// would (one with a finalizer is marked and waited for) and then it, and
// the kind it freed goes to the second.
func TestController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	storagetest.CheckGoroutines(t)
	cli := storagetest.StartEtcd(t)
	log := storagetest.Logger(t)
	b, err := backend.Open(backend.Config{Etcd: cli, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Deleter: sem, Logger: log, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	res := c.res
	create := func(crd *apiextensionsv1.CustomResourceDefinition) {
		t.Helper()
		if _, err := b.Store.Create(t.Context(), res, crd); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
		obj, err := b.Store.Get(t.Context(), res, "", name, 0)
		if err != nil {
			return nil, err
		}
		return obj.(*apiextensionsv1.CustomResourceDefinition), nil
	}
	condition := func(name string, typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus, reason string) func() error {
		return func() error {
			crd, err := get(name)
			if err != nil {
				return err
			}
			got := apiextensionshelpers.FindCRDCondition(crd, typ)
			if got == nil || got.Status != status || got.Reason != reason {
				return fmt.Errorf("%s %s is %+v, want %s %s", name, typ, got, status, reason)
			}
			return nil
		}
	}

	create(crdNamed("example.com", "widgets", "Widget", "wd"))
	storagetest.Eventually(t, 10*time.Second, "widgets established", condition("widgets.example.com", apiextensionsv1.Established, "True", "InitialNamesAccepted"))
	if err := condition("widgets.example.com", apiextensionsv1.NamesAccepted, "True", "NoConflicts")(); err != nil {
		t.Error(err)
	}
	w, err := get("widgets.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.AcceptedNames.Plural != "widgets" || len(w.Status.AcceptedNames.ShortNames) != 1 || len(w.Status.StoredVersions) != 1 {
		t.Errorf("status %+v", w.Status)
	}

	// A second CRD of the group asking for the kind Widget.
	create(crdNamed("example.com", "gizmos", "Widget"))
	storagetest.Eventually(t, 10*time.Second, "gizmos refused", condition("gizmos.example.com", apiextensionsv1.NamesAccepted, "False", "ListKindConflict"))
	if err := condition("gizmos.example.com", apiextensionsv1.Established, "False", "NotAccepted")(); err != nil {
		t.Error(err)
	}

	// Objects of widgets in two namespaces, one with a finalizer; an
	// object of another resource whose prefix starts alike stays.
	var widgets *registry.Resource
	storagetest.Eventually(t, 10*time.Second, "widgets served", func() error {
		var ok bool
		if widgets, ok = b.Registry.Lookup(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); !ok {
			return errors.New("not in the registry")
		}
		return nil
	})
	for _, w := range []struct{ ns, name, finalizer string }{{"ns1", "a", ""}, {"ns2", "b", "example.com/cleanup"}} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": w.name, "namespace": w.ns, "generation": int64(1)}}}
		if w.finalizer != "" {
			u.SetFinalizers([]string{w.finalizer})
		}
		if _, err := b.Store.Create(t.Context(), widgets, u); err != nil {
			t.Fatal(err)
		}
	}
	// Stored objects whose metadata does not match their key, or that
	// do not decode at all, go by their key.
	for k, v := range map[string]string{
		"/registry/example.com/widgets/ns3/raw":     `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"other"}}`,
		"/registry/example.com/widgets/ns3/garbage": `not json`,
	} {
		if _, err := cli.Put(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	keep := "/registry/example.com/widgetsextra/ns1/c"
	if _, err := cli.Put(t.Context(), keep, `{}`); err != nil {
		t.Fatal(err)
	}
	// The first delete marks the CRD (upstream's REST.Delete through
	// builtin: finalizer, Terminating); the controller deletes the
	// objects as a client's delete would: a, with no finalizer, goes; b
	// is marked and waited for, with the CRD.
	obj, deleted, err := b.Store.Delete(t.Context(), res, "", "widgets.example.com", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		return sem.Delete(t.Context(), res, cur, &metav1.DeleteOptions{})
	})
	if err != nil || deleted {
		t.Fatalf("delete: deleted %v, %v; want marked for deletion", deleted, err)
	}
	if !apiextensionshelpers.CRDHasFinalizer(obj.(*apiextensionsv1.CustomResourceDefinition), apiextensionsv1.CustomResourceCleanupFinalizer) {
		t.Error("the first delete did not add the cleanup finalizer")
	}
	storagetest.Eventually(t, 10*time.Second, "the cleanup waiting for b's finalizer",
		condition("widgets.example.com", apiextensionsv1.Terminating, "True", "InstanceDeletionCheck"))
	if _, err := b.Store.Get(t.Context(), widgets, "ns1", "a", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a, without finalizers: %v, want removed", err)
	}
	bObj, err := b.Store.Get(t.Context(), widgets, "ns2", "b", 0)
	if err != nil {
		t.Fatalf("b, with a finalizer: %v, want kept until its finalizer goes", err)
	}
	if m := bObj.(*unstructured.Unstructured); m.GetDeletionTimestamp() == nil || m.GetGeneration() != 2 {
		t.Errorf("b: deletionTimestamp %v, generation %d; want marked for deletion, generation 2", m.GetDeletionTimestamp(), m.GetGeneration())
	}
	// Its controller lets b go: then the CRD goes.
	if _, err := b.Store.Update(t.Context(), widgets, "ns2", "b", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*unstructured.Unstructured).SetFinalizers(nil)
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	storagetest.Eventually(t, 20*time.Second, "widgets removed", func() error {
		if _, err := get("widgets.example.com"); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("get: %v, want not found", err)
		}
		return nil
	})
	resp, err := cli.Get(t.Context(), "/registry/example.com/widgets/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d objects of widgets left after its CRD was deleted", resp.Count)
	}
	if resp, err := cli.Get(t.Context(), keep); err != nil || resp.Count != 1 {
		t.Errorf("the object of widgetsextra is gone (%v)", err)
	}
	// The kind widgets had is free now.
	storagetest.Eventually(t, 10*time.Second, "gizmos accepted", condition("gizmos.example.com", apiextensionsv1.Established, "True", "InitialNamesAccepted"))
}
