package apiserverid

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestName(t *testing.T) {
	a, b, c := Name("host", ""), Name("host", "127.0.0.1:6443"), Name("host", "127.0.0.1:6444")
	for _, n := range []string{a, b, c} {
		if !strings.HasPrefix(n, "apiserver-") || len(n) != len("apiserver-")+26 || n != strings.ToLower(n) {
			t.Errorf("Name = %q, want apiserver- and 26 lower-case base32 characters", n)
		}
	}
	if a == b || b == c {
		t.Errorf("names not distinct per advertised address: %q %q %q", a, b, c)
	}
	if Name("host", "x") != Name("host", "x") || Name("host", "") == Name("other", "") {
		t.Error("Name is not a function of hostname and address")
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
	if _, err := NewGC(GCConfig{}); err == nil {
		t.Error("NewGC accepted an empty config")
	}
}

func openBackend(t *testing.T) *backend.Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd")
	}
	b, err := backend.Open(backend.Config{Etcd: storagetest.StartEtcd(t), Logger: storagetest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// TestKeeper: the Lease is created as upstream's, then renewed with the
// holder identity kept.
func TestKeeper(t *testing.T) {
	b := openBackend(t)
	k, err := New(Config{Store: b.Store, Registry: b.Registry, Logger: storagetest.Logger(t), Hostname: "gw-0", Advertise: "127.0.0.1:6443", RenewInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { k.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	res, _ := b.Registry.Lookup(coordinationv1.SchemeGroupVersion.WithResource("leases"))
	get := func() (*coordinationv1.Lease, error) {
		obj, err := b.Store.Get(ctx, res, Namespace, k.Name(), 0)
		if err != nil {
			return nil, err
		}
		return obj.(*coordinationv1.Lease), nil
	}
	var first *coordinationv1.Lease
	storagetest.Eventually(t, 10*time.Second, "the identity lease", func() (err error) {
		first, err = get()
		return err
	})
	if first.Labels[LabelKey] != Component || first.Labels[corev1.LabelHostname] != "gw-0" {
		t.Errorf("labels %v", first.Labels)
	}
	if h := first.Spec.HolderIdentity; h == nil || !strings.HasPrefix(*h, k.Name()+"_") {
		t.Errorf("holderIdentity %v, want %s_<uuid>", h, k.Name())
	}
	if d := first.Spec.LeaseDurationSeconds; d == nil || *d != 3600 {
		t.Errorf("leaseDurationSeconds %v, want 3600", d)
	}
	storagetest.Eventually(t, 10*time.Second, "a renewal", func() error {
		l, err := get()
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return errors.New("renewTime unchanged")
		}
		if *l.Spec.HolderIdentity != *first.Spec.HolderIdentity {
			t.Errorf("holderIdentity changed on renewal: %s", *l.Spec.HolderIdentity)
		}
		return nil
	})
}

// TestGC: expired identity Leases (and ones missing renewTime) go, live
// ones and Leases that are not identity Leases stay.
func TestGC(t *testing.T) {
	b := openBackend(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	gc, err := NewGC(GCConfig{Store: b.Store, Registry: b.Registry, Logger: storagetest.Logger(t), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := b.Registry.Lookup(coordinationv1.SchemeGroupVersion.WithResource("leases"))
	hour := int32(3600)
	lease := func(name string, labels map[string]string, renewed *time.Time) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: labels}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &hour}}
		if renewed != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *renewed}
		}
		if _, err := b.Store.Create(context.Background(), res, l); err != nil {
			t.Fatal(err)
		}
	}
	id := map[string]string{LabelKey: Component}
	old, fresh := now.Add(-61*time.Minute), now.Add(-59*time.Minute)
	lease("expired", id, &old)
	lease("no-renew-time", id, nil)
	lease("live", id, &fresh)
	lease("kgate-controllers", nil, &old)
	lease("other-component", map[string]string{LabelKey: "sample-apiserver"}, &old)
	got, err := gc.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "expired,no-renew-time" {
		t.Errorf("collected %v, want [expired no-renew-time]", got)
	}
	for _, name := range []string{"live", "kgate-controllers", "other-component"} {
		if _, err := b.Store.Get(context.Background(), res, Namespace, name, 0); err != nil {
			t.Errorf("lease %s: %v", name, err)
		}
	}
	if _, err := b.Store.Get(context.Background(), res, Namespace, "expired", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("expired lease still there: %v", err)
	}
}
