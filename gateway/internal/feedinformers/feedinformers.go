// Package feedinformers is a client-go SharedInformerFactory whose
// informers are filled by a gateway feed (feed.Sink) instead of their own
// list and watch: upstream code (admission plugins, the API Priority and
// Fairness controller) takes its listers and event handlers from it as
// from kube-apiserver's informers, and the caller feeds each resource
// asked for (Sinks).
package feedinformers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/tools/cache"

	"github.com/kgate/kgate/gateway/internal/feed"
)

// errNotRunning is returned by what the feed informers do not do: they
// are filled by the gateway's feed and never run their own reflector.
var errNotRunning = errors.New("feedinformers: informers are filled by the gateway's feed, not by their own reflector")

// Factory is a client-go SharedInformerFactory whose informers are
// filled by a feed: one informer per type, asked for by upstream code,
// then fed by the caller (Sinks).
type Factory struct {
	kinds func(runtime.Object) (schema.GroupVersionResource, error)

	mu        sync.Mutex // guards informers and err
	informers map[reflect.Type]*informer
	err       error // the first type that could not be resolved
}

// NewFactory makes a Factory; kinds names the resource of an object of
// each type asked for.
func NewFactory(kinds func(runtime.Object) (schema.GroupVersionResource, error)) *Factory {
	return &Factory{kinds: kinds, informers: map[reflect.Type]*informer{}}
}

// InformerFor implements internalinterfaces.SharedInformerFactory: one
// feed informer per type, whatever newFunc would build.
func (f *Factory) InformerFor(obj runtime.Object, _ internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := reflect.TypeOf(obj)
	if inf, ok := f.informers[t]; ok {
		return inf
	}
	gvr, err := f.kinds(obj)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("cannot make an informer for %T: %w", obj, err)
	}
	inf := newInformer(gvr)
	f.informers[t] = inf
	return inf
}

// Sinks returns the informers asked for so far, by resource: the feed
// must fill each. It fails when a type asked for has no resource.
func (f *Factory) Sinks() (map[schema.GroupVersionResource]feed.Sink, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make(map[schema.GroupVersionResource]feed.Sink, len(f.informers))
	for _, inf := range f.informers {
		out[inf.gvr] = inf
	}
	return out, nil
}

// InformerName implements internalinterfaces.SharedInformerFactory: nil,
// no informer metrics (the feed has its own).
func (f *Factory) InformerName() *cache.InformerName { return nil }

// Start, Shutdown: the feed runs the informers.
func (f *Factory) Start(<-chan struct{})            {}
func (f *Factory) StartWithContext(context.Context) {}
func (f *Factory) Shutdown()                        {}

// WaitForCacheSync implements informers.SharedInformerFactory.
func (f *Factory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[reflect.Type]bool{}
	for t, inf := range f.informers {
		select {
		case <-inf.synced:
			out[t] = true
		case <-stop:
			out[t] = false
		}
	}
	return out
}

// WaitForCacheSyncWithContext implements informers.SharedInformerFactory.
func (f *Factory) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	res := cache.SyncResult{Synced: f.WaitForCacheSync(ctx.Done())}
	if ctx.Err() != nil {
		res.Err = ctx.Err()
	}
	return res
}

// ForResource implements informers.SharedInformerFactory; nothing kgate
// runs uses generic informers.
func (f *Factory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	return nil, fmt.Errorf("no generic informer for %s: %w", gvr, errNotRunning)
}

// The groups, each reading its informers through f.
func (f *Factory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, "", nil)
}
func (f *Factory) Internal() apiserverinternal.Interface { return apiserverinternal.New(f, "", nil) }
func (f *Factory) Apps() apps.Interface                  { return apps.New(f, "", nil) }
func (f *Factory) Autoscaling() autoscaling.Interface    { return autoscaling.New(f, "", nil) }
func (f *Factory) Batch() batch.Interface                { return batch.New(f, "", nil) }
func (f *Factory) Certificates() certificates.Interface  { return certificates.New(f, "", nil) }
func (f *Factory) Coordination() coordination.Interface  { return coordination.New(f, "", nil) }
func (f *Factory) Core() core.Interface                  { return core.New(f, "", nil) }
func (f *Factory) Discovery() discovery.Interface        { return discovery.New(f, "", nil) }
func (f *Factory) Events() events.Interface              { return events.New(f, "", nil) }
func (f *Factory) Extensions() extensions.Interface      { return extensions.New(f, "", nil) }
func (f *Factory) Flowcontrol() flowcontrol.Interface    { return flowcontrol.New(f, "", nil) }
func (f *Factory) Lifecycle() lifecycle.Interface        { return lifecycle.New(f, "", nil) }
func (f *Factory) Networking() networking.Interface      { return networking.New(f, "", nil) }
func (f *Factory) Node() node.Interface                  { return node.New(f, "", nil) }
func (f *Factory) Policy() policy.Interface              { return policy.New(f, "", nil) }
func (f *Factory) Rbac() rbac.Interface                  { return rbac.New(f, "", nil) }
func (f *Factory) Resource() resource.Interface          { return resource.New(f, "", nil) }
func (f *Factory) Scheduling() scheduling.Interface      { return scheduling.New(f, "", nil) }
func (f *Factory) Storage() storage.Interface            { return storage.New(f, "", nil) }
func (f *Factory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, "", nil)
}

var _ informers.SharedInformerFactory = (*Factory)(nil)

// informer is a SharedIndexInformer over an indexer the feed fills (it
// is the feed's Sink of its resource): synced once the feed listed the
// resource. Its event handlers are called from the feed's goroutine, in
// the order of the changes, as a client-go informer calls them from its
// own; they must not block for long.
type informer struct {
	gvr     schema.GroupVersionResource
	indexer cache.Indexer

	once   sync.Once
	synced chan struct{} // closed by the first Replace

	mu       sync.Mutex // guards handlers; held while they are called
	handlers []*registration
}

func newInformer(gvr schema.GroupVersionResource) *informer {
	return &informer{
		gvr:     gvr,
		indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		synced:  make(chan struct{}),
	}
}

// Replace implements feed.Sink: the handlers see what the list added,
// changed (by resourceVersion) and removed.
func (i *informer) Replace(objs []runtime.Object) {
	i.mu.Lock()
	defer i.mu.Unlock()
	old := map[string]any{}
	if len(i.handlers) > 0 {
		for _, o := range i.indexer.List() {
			if k, err := cache.MetaNamespaceKeyFunc(o); err == nil {
				old[k] = o
			}
		}
	}
	items := make([]any, len(objs))
	for n, o := range objs {
		items[n] = o
	}
	// The indexer's Replace only fails on a key error, which the feed's
	// objects (with names) cannot cause.
	_ = i.indexer.Replace(items, "")
	first := !i.HasSynced()
	// Synced once the handlers have seen the first list.
	defer i.once.Do(func() { close(i.synced) })
	if len(i.handlers) == 0 {
		return
	}
	for _, o := range objs {
		k, err := cache.MetaNamespaceKeyFunc(o)
		if err != nil {
			continue
		}
		prev, ok := old[k]
		delete(old, k)
		switch {
		case !ok:
			i.each(func(h cache.ResourceEventHandler) { h.OnAdd(o, first) })
		case resourceVersion(prev) != resourceVersion(o):
			i.each(func(h cache.ResourceEventHandler) { h.OnUpdate(prev, o) })
		}
	}
	for k, o := range old {
		i.each(func(h cache.ResourceEventHandler) {
			h.OnDelete(cache.DeletedFinalStateUnknown{Key: k, Obj: o})
		})
	}
}

// Upsert implements feed.Sink.
func (i *informer) Upsert(obj runtime.Object) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	prev, exists, _ := i.indexer.Get(obj)
	if err := i.indexer.Update(obj); err != nil {
		return err
	}
	if exists {
		i.each(func(h cache.ResourceEventHandler) { h.OnUpdate(prev, obj) })
	} else {
		i.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, false) })
	}
	return nil
}

// Delete implements feed.Sink.
func (i *informer) Delete(obj runtime.Object) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.indexer.Delete(obj); err != nil {
		return err
	}
	i.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
	return nil
}

// each calls f with every handler; i.mu is held.
func (i *informer) each(f func(cache.ResourceEventHandler)) {
	for _, r := range i.handlers {
		f(r.handler)
	}
}

func resourceVersion(o any) string {
	if m, ok := o.(interface{ GetResourceVersion() string }); ok {
		return m.GetResourceVersion()
	}
	return ""
}

// GetIndexer implements cache.SharedIndexInformer.
func (i *informer) GetIndexer() cache.Indexer { return i.indexer }

// GetStore implements cache.SharedInformer.
func (i *informer) GetStore() cache.Store { return i.indexer }

// AddIndexers implements cache.SharedIndexInformer.
func (i *informer) AddIndexers(indexers cache.Indexers) error { return i.indexer.AddIndexers(indexers) }

// HasSynced implements cache.SharedInformer.
func (i *informer) HasSynced() bool {
	select {
	case <-i.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker implements cache.SharedInformer.
func (i *informer) HasSyncedChecker() cache.DoneChecker { return doneChecker{i.gvr.String(), i.synced} }

// LastSyncResourceVersion implements cache.SharedInformer.
func (i *informer) LastSyncResourceVersion() string { return "" }

// Run and RunWithContext wait: the feed fills the informer.
func (i *informer) Run(stop <-chan struct{})           { <-stop }
func (i *informer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// IsStopped implements cache.SharedInformer.
func (i *informer) IsStopped() bool { return false }

// GetController implements cache.SharedInformer: there is none.
func (i *informer) GetController() cache.Controller { return nil }

// AddEventHandler implements cache.SharedInformer: h first sees every
// object held (OnAdd, isInInitialList while the informer has not
// synced), then each change the feed brings. Resync periods are not
// honoured: the feed's objects change only when they change.
func (i *informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	r := &registration{handler: h, synced: i.synced}
	initial := !i.HasSynced()
	for _, o := range i.indexer.List() {
		h.OnAdd(o, initial)
	}
	i.handlers = append(i.handlers, r)
	return r, nil
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer (no
// resyncs, see AddEventHandler).
func (i *informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// AddEventHandlerWithOptions implements cache.SharedInformer (no
// resyncs, see AddEventHandler).
func (i *informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}

// RemoveEventHandler implements cache.SharedInformer.
func (i *informer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	for n, r := range i.handlers {
		if r == handle {
			i.handlers = append(i.handlers[:n:n], i.handlers[n+1:]...)
			return nil
		}
	}
	return nil
}

func (i *informer) SetWatchErrorHandler(cache.WatchErrorHandler) error { return errNotRunning }
func (i *informer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return errNotRunning
}
func (i *informer) SetTransform(cache.TransformFunc) error { return errNotRunning }

var _ cache.SharedIndexInformer = (*informer)(nil)

// registration is one handler's cache.ResourceEventHandlerRegistration:
// synced with its informer, which closes synced once its handlers have
// seen the first list.
type registration struct {
	handler cache.ResourceEventHandler
	synced  chan struct{}
}

func (r *registration) HasSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

func (r *registration) HasSyncedChecker() cache.DoneChecker { return doneChecker{"handler", r.synced} }

// doneChecker is a cache.DoneChecker over a channel.
type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }
