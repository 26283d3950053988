package watchcheck

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CountingLW is the ListerWatcher of a ConfigMap informer that counts its
// syncs — LISTs, and WatchList watches that reached the end of their
// initial events — and the 410s its watches got, with the newest revision
// the informer had seen when each came. A sync after the first is a
// relist.
type CountingLW struct {
	list   func(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error)
	watch  func(context.Context, metav1.ListOptions) (watch.Interface, error)
	client any // asked whether it supports WatchList

	mu     sync.Mutex // guards everything below
	counts LWCounts
	seen   int64       // newest revision seen: list, events, bookmarks, watch requests
	syncs  []time.Time // when each sync completed
	expiry []InformerExpiry
	log    []WatchLog // every watch request, in order
}

// LWCounts are a CountingLW's requests.
type LWCounts struct {
	Lists, ListsOK int // LIST requests, and those that succeeded
	// WatchLists are watches with sendInitialEvents=true; WatchListsOK
	// those that reached the initial-events-end bookmark.
	WatchLists, WatchListsOK int
	Watches                  int
}

// WatchLog is one watch request of an informer and how its stream went.
type WatchLog struct {
	From      string // resourceVersion asked for
	WatchList bool
	Err       error  // the request failed
	Events    int    // events delivered, bookmarks included
	Last      string // type of the last event
	LastRV    string // its resourceVersion (a Status: its code)
}

// InformerExpiry is a 410 an informer's watch got.
type InformerExpiry struct {
	At   time.Time
	Seen int64 // the newest revision the informer had then
}

// NewCountingLW counts the ConfigMaps of every namespace of cs.
func NewCountingLW(cs kubernetes.Interface) *CountingLW {
	return NewCountingLWFuncs(
		func(ctx context.Context, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
			return cs.CoreV1().ConfigMaps("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ConfigMaps("").Watch(ctx, o)
		}, cs)
}

// NewCountingLWFuncs counts the ConfigMaps list and watch return; client is
// asked, as client-go does, whether it supports WatchList.
func NewCountingLWFuncs(list func(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error),
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error), client any) *CountingLW {
	return &CountingLW{list: list, watch: watch, client: client}
}

func (c *CountingLW) see(rv string) {
	if v, err := strconv.ParseInt(rv, 10, 64); err == nil && v > c.seen {
		c.seen = v
	}
}

// ListerWatcher is what the informer is made with.
func (c *CountingLW) ListerWatcher() cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			c.mu.Lock()
			c.counts.Lists++
			c.mu.Unlock()
			l, err := c.list(ctx, opts)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			c.counts.ListsOK++
			c.syncs = append(c.syncs, time.Now())
			c.see(l.ResourceVersion)
			c.mu.Unlock()
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			list := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			c.mu.Lock()
			c.counts.Watches++
			if list {
				c.counts.WatchLists++
			}
			if opts.ResourceVersion != "0" {
				c.see(opts.ResourceVersion)
			}
			idx := len(c.log)
			c.log = append(c.log, WatchLog{From: opts.ResourceVersion, WatchList: list})
			c.mu.Unlock()
			w, err := c.watch(ctx, opts)
			if err != nil {
				c.mu.Lock()
				c.log[idx].Err = err
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					c.expiry = append(c.expiry, InformerExpiry{At: time.Now(), Seen: c.seen})
				}
				c.mu.Unlock()
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
						c.counts.WatchListsOK++
						c.syncs = append(c.syncs, time.Now())
					}
					if ev.Type == watch.Bookmark || !list {
						c.see(o.ResourceVersion)
					}
				case *metav1.Status:
					l.LastRV = strconv.Itoa(int(o.Code))
					if o.Code == 410 {
						c.expiry = append(c.expiry, InformerExpiry{At: time.Now(), Seen: c.seen})
					}
				}
				return ev, true
			}), nil
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c.client)
}

// Counts returns the requests so far.
func (c *CountingLW) Counts() LWCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts
}

// Syncs returns when each successful sync completed: the first one and
// every relist.
func (c *CountingLW) Syncs() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.syncs)
}

// Expired returns the 410s the watches got.
func (c *CountingLW) Expired() []InformerExpiry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.expiry)
}

// Watches returns the watch requests so far.
func (c *CountingLW) Watches() []WatchLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// StoreState is an informer's store of ConfigMaps as Objects by
// namespace/name.
func StoreState(store cache.Store) (map[string]*Object, error) {
	out := map[string]*Object{}
	for _, item := range store.List() {
		cm, ok := item.(*corev1.ConfigMap)
		if !ok {
			return nil, fmt.Errorf("store holds %T", item)
		}
		o, err := ObjectOf(cm)
		if err != nil {
			return nil, err
		}
		out[o.Key()] = o
	}
	return out, nil
}

// DiffStates describes how got differs from want, "" when it does not.
func DiffStates(want, got map[string]*Object) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g := got[k]; g == nil {
			diffs = append(diffs, fmt.Sprintf("missing %s rv=%d", k, want[k].RV))
		} else if !SameObject(g, want[k]) {
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

// SameObject: a and b are the same version of the same object.
func SameObject(a, b *Object) bool {
	return a.Key() == b.Key() && a.RV == b.RV && a.Data == b.Data && maps.Equal(a.Labels, b.Labels)
}
