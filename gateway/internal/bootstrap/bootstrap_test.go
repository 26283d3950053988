package bootstrap

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestEnsureIsIdempotent(t *testing.T) {
	cli := storagetest.StartEtcd(t)
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	store, err := storage.New(storage.Config{Client: cli, Registry: reg, Codec: codec.New(reg.Scheme()), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := Ensure(ctx, store, reg, newSemantics(t)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	res, _ := reg.Lookup(corev1.SchemeGroupVersion.WithResource("namespaces"))
	for _, name := range SystemNamespaces {
		obj, err := store.Get(ctx, res, "", name, 0)
		if err != nil {
			t.Fatalf("namespace %s: %v", name, err)
		}
		ns := obj.(*corev1.Namespace)
		if ns.Status.Phase != corev1.NamespaceActive || len(ns.Spec.Finalizers) != 1 || ns.UID == "" {
			t.Errorf("namespace %s not created as kube-apiserver does: %+v", name, ns)
		}
		sa, _ := reg.Lookup(corev1.SchemeGroupVersion.WithResource("serviceaccounts"))
		if _, err := store.Get(ctx, sa, name, DefaultServiceAccount, 0); err != nil {
			t.Errorf("default service account of %s: %v", name, err)
		}
	}
	pcs, _ := reg.Lookup(schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"))
	for _, want := range schedulingapiv1.SystemPriorityClasses() {
		obj, err := store.Get(ctx, pcs, "", want.Name, 0)
		if err != nil {
			t.Fatalf("priorityclass %s: %v", want.Name, err)
		}
		if got := obj.(*schedulingv1.PriorityClass); got.Value != want.Value || got.Description != want.Description || got.PreemptionPolicy == nil {
			t.Errorf("priorityclass %s stored as %+v, want value %d, upstream's description and a defaulted preemptionPolicy", want.Name, got, want.Value)
		}
	}
	roles, _ := reg.Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	bindings, _ := reg.Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"))
	for _, r := range rbacbootstrap.Roles() {
		obj, err := store.Get(ctx, roles, "", r.Name, 0)
		if err != nil {
			t.Fatalf("clusterrole %s: %v", r.Name, err)
		}
		if got := obj.(*rbacv1.ClusterRole); !equality.Semantic.DeepEqual(got.Rules, r.Rules) || got.Annotations[rbacbootstrap.AutoUpdateAnnotation] != "true" {
			t.Errorf("clusterrole %s stored as %+v", r.Name, got)
		}
	}
	for _, b := range rbacbootstrap.Bindings() {
		if _, err := store.Get(ctx, bindings, "", b.Name, 0); err != nil {
			t.Errorf("clusterrolebinding %s: %v", b.Name, err)
		}
	}
}

// TestEnsureKeepsChanges: a default changed by its owner is left alone
// (kgate does not reconcile defaults; see the package doc).
func TestEnsureKeepsChanges(t *testing.T) {
	cli := storagetest.StartEtcd(t)
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	store, err := storage.New(storage.Config{Client: cli, Registry: reg, Codec: codec.New(reg.Scheme()), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Ensure(ctx, store, reg, newSemantics(t)); err != nil {
		t.Fatal(err)
	}
	roles, _ := reg.Lookup(rbacv1.SchemeGroupVersion.WithResource("clusterroles"))
	if _, err := store.Update(ctx, roles, "", "view", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		r := cur.(*rbacv1.ClusterRole).DeepCopy()
		r.Labels = map[string]string{"changed": "yes"}
		return r, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, store, reg, newSemantics(t)); err != nil {
		t.Fatal(err)
	}
	obj, err := store.Get(ctx, roles, "", "view", 0)
	if err != nil {
		t.Fatal(err)
	}
	if obj.(*rbacv1.ClusterRole).Labels["changed"] != "yes" {
		t.Error("Ensure overwrote a changed default")
	}
}

func newSemantics(t *testing.T) *builtin.Semantics {
	t.Helper()
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	return sem
}
