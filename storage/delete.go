package storage

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage/registry"
)

// DefaultPodGracePeriodSeconds is the grace period of a bound Pod deleted
// without one in the options or its spec (the API default of
// terminationGracePeriodSeconds).
const DefaultPodGracePeriodSeconds = 30

// DeleteOptions are the options of Delete.
type DeleteOptions struct {
	Preconditions Preconditions
	// GracePeriodSeconds overrides a Pod's terminationGracePeriodSeconds;
	// negative means 1. Nil uses the Pod's.
	GracePeriodSeconds *int64
	// PropagationPolicy is "", "Orphan", "Background" or "Foreground".
	// Orphan and Foreground delete through the "orphan" and
	// "foregroundDeletion" finalizers; "" keeps those present.
	PropagationPolicy string
}

// deleteAction is what a delete does to the stored object.
type deleteAction int

const (
	keepObject   deleteAction = iota // already being deleted: return it as it is
	updateObject                     // set deletionTimestamp (and finalizers)
	removeObject                     // remove the key
)

// Delete deletes the object at namespace/name with kube-apiserver's
// semantics. An object with finalizers (after applying the propagation
// policy) is not removed: deletionTimestamp is set, with
// deletionGracePeriodSeconds 0, and the updated object is returned with
// deleted false. A bound Pod with a grace period gets deletionTimestamp
// now + grace and deletionGracePeriodSeconds grace, and is not removed
// either; a later delete may only shorten the grace period. A delete of an
// object already being deleted returns it unchanged. Otherwise the key is
// removed, and the last state is returned with the revision of the delete
// as resourceVersion and deleted true.
//
// Preconditions are checked against the current state (ErrConflict). When
// the object changes between the read and the write, Delete starts again.
func (s *Store) Delete(ctx context.Context, res *registry.Resource, ns, name string, opts DeleteOptions) (obj runtime.Object, deleted bool, err error) {
	if !res.Namespaced {
		ns = ""
	}
	obj, deleted, err = s.delete(ctx, res, ns, name, opts)
	if err != nil {
		return nil, false, fmt.Errorf("cannot delete %s: %w", describe(res, ns, name), err)
	}
	return obj, deleted, nil
}

func (s *Store) delete(ctx context.Context, res *registry.Resource, ns, name string, opts DeleteOptions) (runtime.Object, bool, error) {
	switch opts.PropagationPolicy {
	case "", string(metav1.DeletePropagationOrphan), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationForeground):
	default:
		return nil, false, fmt.Errorf("unknown propagation policy %q: %w", opts.PropagationPolicy, ErrInvalidObject)
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
		cur, err := s.decode(res, kv)
		if err != nil {
			return nil, false, err
		}
		curMeta, _ := meta.Accessor(cur) // decode checked it
		if err := opts.Preconditions.check(curMeta, kv.ModRevision); err != nil {
			return nil, false, err
		}

		next, action := s.planDelete(cur, opts)
		var r txnResult
		switch action {
		case keepObject:
			return cur, false, nil
		case updateObject:
			m, _ := meta.Accessor(next)
			value, err := s.encode(key, next, m)
			if err != nil {
				return nil, false, err
			}
			if s.sameAsStored(next, value, kv.Value) {
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
		case removeObject:
			r, err = s.commitIf(ctx, key, kv.ModRevision, clientv3.OpDelete(key))
			if err != nil {
				return nil, false, err
			}
			if r.ok {
				setRevision(curMeta, r.revision)
				return cur, true, nil
			}
		}
		kv = r.latest
		s.logger.Debug("object changed while writing it, retrying", "key", key)
	}
}

// planDelete decides what a delete with opts does to cur, following
// kube-apiserver's rest.BeforeDelete and Store.Delete. For updateObject it
// returns the new state, a copy; otherwise cur.
func (s *Store) planDelete(cur runtime.Object, opts DeleteOptions) (runtime.Object, deleteAction) {
	obj := cur.DeepCopyObject()
	m, _ := meta.Accessor(obj)
	now := s.truncatedNow()
	var grace *int64
	if opts.GracePeriodSeconds != nil {
		g := *opts.GracePeriodSeconds
		if g < 0 {
			g = 1 // as kube-apiserver
		}
		grace = &g
	}

	// A namespace's first delete only starts its termination; it goes once
	// the namespace controller has emptied spec.finalizers (through
	// /finalize) and deletes it again.
	if ns, isNS := obj.(*corev1.Namespace); isNS {
		if m.GetDeletionTimestamp() == nil {
			setDeletion(m, now, 0)
			ns.Status.Phase = corev1.NamespaceTerminating
			setPropagationFinalizers(m, opts.PropagationPolicy)
			return obj, updateObject
		}
		if len(ns.Spec.Finalizers) > 0 {
			return cur, keepObject
		}
	}

	// A CRD's first delete only marks it, as apiextensions-apiserver's
	// REST.Delete: deletionTimestamp, the cleanup finalizer and the
	// Terminating condition; the CRD controller deletes its objects, then
	// removes the finalizer, which removes the CRD.
	if crd, isCRD := obj.(*apiextensionsv1.CustomResourceDefinition); isCRD && m.GetDeletionTimestamp() == nil {
		setDeletion(m, now, 0)
		if !apiextensionshelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
		}
		apiextensionshelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type:    apiextensionsv1.Terminating,
			Status:  apiextensionsv1.ConditionTrue,
			Reason:  "InstanceDeletionPending",
			Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
		})
		return obj, updateObject
	}

	// Only Pods are deleted gracefully.
	graceful := false
	var period int64
	if pod, isPod := obj.(*corev1.Pod); isPod {
		if dt := m.GetDeletionTimestamp(); dt != nil {
			if dgps := m.GetDeletionGracePeriodSeconds(); dgps != nil && *dgps > 0 {
				// Graceful deletion pending: the grace period may only
				// shrink.
				if grace == nil || *grace >= *dgps {
					return cur, keepObject
				}
				period = *grace
				at := dt.Add(-time.Duration(*dgps) * time.Second).Add(time.Duration(period) * time.Second)
				if at.Before(now) {
					at = now
					if period != 0 {
						period = 1 // the grace is over; leave the final delete to the kubelet
					}
				}
				setDeletion(m, at, period)
				graceful = true
			}
		} else {
			period = podGracePeriod(pod, grace)
			setDeletion(m, now.Add(time.Duration(period)*time.Second), period)
			if g := m.GetGeneration(); g > 0 {
				m.SetGeneration(g + 1)
			}
			graceful = true
		}
	}

	setPropagationFinalizers(m, opts.PropagationPolicy)
	pending := len(m.GetFinalizers()) > 0
	if !graceful {
		if !pending {
			return cur, removeObject
		}
		// markAsDeleting
		if m.GetDeletionTimestamp() == nil && m.GetGeneration() > 0 {
			m.SetGeneration(m.GetGeneration() + 1)
		}
		at := now
		if dt := m.GetDeletionTimestamp(); dt != nil && !dt.After(now) {
			at = dt.Time
		}
		setDeletion(m, at, 0)
		return obj, updateObject
	}
	if pending || period > 0 {
		return obj, updateObject
	}
	return cur, removeObject
}

func setDeletion(m metav1.Object, at time.Time, graceSeconds int64) {
	t := metav1.NewTime(at)
	m.SetDeletionTimestamp(&t)
	m.SetDeletionGracePeriodSeconds(&graceSeconds)
}

// podGracePeriod is kube-apiserver's pod CheckGracefulDelete: the option,
// else the spec's terminationGracePeriodSeconds, else the default; 0 for
// Pods not bound to a node or terminated.
func podGracePeriod(pod *corev1.Pod, option *int64) int64 {
	period := int64(DefaultPodGracePeriodSeconds)
	switch {
	case option != nil:
		period = *option
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	return period
}

// setPropagationFinalizers adds or removes the garbage collector's
// finalizers as policy asks; "" leaves them as they are.
func setPropagationFinalizers(m metav1.Object, policy string) {
	if policy == "" {
		return
	}
	old := m.GetFinalizers()
	next := make([]string, 0, len(old)+1)
	for _, f := range old {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			next = append(next, f)
		}
	}
	switch metav1.DeletionPropagation(policy) {
	case metav1.DeletePropagationOrphan:
		next = append(next, metav1.FinalizerOrphanDependents)
	case metav1.DeletePropagationForeground:
		next = append(next, metav1.FinalizerDeleteDependents)
	}
	if sameSet(old, next) {
		return
	}
	m.SetFinalizers(next)
}

func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
