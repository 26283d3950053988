package storage_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/storage"
)

func TestDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	created := e.create(cms, configMap("default", "c", nil))

	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	_, _, err := e.store.Delete(ctx, cms, "default", "c", storage.DeleteOptions{Preconditions: storage.Preconditions{ResourceVersion: rv(t, created) - 1}})
	check("stale resourceVersion", err, storage.ErrConflict)
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.DeleteOptions{Preconditions: storage.Preconditions{UID: "other"}})
	check("other uid", err, storage.ErrConflict)
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.DeleteOptions{PropagationPolicy: "Sometimes"})
	check("unknown policy", err, storage.ErrInvalidObject)

	out, deleted, err := e.store.Delete(ctx, cms, "default", "c", storage.DeleteOptions{
		Preconditions: storage.Preconditions{ResourceVersion: rv(t, created), UID: string(created.(*corev1.ConfigMap).UID)},
	})
	if err != nil || !deleted {
		t.Fatalf("Delete: deleted %v, %v", deleted, err)
	}
	if rv(t, out) != e.revision() || rv(t, out) <= rv(t, created) {
		t.Errorf("deleted object has resourceVersion %d, want the delete's revision %d", rv(t, out), e.revision())
	}
	if out.(*corev1.ConfigMap).UID != created.(*corev1.ConfigMap).UID {
		t.Error("Delete did not return the last state")
	}
	_, err = e.store.Get(ctx, cms, "default", "c", 0)
	check("get after delete", err, storage.ErrNotFound)
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.DeleteOptions{})
	check("second delete", err, storage.ErrNotFound)

	// Concurrent deletes: one wins, the others find nothing.
	e.create(cms, configMap("default", "race", nil))
	var wins, notFound atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, deleted, err := e.store.Delete(ctx, cms, "default", "race", storage.DeleteOptions{})
			switch {
			case deleted:
				wins.Add(1)
			case errors.Is(err, storage.ErrNotFound):
				notFound.Add(1)
			default:
				t.Errorf("concurrent Delete: deleted %v, %v", deleted, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || notFound.Load() != 7 {
		t.Errorf("concurrent deletes: %d won, %d not found", wins.Load(), notFound.Load())
	}
}

func TestDeleteWithFinalizers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	cm := configMap("default", "f", nil)
	cm.Finalizers = []string{"example.com/f"}
	e.create(cms, cm)

	e.advance(time.Minute)
	out, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("Delete: deleted %v, %v", deleted, err)
	}
	m := out.(*corev1.ConfigMap)
	if m.DeletionTimestamp == nil || !m.DeletionTimestamp.Time.Equal(e.now()) || m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds != 0 {
		t.Errorf("deletion fields: %v, %v", m.DeletionTimestamp, m.DeletionGracePeriodSeconds)
	}
	if rv(t, out) != e.revision() {
		t.Errorf("resourceVersion %d, want %d", rv(t, out), e.revision())
	}

	// A second delete changes nothing.
	e.advance(time.Minute)
	again, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.DeleteOptions{})
	if err != nil || deleted {
		t.Fatalf("second Delete: deleted %v, %v", deleted, err)
	}
	if d := diff(out, again); d != "" {
		t.Errorf("second delete changed the object (-first +second):\n%s", d)
	}
}

func TestDeletePropagation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	f := func(name string, finalizers []string, policy string, wantDeleted bool, wantFinalizers []string) {
		t.Run(name, func(t *testing.T) {
			cm := configMap("default", name, nil)
			cm.Finalizers = finalizers
			e.create(cms, cm)
			out, deleted, err := e.store.Delete(ctx, cms, "default", name, storage.DeleteOptions{PropagationPolicy: policy})
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if deleted != wantDeleted {
				t.Fatalf("deleted %v, want %v", deleted, wantDeleted)
			}
			if wantDeleted {
				return
			}
			m := out.(*corev1.ConfigMap)
			if d := diff(wantFinalizers, m.Finalizers); d != "" || m.DeletionTimestamp == nil {
				t.Errorf("finalizers (-want +got):\n%s; deletionTimestamp %v", d, m.DeletionTimestamp)
			}
		})
	}
	f("foreground", nil, "Foreground", false, []string{metav1.FinalizerDeleteDependents})
	f("orphan", nil, "Orphan", false, []string{metav1.FinalizerOrphanDependents})
	f("orphan-replaces-foreground", []string{"x", metav1.FinalizerDeleteDependents}, "Orphan", false, []string{"x", metav1.FinalizerOrphanDependents})
	f("background-removes-orphan", []string{metav1.FinalizerOrphanDependents}, "Background", true, nil)
	f("default-keeps-orphan", []string{metav1.FinalizerOrphanDependents}, "", false, []string{metav1.FinalizerOrphanDependents})
	f("background", nil, "Background", true, nil)
}

func TestDeletePodGraceful(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pods := e.pods()
	newPod := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	del := func(name string, grace *int64) (*corev1.Pod, bool) {
		t.Helper()
		out, deleted, err := e.store.Delete(ctx, pods, "default", name, storage.DeleteOptions{GracePeriodSeconds: grace})
		if err != nil {
			t.Fatalf("Delete %s: %v", name, err)
		}
		return out.(*corev1.Pod), deleted
	}
	seconds := func(n int64) *int64 { return &n }

	e.create(pods, newPod("bound", "n1", corev1.PodRunning))
	p, deleted := del("bound", nil)
	if deleted || p.DeletionTimestamp == nil || !p.DeletionTimestamp.Time.Equal(t0.Add(30*time.Second)) ||
		*p.DeletionGracePeriodSeconds != 30 || p.Generation != 2 {
		t.Fatalf("graceful delete: deleted %v, %v, grace %v, generation %d", deleted, p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Generation)
	}
	// Again, without or with a longer grace period: unchanged.
	if again, deleted := del("bound", nil); deleted || rv(t, again) != rv(t, p) {
		t.Errorf("second delete changed the pod")
	}
	if again, deleted := del("bound", seconds(60)); deleted || rv(t, again) != rv(t, p) {
		t.Errorf("delete with a longer grace period changed the pod")
	}
	// A shorter grace period moves the deletion timestamp back.
	e.advance(5 * time.Second)
	shorter, deleted := del("bound", seconds(10))
	if deleted || !shorter.DeletionTimestamp.Time.Equal(t0.Add(10*time.Second)) || *shorter.DeletionGracePeriodSeconds != 10 {
		t.Errorf("shortened: deleted %v, %v, grace %d", deleted, shorter.DeletionTimestamp, *shorter.DeletionGracePeriodSeconds)
	}
	// The kubelet's final delete.
	if _, deleted := del("bound", seconds(0)); !deleted {
		t.Error("delete with grace 0 did not delete")
	}

	// Grace from the spec, or the options.
	withSpec := newPod("spec", "n1", corev1.PodRunning)
	withSpec.Spec.TerminationGracePeriodSeconds = seconds(5)
	e.create(pods, withSpec)
	if p, _ := del("spec", nil); *p.DeletionGracePeriodSeconds != 5 {
		t.Errorf("grace from spec: %d", *p.DeletionGracePeriodSeconds)
	}
	e.create(pods, newPod("option", "n1", corev1.PodRunning))
	if p, _ := del("option", seconds(7)); *p.DeletionGracePeriodSeconds != 7 {
		t.Errorf("grace from options: %d", *p.DeletionGracePeriodSeconds)
	}

	// Unbound or finished pods go at once.
	e.create(pods, newPod("unbound", "", corev1.PodPending))
	if _, deleted := del("unbound", nil); !deleted {
		t.Error("unbound pod not deleted")
	}
	e.create(pods, newPod("done", "n1", corev1.PodSucceeded))
	if _, deleted := del("done", nil); !deleted {
		t.Error("succeeded pod not deleted")
	}

	// A pod with a finalizer deleted with grace 0 stays until the
	// finalizer goes.
	fin := newPod("fin", "n1", corev1.PodRunning)
	fin.Finalizers = []string{"example.com/f"}
	e.create(pods, fin)
	if p, deleted := del("fin", seconds(0)); deleted || p.DeletionTimestamp == nil || *p.DeletionGracePeriodSeconds != 0 {
		t.Errorf("pod with finalizer: deleted %v, %+v", deleted, p.ObjectMeta)
	}
	if _, err := e.store.Update(ctx, pods, "default", "fin", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		cur.(*corev1.Pod).Finalizers = nil
		return cur, nil
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := e.store.Get(ctx, pods, "default", "fin", 0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("pod still there after its finalizer went: %v", err)
	}
}
