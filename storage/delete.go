package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// DeleteAction is what a delete does to the current state of an object.
type DeleteAction int

// The actions of a delete.
const (
	// DeleteKeep leaves the object as it is (graceful deletion already
	// pending): it is returned, not deleted.
	DeleteKeep DeleteAction = iota
	// DeleteUpdate stores the new state the DeleteFunc returned
	// (deletionTimestamp, finalizers): it is returned, not deleted.
	DeleteUpdate
	// DeleteRemove removes the key: the last state is returned, deleted.
	DeleteRemove
)

// A DeleteFunc decides what a delete does to cur, a copy of the object's
// current state (resourceVersion set), which it may modify and return
// with DeleteUpdate: kube-apiserver's rest.BeforeDelete, the strategy's
// graceful deletion and the registry's finalizer rules, which are the
// gateway's (upstream's strategies) to apply. An error stops the delete
// and is returned as is.
type DeleteFunc func(cur runtime.Object) (runtime.Object, DeleteAction, error)

// Delete deletes the object at namespace/name as decide says, against
// the object's current state: DeleteKeep returns it unchanged with deleted
// false; DeleteUpdate stores the new state (unless it is what is stored
// already) and returns it with deleted false; DeleteRemove removes the key
// and returns the last state with the revision of the delete as
// resourceVersion and deleted true.
//
// Preconditions are checked against the current state (ErrConflict). When
// the object changes between the read and the write, Delete starts again
// and calls decide on the new state.
func (s *Store) Delete(ctx context.Context, res *registry.Resource, ns, name string, pre Preconditions, decide DeleteFunc) (obj runtime.Object, deleted bool, err error) {
	if !res.Namespaced {
		ns = ""
	}
	start := time.Now()
	obj, deleted, err = s.delete(ctx, res, ns, name, pre, decide)
	s.metrics.record("delete", res, start, err)
	var ue errUser
	if errors.As(err, &ue) {
		return nil, false, ue.err
	}
	if err != nil {
		return nil, false, fmt.Errorf("cannot delete %s: %w", describe(res, ns, name), err)
	}
	return obj, deleted, nil
}

func (s *Store) delete(ctx context.Context, res *registry.Resource, ns, name string, pre Preconditions, decide DeleteFunc) (runtime.Object, bool, error) {
	if decide == nil {
		return nil, false, fmt.Errorf("no DeleteFunc: %w", ErrInvalidObject)
	}
	key, err := objectKey(res, ns, name)
	if err != nil {
		return nil, false, err
	}
	kv, err := s.getKV(ctx, key)
	if err != nil {
		return nil, false, err
	}
	for {
		if kv == nil {
			return nil, false, ErrNotFound
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		cur, was, err := s.decodeStored(ctx, res, kv)
		if err != nil {
			return nil, false, err
		}
		curMeta, _ := meta.Accessor(cur) // decode checked it
		if err := pre.check(curMeta, kv.ModRevision); err != nil {
			return nil, false, err
		}

		next, action, err := decide(cur.DeepCopyObject())
		if err != nil {
			return nil, false, errUser{err}
		}
		var r txnResult
		switch action {
		case DeleteKeep:
			return cur, false, nil
		case DeleteUpdate:
			m, err := s.checkObject(res, next)
			if err != nil {
				return nil, false, err
			}
			m.SetName(curMeta.GetName())
			m.SetNamespace(curMeta.GetNamespace())
			m.SetUID(curMeta.GetUID())
			m.SetCreationTimestamp(curMeta.GetCreationTimestamp())
			data, value, err := s.encode(ctx, res, key, next, m)
			if err != nil {
				return nil, false, err
			}
			if s.sameAsStored(next, data, was) {
				return cur, false, nil
			}
			r, err = s.commitIf(ctx, key, kv.ModRevision, clientv3.OpPut(key, bytesToString(value)))
			if err != nil {
				return nil, false, err
			}
			if r.ok {
				setRevision(m, r.revision)
				return next, false, nil
			}
		case DeleteRemove:
			r, err = s.commitIf(ctx, key, kv.ModRevision, clientv3.OpDelete(key))
			if err != nil {
				return nil, false, err
			}
			if r.ok {
				setRevision(curMeta, r.revision)
				return cur, true, nil
			}
		default:
			return nil, false, fmt.Errorf("unknown delete action %d: %w", action, ErrInvalidObject)
		}
		kv = r.latest
		s.logger.Debug("object changed while writing it, retrying", "key", key)
	}
}
