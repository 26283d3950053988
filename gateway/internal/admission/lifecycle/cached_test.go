package lifecycle_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/lifecycle"
	"github.com/kgate/kgate/storage/registry"
)

// countingLive is etcd: it counts its reads.
type countingLive struct {
	namespaces
	reads int
}

func (c *countingLive) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	c.reads++
	return c.namespaces.Namespace(ctx, name)
}

func nsWithPhase(name string, phase corev1.NamespacePhase) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
}

func TestCachedReadsLiveOnlyWhenItMust(t *testing.T) {
	cache := namespaces{
		"a":    nsWithPhase("a", corev1.NamespaceActive),
		"b":    nsWithPhase("b", corev1.NamespaceActive),
		"term": nsWithPhase("term", corev1.NamespaceTerminating),
	}
	live := &countingLive{namespaces: namespaces{
		"a":    nsWithPhase("a", corev1.NamespaceTerminating), // the cache lags
		"b":    nsWithPhase("b", corev1.NamespaceActive),
		"new":  nsWithPhase("new", corev1.NamespaceActive),
		"term": nsWithPhase("term", corev1.NamespaceTerminating),
	}}
	now := time.Unix(1000, 0)
	c := lifecycle.NewCached(func(name string) (*corev1.Namespace, bool) {
		ns, ok := cache[name]
		return ns, ok
	}, live, func() time.Time { return now })
	plugin := lifecycle.Plugin{Namespaces: c}
	nsRes := &registry.Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}
	ctx := context.Background()

	type step struct {
		name      string
		do        func()
		read      string
		wantPhase corev1.NamespacePhase // "" = not found
		wantLive  int                   // live reads so far
	}
	deleteNS := func(name string) func() {
		return func() {
			if err := plugin.Admit(ctx, &admission.Attributes{Resource: nsRes, Operation: admission.Delete, Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []step{
		{name: "a cached namespace costs no etcd read", read: "a", wantPhase: corev1.NamespaceActive, wantLive: 0},
		{name: "one the cache has not is read live", read: "new", wantPhase: corev1.NamespaceActive, wantLive: 1},
		{name: "one in neither is not found, read live", read: "gone", wantLive: 2},
		{name: "after a delete through this plugin it is read live", do: deleteNS("a"), read: "a", wantPhase: corev1.NamespaceTerminating, wantLive: 3},
		{name: "others stay cached", read: "b", wantPhase: corev1.NamespaceActive, wantLive: 3},
		{name: "a cached terminating namespace needs no live read", do: deleteNS("term"), read: "term", wantPhase: corev1.NamespaceTerminating, wantLive: 3},
		{name: "within the TTL still live", do: func() { now = now.Add(lifecycle.ForceLiveLookupTTL - time.Second) }, read: "a", wantPhase: corev1.NamespaceTerminating, wantLive: 4},
		{name: "deleted again: the TTL starts over", do: deleteNS("a"), read: "a", wantPhase: corev1.NamespaceTerminating, wantLive: 5},
		{name: "past the first TTL, within the second", do: func() { now = now.Add(2 * time.Second) }, read: "a", wantPhase: corev1.NamespaceTerminating, wantLive: 6},
		{name: "past the TTL the cache answers again", do: func() { now = now.Add(lifecycle.ForceLiveLookupTTL) }, read: "a", wantPhase: corev1.NamespaceActive, wantLive: 6},
	} {
		if s.do != nil {
			s.do()
		}
		ns, err := c.Namespace(ctx, s.read)
		var phase corev1.NamespacePhase
		if err == nil {
			phase = ns.Status.Phase
		} else if err != lifecycle.ErrNotFound {
			t.Fatalf("%s: %v", s.name, err)
		}
		if phase != s.wantPhase || live.reads != s.wantLive {
			t.Errorf("%s: phase %q after %d live reads, want %q after %d", s.name, phase, live.reads, s.wantPhase, s.wantLive)
		}
	}
}
