package storage_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/storage"
)

// lease returns the lease of key and its granted TTL in seconds (0, 0
// when the key has none).
func (e *env) lease(key string) (clientv3.LeaseID, int64) {
	e.t.Helper()
	resp, err := e.client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) == 0 {
		e.t.Fatalf("Get %s: %v, %d keys", key, err, len(resp.Kvs))
	}
	id := clientv3.LeaseID(resp.Kvs[0].Lease)
	if id == 0 {
		return 0, 0
	}
	ttl, err := e.client.TimeToLive(context.Background(), id)
	if err != nil {
		e.t.Fatalf("TimeToLive: %v", err)
	}
	return id, ttl.GrantedTTL
}

func event(name string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: name},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"},
		Reason:         "Test",
	}
}

func TestEventTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	e := newEnv(t, func(c *storage.Config) { c.EventTTL = time.Hour })
	ctx := context.Background()
	events := e.res("", "events")
	eventsV1, ok := e.registry.Lookup(schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"})
	if !ok {
		t.Fatal("no events.k8s.io/v1 events")
	}

	// The first event gets a lease of the TTL plus upstream's reuse
	// window: min(5% of 3600 s, 60 s).
	e.create(events, event("a"))
	idA, ttl := e.lease("/registry/events/default/a")
	if idA == 0 || ttl != 3600+60 {
		t.Fatalf("event a: lease %x with TTL %ds, want a lease of %ds", idA, ttl, 3600+60)
	}
	// Events written within the window share it, whichever group wrote them.
	e.advance(30 * time.Second)
	e.create(events, event("b"))
	if id, _ := e.lease("/registry/events/default/b"); id != idA {
		t.Fatalf("event b: lease %x, want a's %x (same window)", id, idA)
	}
	if _, err := e.store.Create(ctx, eventsV1, event("c")); err != nil {
		t.Fatalf("Create through events.k8s.io: %v", err)
	}
	if id, _ := e.lease("/registry/events/default/c"); id != idA {
		t.Fatalf("events.k8s.io event c: lease %x, want a's %x", id, idA)
	}
	// Past the window a new lease: the shared one would end too early.
	e.advance(31 * time.Second)
	upd := event("a")
	upd.Count = 2
	if _, err := e.store.Update(ctx, events, "default", "a", storage.Preconditions{}, func(runtime.Object) (runtime.Object, error) { return upd, nil }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	idA2, ttl := e.lease("/registry/events/default/a")
	if idA2 == 0 || idA2 == idA || ttl != 3600+60 {
		t.Fatalf("updated event a: lease %x (was %x) with TTL %ds, want a new lease of %ds", idA2, idA, ttl, 3600+60)
	}
	// Other resources never get one.
	e.create(e.configMaps(), configMap("default", "cm", nil))
	if id, _ := e.lease("/registry/configmaps/default/cm"); id != 0 {
		t.Fatalf("configmap has lease %x", id)
	}
}

func TestEventTTLOff(t *testing.T) {
	if testing.Short() {
		t.Skip("needs etcd: skipped under -short")
	}
	e := newEnv(t)
	e.create(e.res("", "events"), event("a"))
	if id, _ := e.lease("/registry/events/default/a"); id != 0 {
		t.Fatalf("event has lease %x without EventTTL", id)
	}
}
