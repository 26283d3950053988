package storage_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kgate/kgate/storage"
)

// The store counts its etcd operations under kube-apiserver's names and
// labels; answers (already exists, not found) are not etcd errors.
func TestStoreMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, func(c *storage.Config) { c.Metrics = reg })
	ctx := context.Background()
	cms := e.configMaps()
	e.create(cms, configMap("a", "x", nil))
	if _, err := e.store.Create(ctx, cms, configMap("a", "x", nil)); !errors.Is(err, storage.ErrAlreadyExists) {
		t.Fatalf("second create = %v", err)
	}
	if _, err := e.store.Get(ctx, cms, "a", "missing", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get missing = %v", err)
	}
	if _, err := e.store.List(ctx, cms, "a", storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.store.Get(cancelled, cms, "a", "x", 0); err == nil {
		t.Fatal("a get with a cancelled context succeeded")
	}
	for _, c := range []struct {
		metric, op string
		want       float64
	}{
		{"etcd_requests_total", "create", 2},
		{"etcd_requests_total", "get", 2},
		{"etcd_requests_total", "list", 1},
		{"etcd_request_errors_total", "create", 0},
		{"etcd_request_errors_total", "get", 1},
	} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, mf := range mfs {
			if mf.GetName() != c.metric {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["operation"] == c.op && labels["group"] == "" && labels["resource"] == "configmaps" {
					got = m.GetCounter().GetValue()
				}
			}
		}
		if got != c.want {
			t.Errorf("%s{operation=%q,resource=configmaps} = %v, want %v", c.metric, c.op, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(reg, "etcd_request_duration_seconds"); n != 3 {
		t.Errorf("%d etcd_request_duration_seconds series, want 3 (create, get, list)", n)
	}
	// etcd's database size, as kube-apiserver reports it.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	size := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "apiserver_storage_size_bytes" && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if l := m.GetLabel(); len(l) == 1 && l[0].GetName() == "storage_cluster_id" && l[0].GetValue() == "etcd-0" {
				size = m.GetGauge().GetValue()
			}
		}
	}
	if size <= 0 {
		t.Errorf("apiserver_storage_size_bytes{storage_cluster_id=\"etcd-0\"} = %v, want etcd's database size", size)
	}
}
