package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// Store is what the lock needs of storage.Store.
type Store interface {
	Get(ctx context.Context, res *registry.Resource, ns, name string, rev int64) (runtime.Object, error)
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
	Update(ctx context.Context, res *registry.Resource, ns, name string, pre storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error)
}

// leaseLock is client-go's resourcelock.Interface over a coordination.k8s.io/v1
// Lease kept through kgate's store, as client-go's LeaseLock keeps one
// through the API: Update writes only if the Lease is still at the
// resourceVersion Get read (compare-and-swap in etcd), so of two
// candidates that read the same expired record only one takes it.
type leaseLock struct {
	store    Store
	res      *registry.Resource // leases
	ns, name string
	identity string
	timeout  time.Duration // bounds each call (client-go releases with context.TODO)

	mu    sync.Mutex // guards lease
	lease *coordinationv1.Lease
}

var _ rl.Interface = (*leaseLock)(nil)

func (l *leaseLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	obj, err := l.store.Get(ctx, l.res, l.ns, l.name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		// client-go creates the Lease on an API NotFound.
		return nil, nil, apierror.NotFound(coordinationv1.Resource("leases"), l.name)
	}
	if err != nil {
		return nil, nil, err
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil, nil, fmt.Errorf("cannot read lease %s/%s: stored as %T", l.ns, l.name, obj)
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	record := rl.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(*record)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode the leader election record: %w", err)
	}
	return record, raw, nil
}

func (l *leaseLock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	obj, err := l.store.Create(ctx, l.res, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: l.name},
		Spec:       rl.LeaderElectionRecordToLeaseSpec(&ler),
	})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = obj.(*coordinationv1.Lease)
	l.mu.Unlock()
	return nil
}

// Update writes ler over the Lease last read or written, only if nobody
// wrote it since (storage.ErrConflict otherwise).
func (l *leaseLock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.mu.Lock()
	cur := l.lease
	l.mu.Unlock()
	if cur == nil {
		return errors.New("cannot update the lease: not read or created yet")
	}
	rv, err := parseRV(cur.ResourceVersion)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	obj, err := l.store.Update(ctx, l.res, l.ns, l.name, storage.Preconditions{ResourceVersion: rv, UID: string(cur.UID)},
		func(current runtime.Object) (runtime.Object, error) {
			lease, ok := current.(*coordinationv1.Lease)
			if !ok {
				return nil, fmt.Errorf("cannot update lease %s/%s: stored as %T", l.ns, l.name, current)
			}
			lease.Spec = rl.LeaderElectionRecordToLeaseSpec(&ler)
			return lease, nil
		})
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = obj.(*coordinationv1.Lease)
	l.mu.Unlock()
	return nil
}

// RecordEvent: kgate records no leader election Events.
func (l *leaseLock) RecordEvent(string) {}

func (l *leaseLock) Identity() string { return l.identity }

func (l *leaseLock) Describe() string { return l.ns + "/" + l.name }

func parseRV(rv string) (int64, error) {
	var n int64
	if _, err := fmt.Sscan(rv, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("cannot update the lease: bad resourceVersion %q", rv)
	}
	return n, nil
}
