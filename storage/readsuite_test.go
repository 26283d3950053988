package storage_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
	"github.com/kgate/kgate/storage/storagetest"
)

// TestReadSuite runs the shared read semantics against etcd-backed
// storage.
func TestReadSuite(t *testing.T) {
	e := newEnv(t)
	storagetest.RunReadSuite(t, &storeTarget{e: e, res: e.res("", "configmaps")}, storagetest.ReadSuiteOptions{})
}

// storeTarget reads ConfigMaps through storage.Store: a read without a
// revision is linearizable, a revision is exact.
type storeTarget struct {
	e   *env
	res *registry.Resource
}

func (s *storeTarget) Get(ctx context.Context, ns, name string, r storagetest.Read) (*corev1.ConfigMap, error) {
	obj, err := s.e.store.Get(ctx, s.res, ns, name, r.ResourceVersion)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

func (s *storeTarget) List(ctx context.Context, ns string, o storagetest.ListOptions) (*storagetest.ListResult, error) {
	l, err := s.e.store.List(ctx, s.res, ns, storage.ListOptions{Revision: o.ResourceVersion, Limit: o.Limit, After: o.After})
	if err != nil {
		return nil, err
	}
	out := &storagetest.ListResult{Revision: l.Revision, Last: l.Last, Remaining: l.Remaining}
	for _, obj := range l.Items {
		out.Items = append(out.Items, obj.(*corev1.ConfigMap))
	}
	return out, nil
}

func (s *storeTarget) Put(ctx context.Context, cm *corev1.ConfigMap) (int64, error) {
	return storagetest.PutConfigMap(ctx, s.e.store, s.res, cm)
}

// Expire compacts etcd at its current revision.
func (s *storeTarget) Expire(ctx context.Context, rev int64) error {
	resp, err := s.e.client.Get(ctx, "compact-marker")
	if err != nil {
		return err
	}
	_, err = s.e.client.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	return err
}
