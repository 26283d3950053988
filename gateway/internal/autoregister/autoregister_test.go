package autoregister

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"

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

func TestManagedLabelIsUpstreams(t *testing.T) {
	if managedLabel != autoregister.AutoRegisterManagedLabel {
		t.Errorf("managedLabel %q, upstream's %q", managedLabel, autoregister.AutoRegisterManagedLabel)
	}
}

// widgets is a custom resource of example.com/v1, as the CRD follower
// registers an established CRD.
func widgets(version string) registry.Resource {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"}}
	return registry.Resource{Group: "example.com", Version: version, Resource: "widgets", Kind: "Widget", Singular: "widget",
		Namespaced: true, Prefix: "/registry/example.com/widgets", CRD: crd}
}

func TestDesired(t *testing.T) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(widgets("v1"), widgets("v2")); err != nil {
		t.Fatal(err)
	}
	got := Desired(reg.Snapshot())
	f := func(name, group, version string, gp, vp int32, manage string) {
		t.Helper()
		s, ok := got[name]
		if !ok {
			t.Errorf("no APIService %s", name)
			return
		}
		if s.Spec.Group != group || s.Spec.Version != version || s.Spec.GroupPriorityMinimum != gp || s.Spec.VersionPriority != vp || s.Spec.Service != nil {
			t.Errorf("%s: spec %+v", name, s.Spec)
		}
		if s.Labels[managedLabel] != manage {
			t.Errorf("%s: labels %v, want %s=%s", name, s.Labels, managedLabel, manage)
		}
	}
	f("v1.", "", "v1", 18000, 1, manageOnStart)
	f("v1.apps", "apps", "v1", 17800, 15, manageOnStart)
	f("v2.autoscaling", "autoscaling", "v2", 17500, 30, manageOnStart)
	if _, ok := got["v1.apiregistration.k8s.io"]; ok {
		t.Error("v1.apiregistration.k8s.io desired: kube-apiserver's aggregator serves that group itself, in no priority table, with no APIService")
	}
	f("v1.example.com", "example.com", "v1", 1000, 100, manageContinuously)
	f("v2.example.com", "example.com", "v2", 1000, 100, manageContinuously)
	// Every other served group/version has one.
	for _, gv := range reg.Groups() {
		for _, v := range gv.Versions {
			if gv.Group == "apiregistration.k8s.io" {
				continue
			}
			if _, ok := got[v+"."+gv.Group]; !ok {
				t.Errorf("served %s/%s has no APIService", gv.Group, v)
			}
		}
	}
}

// TestController runs the controller on real etcd: the local APIServices
// are created and Available (Local), a managed one whose spec was changed
// is put back on a fresh start, a user's local APIService is made
// Available and kept, a CRD group/version gets one that goes with it.
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
	c, err := New(Config{Store: b.Store, Etcd: b.Etcd, Registry: b.Registry, Logger: log, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	get := func(name string) *apiregistrationv1.APIService {
		t.Helper()
		obj, err := b.Store.Get(ctx, c.res, "", name, 0)
		if err != nil {
			return nil
		}
		return obj.(*apiregistrationv1.APIService)
	}
	available := func(name string) bool {
		s := get(name)
		if s == nil {
			return false
		}
		cond := helper.GetAPIServiceConditionByType(s, apiregistrationv1.Available)
		return cond != nil && cond.Status == apiregistrationv1.ConditionTrue && cond.Reason == "Local"
	}

	eventually := func(what string, ok func() bool) {
		t.Helper()
		storagetest.Eventually(t, 20*time.Second, what, func() error {
			if ok() {
				return nil
			}
			return errors.New("not yet")
		})
	}

	// A stale managed one, and a user's local one, before the start.
	stale := Desired(b.Registry.Snapshot())["v1.apps"].DeepCopy()
	stale.Spec.GroupPriorityMinimum = 5
	if _, err := b.Store.Create(ctx, c.res, stale); err != nil {
		t.Fatal(err)
	}
	user := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.mine.example.org"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "mine.example.org", Version: "v1", GroupPriorityMinimum: 10, VersionPriority: 10}}
	if _, err := b.Store.Create(ctx, c.res, user); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.Run(rctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	for name := range Desired(b.Registry.Snapshot()) {
		eventually("APIService "+name+" Available (Local)", func() bool { return available(name) })
	}
	if got := get("v1.apps"); got.Spec.GroupPriorityMinimum != 17800 {
		t.Errorf("v1.apps: groupPriorityMinimum %d after a fresh start, want upstream's 17800", got.Spec.GroupPriorityMinimum)
	}
	eventually("the user's local APIService Available", func() bool { return available("v1.mine.example.org") })

	// A deleted built-in one comes back.
	if _, _, err := b.Store.Delete(ctx, c.res, "", "v1.batch", storage.Preconditions{}, func(runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		return nil, storage.DeleteRemove, nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually("v1.batch back", func() bool { return available("v1.batch") })

	// A CRD group/version comes and goes.
	if err := b.Registry.Add(widgets("v1")); err != nil {
		t.Fatal(err)
	}
	eventually("v1.example.com registered for the CRD", func() bool {
		s := get("v1.example.com")
		return s != nil && s.Labels[managedLabel] == manageContinuously && available("v1.example.com")
	})
	if err := b.Registry.Remove(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); err != nil {
		t.Fatal(err)
	}
	eventually("v1.example.com gone with the CRD", func() bool { return get("v1.example.com") == nil })
	if get("v1.mine.example.org") == nil {
		t.Error("the user's APIService was deleted")
	}
}
