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

// remove is the DeleteFunc of an immediate delete.
func remove(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
	return cur, storage.DeleteRemove, nil
}

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
	_, _, err := e.store.Delete(ctx, cms, "default", "c", storage.Preconditions{ResourceVersion: rv(t, created) - 1}, remove)
	check("stale resourceVersion", err, storage.ErrConflict)
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.Preconditions{UID: "other"}, remove)
	check("other uid", err, storage.ErrConflict)
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.Preconditions{}, nil)
	check("no DeleteFunc", err, storage.ErrInvalidObject)
	refused := errors.New("refused")
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.Preconditions{}, func(runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		return nil, 0, refused
	})
	if err != refused {
		t.Errorf("the DeleteFunc's error came back as %v, want it as is", err)
	}

	out, deleted, err := e.store.Delete(ctx, cms, "default", "c",
		storage.Preconditions{ResourceVersion: rv(t, created), UID: string(created.(*corev1.ConfigMap).UID)}, remove)
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
	_, _, err = e.store.Delete(ctx, cms, "default", "c", storage.Preconditions{}, remove)
	check("second delete", err, storage.ErrNotFound)

	// Concurrent deletes: one wins, the others find nothing.
	e.create(cms, configMap("default", "race", nil))
	var wins, notFound atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, deleted, err := e.store.Delete(ctx, cms, "default", "race", storage.Preconditions{}, remove)
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

// TestDeleteUpdateAndKeep: a delete that leaves the object stores the
// DeleteFunc's new state (system fields kept), writes nothing when that
// state is what is stored, and keeps it as it is when asked.
func TestDeleteUpdateAndKeep(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	cm := configMap("default", "f", nil)
	cm.Finalizers = []string{"example.com/f"}
	created := e.create(cms, cm).(*corev1.ConfigMap)

	at := metav1.NewTime(t0.Add(time.Minute))
	zero := int64(0)
	mark := func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		c := cur.(*corev1.ConfigMap)
		c.DeletionTimestamp, c.DeletionGracePeriodSeconds = &at, &zero
		c.UID = "changed" // not the DeleteFunc's to change
		return c, storage.DeleteUpdate, nil
	}
	out, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.Preconditions{}, mark)
	if err != nil || deleted {
		t.Fatalf("Delete: deleted %v, %v", deleted, err)
	}
	m := out.(*corev1.ConfigMap)
	if m.DeletionTimestamp == nil || !m.DeletionTimestamp.Equal(&at) || m.UID != created.UID {
		t.Errorf("updated state: deletionTimestamp %v, uid %s (created %s)", m.DeletionTimestamp, m.UID, created.UID)
	}
	if rv(t, out) != e.revision() {
		t.Errorf("resourceVersion %d, want %d", rv(t, out), e.revision())
	}
	stored, err := e.store.Get(ctx, cms, "default", "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(out, stored); d != "" {
		t.Errorf("returned state differs from the stored one (-returned +stored):\n%s", d)
	}

	// The same update again writes nothing.
	before := e.revision()
	again, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.Preconditions{}, mark)
	if err != nil || deleted || e.revision() != before || rv(t, again) != rv(t, out) {
		t.Errorf("repeated update: deleted %v, %v, revision %d → %d", deleted, err, before, e.revision())
	}
	// Keep returns the current state.
	kept, deleted, err := e.store.Delete(ctx, cms, "default", "f", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		return nil, storage.DeleteKeep, nil
	})
	if err != nil || deleted || e.revision() != before {
		t.Fatalf("keep: deleted %v, %v", deleted, err)
	}
	if d := diff(out, kept); d != "" {
		t.Errorf("keep returned another state (-stored +kept):\n%s", d)
	}
}

// TestDeleteRetries: when the object changes between the read and the
// write, the DeleteFunc decides again on the new state.
func TestDeleteRetries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cms := e.configMaps()
	e.create(cms, configMap("default", "r", map[string]string{"v": "1"}))
	var seen []string
	_, deleted, err := e.store.Delete(ctx, cms, "default", "r", storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, storage.DeleteAction, error) {
		seen = append(seen, cur.(*corev1.ConfigMap).Data["v"])
		if len(seen) == 1 {
			// Someone else writes meanwhile.
			if _, err := e.store.Update(ctx, cms, "default", "r", storage.Preconditions{}, func(c runtime.Object) (runtime.Object, error) {
				c.(*corev1.ConfigMap).Data["v"] = "2"
				return c, nil
			}); err != nil {
				t.Fatalf("Update: %v", err)
			}
		}
		return cur, storage.DeleteRemove, nil
	})
	if err != nil || !deleted {
		t.Fatalf("Delete: deleted %v, %v", deleted, err)
	}
	if len(seen) != 2 || seen[0] != "1" || seen[1] != "2" {
		t.Errorf("the DeleteFunc saw %q, want [1 2]", seen)
	}
}
