package lifecycle

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// ForceLiveLookupTTL is how long a namespace this gateway was asked to
// delete is read live while the cache still shows it active (upstream's
// forceLiveLookupTTL).
const ForceLiveLookupTTL = 30 * time.Second

// DeleteObserver is told by the plugin of each namespace delete it admits.
type DeleteObserver interface {
	Deleting(name string)
}

// Cached reads namespaces as upstream's plugins read them: from an
// informer's cache (the gateway's feed), and live from etcd when the
// cache has not the namespace (created a moment ago, perhaps through
// another gateway) or still shows active a namespace this gateway was
// asked to delete lately (upstream NamespaceLifecycle's force-live-lookup
// cache). A write then costs no etcd read for its namespace.
type Cached struct {
	cache func(name string) (*corev1.Namespace, bool)
	live  Namespaces
	// deleting holds the names read live for a while (upstream's
	// forceLiveLookupCache, of the same size).
	deleting *utilcache.LRUExpireCache
}

// clockFunc is a clock for utilcache.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// NewCached reads through cache, then live. now is the clock (nil:
// time.Now).
func NewCached(cache func(name string) (*corev1.Namespace, bool), live Namespaces, now func() time.Time) *Cached {
	if now == nil {
		now = time.Now
	}
	return &Cached{cache: cache, live: live, deleting: utilcache.NewLRUExpireCacheWithClock(100, clockFunc(now))}
}

// Namespace implements Namespaces.
func (c *Cached) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, ok := c.cache(name)
	if !ok {
		return c.live.Namespace(ctx, name)
	}
	if ns.Status.Phase != corev1.NamespaceTerminating && ns.DeletionTimestamp == nil {
		if _, forced := c.deleting.Get(name); forced {
			return c.live.Namespace(ctx, name)
		}
	}
	return ns, nil
}

// Deleting implements DeleteObserver.
func (c *Cached) Deleting(name string) { c.deleting.Add(name, true, ForceLiveLookupTTL) }
