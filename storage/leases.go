package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The lease sharing of upstream's etcd3 lease manager
// (k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go, unexported there):
// objects written within a short window share one lease, granted a little
// longer than the TTL so that each of them lives at least the TTL.
const (
	leaseReuseSeconds   = 60   // defaultLeaseReuseDurationSeconds
	leaseReusePercent   = 0.05 // of the TTL, when smaller than leaseReuseSeconds
	leaseMaxObjectCount = 1000 // defaultLeaseMaxObjectCount
)

// leases hands out etcd leases for objects with a time to live (events),
// one lease per reuse window as upstream's leaseManager does.
type leases struct {
	client clientv3.Lease
	now    func() time.Time

	mu       sync.Mutex // guards the fields below
	id       clientv3.LeaseID
	expires  time.Time // when the current lease expires
	attached int64     // objects given the current lease
}

// get returns a lease under which an object written now lives at least
// ttl (whole seconds, as etcd's leases).
func (l *leases) get(ctx context.Context, ttl int64) (clientv3.LeaseID, error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	reuse := min(int64(leaseReusePercent*float64(ttl)), leaseReuseSeconds)
	valid := now.Add(time.Duration(ttl) * time.Second).Before(l.expires)
	sufficient := now.Add(time.Duration(ttl+reuse) * time.Second).After(l.expires)
	l.attached++ // as upstream: every request counts, whether its write succeeds or not
	if valid && sufficient && l.attached <= leaseMaxObjectCount {
		return l.id, nil
	}
	ttl += reuse
	resp, err := l.client.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("cannot grant a lease of %ds: %w", ttl, etcdError(err))
	}
	l.id = resp.ID
	l.expires = now.Add(time.Duration(ttl) * time.Second)
	l.attached = 1
	return resp.ID, nil
}
