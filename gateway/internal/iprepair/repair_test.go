package iprepair

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestRepair: a Service whose cluster IP has no IPAddress gets one at
// once; an IPAddress of the allocator that no Service uses is deleted only
// at the fourth pass; one held for a Service that uses it stays.
func TestRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	b, err := backend.Open(backend.Config{Etcd: storagetest.StartEtcd(t), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	r, err := New(Config{Store: b.Store, Registry: b.Registry, IPs: b.ServiceIPs, Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Three addresses of the range: one for a Service stored without its
	// IPAddress (freed again after allocating), one a Service holds
	// properly, one leaked.
	ip := func(name string) string {
		t.Helper()
		a, err := b.ServiceIPs.Allocate(ctx, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	missing, held, leaked := ip("web"), ip("db"), ip("gone")
	if err := b.ServiceIPs.Release(ctx, missing); err != nil {
		t.Fatal(err)
	}
	for name, addr := range map[string]string{"web": missing, "db": held} {
		if _, err := b.Store.Create(ctx, r.services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: addr, ClusterIPs: []string{addr}, Ports: []corev1.ServicePort{{Port: 80}}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	parentOf := func(addr string) string {
		t.Helper()
		obj, err := b.Store.Get(ctx, r.addresses, "", addr, 0)
		if errors.Is(err, storage.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		ref := obj.(*networkingv1.IPAddress).Spec.ParentRef
		return ref.Namespace + "/" + ref.Name
	}
	for pass := 1; pass <= 3; pass++ {
		if err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if got := parentOf(missing); got != "default/web" {
			t.Fatalf("pass %d: the IPAddress of web's %s names %q", pass, missing, got)
		}
		if got := parentOf(leaked); got != "default/gone" {
			t.Fatalf("pass %d: the leaked %s names %q, want it kept for now", pass, leaked, got)
		}
	}
	if err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if got := parentOf(leaked); got != "" {
		t.Errorf("pass 4: the leaked %s is still held by %q", leaked, got)
	}
	if parentOf(held) != "default/db" || parentOf(missing) != "default/web" {
		t.Errorf("pass 4: the Services' addresses %s %s are no longer theirs", held, missing)
	}
}
