package lifecycle

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	now   func() time.Time

	mu       sync.Mutex
	deleting map[string]time.Time // name → read live until
	order    []deletion           // the same, oldest first
}

type deletion struct {
	name  string
	until time.Time
}

// NewCached reads through cache, then live. now is the clock (nil:
// time.Now).
func NewCached(cache func(name string) (*corev1.Namespace, bool), live Namespaces, now func() time.Time) *Cached {
	if now == nil {
		now = time.Now
	}
	return &Cached{cache: cache, live: live, now: now, deleting: map[string]time.Time{}}
}

// Namespace implements Namespaces.
func (c *Cached) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, ok := c.cache(name)
	if !ok || (ns.Status.Phase != corev1.NamespaceTerminating && ns.DeletionTimestamp == nil && c.forced(name)) {
		return c.live.Namespace(ctx, name)
	}
	return ns, nil
}

// Deleting implements DeleteObserver.
func (c *Cached) Deleting(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	until := c.now().Add(ForceLiveLookupTTL)
	c.deleting[name] = until
	c.order = append(c.order, deletion{name, until})
}

// forced reports whether name is read live.
func (c *Cached) forced(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.deleting) == 0 {
		return false
	}
	c.expire()
	_, ok := c.deleting[name]
	return ok
}

// expire forgets deletions past their time; c.mu is held.
func (c *Cached) expire() {
	now := c.now()
	n := 0
	for _, d := range c.order {
		if d.until.After(now) {
			break
		}
		if c.deleting[d.name].Equal(d.until) {
			delete(c.deleting, d.name)
		}
		n++
	}
	c.order = c.order[n:]
}
