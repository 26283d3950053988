package watchcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// countingLW is the ListerWatcher of a ConfigMap informer that counts its
// syncs — LISTs, and WatchList watches that reached the end of their
// initial events — and the 410s its watches got, with the newest revision
// the informer had seen when each came.
type countingLW struct {
	cs kubernetes.Interface

	mu          sync.Mutex // guards everything below
	lists       int        // LIST requests
	listsOK     int
	watchLists  int // watches with sendInitialEvents=true
	watchListOK int // ...that reached the initial-events-end bookmark
	watches     int
	seen        int64 // newest revision seen: list, events, bookmarks, watch requests
	expired     []informerExpiry
	log         []watchLog // every watch request, in order
}

// watchLog is one watch request of an informer and how its stream went.
type watchLog struct {
	From      string // resourceVersion asked for
	WatchList bool
	Err       error  // the request failed
	Events    int    // events delivered, bookmarks included
	Last      string // type of the last event
	LastRV    string // its resourceVersion (a Status: its code)
}

// informerExpiry is a 410 an informer's watch got.
type informerExpiry struct {
	At   time.Time
	Seen int64 // the newest revision the informer had then
}

func (c *countingLW) see(rv string) {
	if v, err := strconv.ParseInt(rv, 10, 64); err == nil && v > c.seen {
		c.seen = v
	}
}

func (c *countingLW) listerWatcher() cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			c.mu.Lock()
			c.lists++
			c.mu.Unlock()
			l, err := c.cs.CoreV1().ConfigMaps("").List(ctx, opts)
			if err == nil {
				c.mu.Lock()
				c.listsOK++
				c.see(l.ResourceVersion)
				c.mu.Unlock()
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			list := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			c.mu.Lock()
			c.watches++
			if list {
				c.watchLists++
			}
			if opts.ResourceVersion != "0" {
				c.see(opts.ResourceVersion)
			}
			idx := len(c.log)
			c.log = append(c.log, watchLog{From: opts.ResourceVersion, WatchList: list})
			c.mu.Unlock()
			w, err := c.cs.CoreV1().ConfigMaps("").Watch(ctx, opts)
			if err != nil {
				c.mu.Lock()
				c.log[idx].Err = err
				c.mu.Unlock()
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					c.mu.Lock()
					c.expired = append(c.expired, informerExpiry{At: time.Now(), Seen: c.seen})
					c.mu.Unlock()
				}
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				c.mu.Lock()
				defer c.mu.Unlock()
				l := &c.log[idx]
				l.Events++
				l.Last = string(ev.Type)
				switch o := ev.Object.(type) {
				case *corev1.ConfigMap:
					l.LastRV = o.ResourceVersion
					if ev.Type == watch.Bookmark && o.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
						c.watchListOK++
					}
					if ev.Type == watch.Bookmark || !list {
						c.see(o.ResourceVersion)
					}
				case *metav1.Status:
					l.LastRV = strconv.Itoa(int(o.Code))
					if o.Code == 410 {
						c.expired = append(c.expired, informerExpiry{At: time.Now(), Seen: c.seen})
					}
				}
				return ev, true
			}), nil
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c.cs)
}

// syncs returns the number of successful syncs (the first one and every
// relist).
func (c *countingLW) syncs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listsOK + c.watchListOK
}

// informer is a SharedInformerFactory's ConfigMap informer with its
// counting ListerWatcher.
type informer struct {
	name string
	lw   *countingLW
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
	lw := &countingLW{cs: cs}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.InformerFor(&corev1.ConfigMap{}, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(lw.listerWatcher(), &corev1.ConfigMap{}, 0, cache.Indexers{})
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
	lw.mu.Lock()
	lists, watchLists := lw.listsOK, lw.watchListOK
	lw.mu.Unlock()
	if watchList && (watchLists != 1 || lists != 0) || !watchList && (lists != 1 || watchLists != 0) {
		t.Errorf("%s synced with %d LISTs and %d WatchLists", name, lists, watchLists)
	}
	return &informer{name: name, lw: lw, inf: inf}
}

// watches returns the informer's watch requests so far.
func (in *informer) watches() []watchLog {
	in.lw.mu.Lock()
	defer in.lw.mu.Unlock()
	return append([]watchLog(nil), in.lw.log...)
}

// storeState is the informer's store as Objects by namespace/name.
func (in *informer) storeState() (map[string]*Object, error) {
	out := map[string]*Object{}
	for _, item := range in.inf.GetStore().List() {
		cm, ok := item.(*corev1.ConfigMap)
		if !ok {
			return nil, fmt.Errorf("%s: store holds %T", in.name, item)
		}
		o, err := ObjectOf(cm)
		if err != nil {
			return nil, err
		}
		out[o.Key()] = o
	}
	return out, nil
}

// diffStates describes how got differs from want, "" when it does not.
func diffStates(want, got map[string]*Object) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g := got[k]; g == nil {
			diffs = append(diffs, fmt.Sprintf("missing %s rv=%d", k, want[k].RV))
		} else if !sameObject(g, want[k]) {
			diffs = append(diffs, fmt.Sprintf("%s: rv=%d v=%s labels=%v, want rv=%d v=%s labels=%v", k, g.RV, g.Data, g.Labels, want[k].RV, want[k].Data, want[k].Labels))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if want[k] == nil {
			diffs = append(diffs, fmt.Sprintf("extra %s rv=%d", k, got[k].RV))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	if len(diffs) > 8 {
		diffs = append(diffs[:8], fmt.Sprintf("... %d more", len(diffs)-8))
	}
	return fmt.Sprint(len(diffs), " differences: ", diffs)
}
