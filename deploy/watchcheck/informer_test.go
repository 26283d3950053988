package watchcheck

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// informer is a SharedInformerFactory's ConfigMap informer with its
// counting ListerWatcher.
type informer struct {
	name string
	lw   *CountingLW
	inf  cache.SharedIndexInformer
}

// startInformers starts two ConfigMap informers, the first with client-go's
// WatchListClient feature off (LIST then WATCH), the second with it on
// (a watch with sendInitialEvents=true).
func startInformers(ctx context.Context, t *testing.T, client func(agent string, protobuf bool, i int) kubernetes.Interface) []*informer {
	t.Helper()
	var out []*informer
	for i, watchList := range []bool{false, true} {
		name := "informer-list"
		if watchList {
			name = "informer-watchlist"
		}
		out = append(out, startInformer(ctx, t, name, client("watchcheck/"+name, true, i), watchList, nil))
	}
	return out
}

// startInformer starts a ConfigMap informer of cs, with client-go's
// WatchListClient feature as asked, handler (when not nil) added before it
// starts, and waits until it is synced. The feature is read when the
// reflector is made, so the gate may change once this returns.
func startInformer(ctx context.Context, t *testing.T, name string, cs kubernetes.Interface, watchList bool, handler cache.ResourceEventHandler) *informer {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
	lw := NewCountingLW(cs)
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.InformerFor(&corev1.ConfigMap{}, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(lw.ListerWatcher(), &corev1.ConfigMap{}, 0, cache.Indexers{})
	})
	if handler != nil {
		if _, err := inf.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%s: %v not synced", name, typ)
		}
	}
	n := lw.Counts()
	lists, watchLists := n.ListsOK, n.WatchListsOK
	if watchList && (watchLists != 1 || lists != 0) || !watchList && (lists != 1 || watchLists != 0) {
		t.Errorf("%s synced with %d LISTs and %d WatchLists", name, lists, watchLists)
	}
	return &informer{name: name, lw: lw, inf: inf}
}

// watches returns the informer's watch requests so far.
func (in *informer) watches() []WatchLog { return in.lw.Watches() }

// storeState is the informer's store as Objects by namespace/name.
func (in *informer) storeState() (map[string]*Object, error) {
	st, err := StoreState(in.inf.GetStore())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.name, err)
	}
	return st, nil
}
