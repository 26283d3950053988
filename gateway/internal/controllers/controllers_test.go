package controllers

import (
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/leader"
	"github.com/kgate/kgate/storage/backend"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Error("New accepted no dependencies")
	}
}

// TestLeadAlone: the only candidate leads (kgate_controllers_leading 1,
// the Lease names it) and on Close stops leading and releases the Lease.
func TestLeadAlone(t *testing.T) {
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
	reg := prometheus.NewRegistry()
	sem, err := builtin.New(registry.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	self := func() (netip.Addr, int, bool) { return netip.MustParseAddr("127.0.0.1"), 6443, true }
	c, err := New(Config{Identity: "gw-0", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond, Self: self},
		Deps{Backend: b, Semantics: sem, Logger: log, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	storagetest.Eventually(t, 10*time.Second, "the only candidate leads", storagetest.Holds(c.Leading))
	if v := testutil.ToFloat64(c.leading); v != 1 {
		t.Errorf("kgate_controllers_leading %v while leading, want 1", v)
	}
	leases, _ := b.Registry.Lookup(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"})
	holder := func() string {
		obj, err := b.Store.Get(t.Context(), leases, leader.DefaultNamespace, leader.DefaultName, 0)
		if err != nil {
			t.Fatal(err)
		}
		h := obj.(*coordinationv1.Lease).Spec.HolderIdentity
		if h == nil {
			return ""
		}
		return *h
	}
	if h := holder(); h != "gw-0" {
		t.Errorf("lease holder %q, want gw-0", h)
	}
	// The leader runs the registered controllers: each leaves its object.
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{
		{corev1.SchemeGroupVersion.WithResource("services"), "default", "kubernetes"},
		{corev1.SchemeGroupVersion.WithResource("endpoints"), "default", "kubernetes"},
		{discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "default", "kubernetes"},
		{corev1.SchemeGroupVersion.WithResource("configmaps"), "kube-system", "extension-apiserver-authentication"},
		{flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas"), "", "catch-all"},
	} {
		res, _ := b.Registry.Lookup(o.gvr)
		storagetest.Eventually(t, 20*time.Second, o.gvr.Resource+" "+o.name, func() error {
			_, err := b.Store.Get(t.Context(), res, o.ns, o.name, 0)
			return err
		})
	}
	c.Close()
	if c.Leading() || testutil.ToFloat64(c.leading) != 0 {
		t.Error("still leading after Close")
	}
	if h := holder(); h != "" {
		t.Errorf("lease holder %q after Close, want released", h)
	}
}
