package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// UpdateFunc returns the new state of an object from its current state,
// which it may modify. An error stops the update and is returned as is.
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// Update changes the object at namespace/name the way kube-apiserver's
// GuaranteedUpdate does: it reads the current state, checks pre
// (ErrConflict), calls tryUpdate and writes the result if the key did not
// change meanwhile; otherwise it starts again with the new state.
//
// The object tryUpdate returns must carry no resourceVersion or the
// current one (else ErrConflict). Its uid, creationTimestamp,
// deletionTimestamp and deletionGracePeriodSeconds are kept from the
// current state; its generation is tryUpdate's (the strategy's, as
// upstream's rest.BeforeUpdate and PrepareForUpdate leave it). When the
// result encodes to the stored bytes, nothing is written and the current
// state is returned with its resourceVersion. When the object is being
// deleted (deletionTimestamp set, deletionGracePeriodSeconds 0) and the
// update leaves no finalizers, it is deleted and its last stored state is
// returned with the revision of the delete as resourceVersion.
func (s *Store) Update(ctx context.Context, res *registry.Resource, ns, name string, pre Preconditions, tryUpdate UpdateFunc) (runtime.Object, error) {
	if !res.Namespaced {
		ns = ""
	}
	start := time.Now()
	obj, err := s.update(ctx, res, ns, name, pre, tryUpdate)
	s.metrics.record("update", res, start, err)
	var ue errUser
	if errors.As(err, &ue) {
		return nil, ue.err
	}
	if err != nil {
		return nil, fmt.Errorf("cannot update %s: %w", describe(res, ns, name), err)
	}
	return obj, nil
}

// errUser carries an error of the update func, returned unwrapped.
type errUser struct{ err error }

func (e errUser) Error() string { return e.err.Error() }

func (s *Store) update(ctx context.Context, res *registry.Resource, ns, name string, pre Preconditions, tryUpdate UpdateFunc) (runtime.Object, error) {
	key, err := objectKey(res, ns, name)
	if err != nil {
		return nil, err
	}
	kv, err := s.getKV(ctx, key)
	if err != nil {
		return nil, err
	}
	for {
		if kv == nil {
			return nil, ErrNotFound
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cur, was, err := s.decodeStored(ctx, res, kv)
		if err != nil {
			return nil, err
		}
		curMeta, _ := meta.Accessor(cur) // decode checked it
		if err := pre.check(curMeta, kv.ModRevision); err != nil {
			return nil, err
		}

		out, err := tryUpdate(cur.DeepCopyObject())
		if err != nil {
			return nil, errUser{err}
		}
		m, err := s.checkObject(res, out)
		if err != nil {
			return nil, err
		}
		if rv := m.GetResourceVersion(); rv != "" && rv != curMeta.GetResourceVersion() {
			return nil, fmt.Errorf("resourceVersion %s is not the current %s: %w", rv, curMeta.GetResourceVersion(), ErrConflict)
		}
		m.SetName(name)
		m.SetNamespace(ns)
		m.SetUID(curMeta.GetUID())
		m.SetCreationTimestamp(curMeta.GetCreationTimestamp())
		m.SetDeletionTimestamp(curMeta.GetDeletionTimestamp())
		m.SetDeletionGracePeriodSeconds(curMeta.GetDeletionGracePeriodSeconds())

		var r txnResult
		if deleteOnUpdate(out, m) {
			r, err = s.commitIf(ctx, key, kv.ModRevision, clientv3.OpDelete(key))
			if err != nil {
				return nil, err
			}
			if r.ok {
				setRevision(curMeta, r.revision)
				return cur, nil
			}
		} else {
			data, value, err := s.encode(ctx, res, key, out, m)
			if err != nil {
				return nil, err
			}
			if s.sameAsStored(out, data, was) {
				return cur, nil
			}
			put, err := s.putOp(ctx, res, key, value)
			if err != nil {
				return nil, err
			}
			r, err = s.commitIf(ctx, key, kv.ModRevision, put)
			if err != nil {
				return nil, err
			}
			if r.ok {
				setRevision(m, r.revision)
				return out, nil
			}
		}
		kv = r.latest
		s.logger.Debug("object changed while writing it, retrying", "key", key)
	}
}

// deleteOnUpdate reports whether an update leaves an object that is being
// deleted with nothing left to wait for, so that it goes, as upstream's
// generic ShouldDeleteDuringUpdate decides: a deletionTimestamp, a grace
// period unset or 0, no finalizers; and for a Namespace, as its storage
// adds, no spec.finalizers either (the namespace controller's finalize
// removes the last one once the namespace is empty).
func deleteOnUpdate(obj runtime.Object, m metav1.Object) bool {
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	grace := m.GetDeletionGracePeriodSeconds()
	return m.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 && (grace == nil || *grace == 0)
}
