package storage_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kgate/kgate/storage"
)

func TestUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	deps := e.deployments()
	replicas := int32(1)
	created := e.create(deps, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "d"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
	}).(*appsv1.Deployment)

	update := func(pre storage.Preconditions, f func(d *appsv1.Deployment)) (*appsv1.Deployment, error) {
		out, err := e.store.Update(ctx, deps, "default", "d", pre, func(cur runtime.Object) (runtime.Object, error) {
			f(cur.(*appsv1.Deployment))
			return cur, nil
		})
		if err != nil {
			return nil, err
		}
		return out.(*appsv1.Deployment), nil
	}

	// The result is stored at a new revision; storage computes no
	// generation: a spec change without one keeps the old.
	d, err := update(storage.Preconditions{ResourceVersion: rv(t, created)}, func(d *appsv1.Deployment) { *d.Spec.Replicas = 3 })
	if err != nil {
		t.Fatalf("Update spec: %v", err)
	}
	if d.Generation != created.Generation || rv(t, d) != e.revision() || *d.Spec.Replicas != 3 {
		t.Errorf("after spec update: generation %d (created %d), rv %d (current %d), replicas %d", d.Generation, created.Generation, rv(t, d), e.revision(), *d.Spec.Replicas)
	}

	// The generation the update func sets (upstream's strategy, in the
	// gateway) is stored as it is.
	d, err = update(storage.Preconditions{}, func(d *appsv1.Deployment) {
		d.Status.Replicas = 3
		d.Generation = 42
	})
	if err != nil {
		t.Fatalf("Update generation: %v", err)
	}
	if d.Generation != 42 {
		t.Errorf("after an update setting generation 42: generation %d", d.Generation)
	}

	// System fields cannot be changed by an update.
	later := metav1.NewTime(t0.Add(time.Hour))
	d, err = update(storage.Preconditions{}, func(d *appsv1.Deployment) {
		d.UID = types.UID("other")
		d.CreationTimestamp = later
		d.DeletionTimestamp = &later
		d.Annotations = map[string]string{"x": "y"}
	})
	if err != nil {
		t.Fatalf("Update system fields: %v", err)
	}
	if d.UID != created.UID || !d.CreationTimestamp.Equal(&created.CreationTimestamp) || d.DeletionTimestamp != nil {
		t.Errorf("system fields changed: uid %s, created %v, deletion %v", d.UID, d.CreationTimestamp, d.DeletionTimestamp)
	}
	stored, err := e.store.Get(ctx, deps, "default", "d", 0)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if df := diff(d, stored); df != "" {
		t.Errorf("Update result differs from the stored object (-update +get):\n%s", df)
	}

	// An update changing nothing writes nothing.
	before := e.revision()
	same, err := update(storage.Preconditions{}, func(*appsv1.Deployment) {})
	if err != nil {
		t.Fatalf("no-op Update: %v", err)
	}
	if rv(t, same) != rv(t, d) || e.revision() != before {
		t.Errorf("no-op update: rv %d → %d, revision %d → %d", rv(t, d), rv(t, same), before, e.revision())
	}

	// Conflicts and errors.
	check := func(name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	_, err = update(storage.Preconditions{ResourceVersion: rv(t, created)}, func(*appsv1.Deployment) {})
	check("stale resourceVersion precondition", err, storage.ErrConflict)
	_, err = update(storage.Preconditions{UID: "other"}, func(*appsv1.Deployment) {})
	check("uid precondition", err, storage.ErrConflict)
	_, err = update(storage.Preconditions{}, func(d *appsv1.Deployment) {
		d.ResourceVersion = strconv.FormatInt(rv(t, created), 10)
		*d.Spec.Replicas = 7
	})
	check("stale resourceVersion in the object", err, storage.ErrConflict)
	_, err = e.store.Update(ctx, deps, "default", "missing", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
	check("missing object", err, storage.ErrNotFound)
	errMine := errors.New("mine")
	_, err = e.store.Update(ctx, deps, "default", "d", storage.Preconditions{}, func(runtime.Object) (runtime.Object, error) { return nil, errMine })
	if err != errMine {
		t.Errorf("error of the update func: got %v, want it as is", err)
	}
	_, err = e.store.Update(ctx, deps, "default", "d", storage.Preconditions{}, func(runtime.Object) (runtime.Object, error) {
		return &corev1.Pod{}, nil
	})
	check("object of another kind", err, storage.ErrInvalidObject)
	if err != nil && err.Error()[:len("cannot update deployments.apps default/d")] != "cannot update deployments.apps default/d" {
		t.Errorf("error %q does not name the object", err)
	}
}

// TestUpdateConcurrent has updaters without preconditions race on one
// counter: all succeed and no increment is lost.
func TestUpdateConcurrent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	e.create(cms, configMap("default", "counter", map[string]string{"n": "0"}))
	const workers, each = 8, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := e.store.Update(ctx, cms, "default", "counter", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
					cm := cur.(*corev1.ConfigMap)
					n, err := strconv.Atoi(cm.Data["n"])
					if err != nil {
						return nil, err
					}
					cm.Data["n"] = strconv.Itoa(n + 1)
					return cm, nil
				})
				if err != nil {
					t.Errorf("Update: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got, err := e.store.Get(ctx, cms, "default", "counter", 0)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if n := got.(*corev1.ConfigMap).Data["n"]; n != strconv.Itoa(workers*each) {
		t.Errorf("counter = %s, want %d", n, workers*each)
	}
}

// TestUpdateRemovingLastFinalizer deletes an object being deleted when an
// update removes its last finalizer.
func TestUpdateRemovingLastFinalizer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	cm := configMap("default", "f", nil)
	cm.Finalizers = []string{"example.com/a", "example.com/b"}
	e.create(cms, cm)
	if _, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		// As the registry marks an object with finalizers.
		m := cur.(*corev1.ConfigMap)
		now, zero := metav1.NewTime(t0), int64(0)
		m.DeletionTimestamp, m.DeletionGracePeriodSeconds = &now, &zero
		return m, storage.DeleteUpdate, nil
	}); err != nil || deleted {
		t.Fatalf("Delete: deleted %v, %v", deleted, err)
	}
	removeFinalizer := func(f string) (runtime.Object, error) {
		return e.store.Update(ctx, cms, "default", "f", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
			m := cur.(*corev1.ConfigMap)
			var keep []string
			for _, x := range m.Finalizers {
				if x != f {
					keep = append(keep, x)
				}
			}
			m.Finalizers = keep
			return m, nil
		})
	}
	// One finalizer left: still there, still being deleted.
	out, err := removeFinalizer("example.com/a")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if m := out.(*corev1.ConfigMap); m.DeletionTimestamp == nil || len(m.Finalizers) != 1 {
		t.Fatalf("after removing one finalizer: %+v", m.ObjectMeta)
	}
	out, err = removeFinalizer("example.com/b")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if rv(t, out) != e.revision() {
		t.Errorf("returned resourceVersion %d, want the delete's revision %d", rv(t, out), e.revision())
	}
	if e.raw(cms.Key("default", "f")) != nil {
		t.Error("object still stored after its last finalizer went")
	}
}
