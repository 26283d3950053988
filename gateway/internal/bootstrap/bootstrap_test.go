package bootstrap

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
		if err := Ensure(ctx, store, reg); err != nil {
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
	}
}
