package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/storage/registry"
)

// Create stores obj, a new object of the storage kind of res, and returns it
// as stored, with resourceVersion set. It takes obj over and fills the
// system fields: uid (unless set) and creationTimestamp. metadata.generation
// is stored as obj carries it: it is the strategy's (the gateway's) to set,
// as upstream's PrepareForCreate does. The name is required: as in kube-apiserver, the
// name from metadata.generateName is the registry's (the gateway's) to
// generate, validate and try again when taken. The namespace is cleared
// for cluster-scoped resources. ErrAlreadyExists when the name is taken;
// ErrInvalidObject for an object that cannot be stored.
func (s *Store) Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error) {
	m, err := s.checkObject(res, obj)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", res.Resource, err)
	}
	ns := m.GetNamespace()
	if !res.Namespaced {
		ns = ""
		m.SetNamespace("")
	}
	name := m.GetName()
	if name == "" {
		return nil, fmt.Errorf("cannot create %s: the name is required: %w", res.Resource, ErrInvalidObject)
	}
	if m.GetResourceVersion() != "" {
		return nil, fmt.Errorf("cannot create %s: resourceVersion must not be set: %w", describe(res, ns, m.GetName()), ErrInvalidObject)
	}
	if m.GetUID() == "" { // a uid the gateway gave it before upstream's strategy ran (a Job's selector names it) is kept
		m.SetUID(types.UID(uuid.NewString()))
	}
	m.SetCreationTimestamp(metav1.NewTime(s.truncatedNow()))
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)

	start := time.Now()
	rev, err := s.create(ctx, res, ns, name, obj, m)
	s.metrics.record("create", res, start, err)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", describe(res, ns, name), err)
	}
	setRevision(m, rev)
	return obj, nil
}

// create writes obj at namespace/name if the key is free and returns the
// revision of the write.
func (s *Store) create(ctx context.Context, res *registry.Resource, ns, name string, obj runtime.Object, m metav1.Object) (int64, error) {
	key, err := objectKey(res, ns, name)
	if err != nil {
		return 0, err
	}
	_, value, err := s.encode(ctx, res, key, obj, m)
	if err != nil {
		return 0, err
	}
	put, err := s.putOp(ctx, res, key, value)
	if err != nil {
		return 0, err
	}
	resp, err := s.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(put).
		Commit()
	if err != nil {
		return 0, etcdError(err)
	}
	if !resp.Succeeded {
		return 0, ErrAlreadyExists
	}
	return resp.Header.Revision, nil
}
