package controllers

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/leader"
	"github.com/kgate/kgate/storage/backend"
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
	c, err := New(Config{Identity: "gw-0", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond},
		Deps{Backend: b, Logger: log, Metrics: reg})
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
	c.Close()
	if c.Leading() || testutil.ToFloat64(c.leading) != 0 {
		t.Error("still leading after Close")
	}
	if h := holder(); h != "" {
		t.Errorf("lease holder %q after Close, want released", h)
	}
}
