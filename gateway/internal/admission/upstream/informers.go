package upstream

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
)

// errNotRunning is returned by what the feed informers do not do: they
// are filled by the gateway's feed, never run their own reflector, and
// call no event handlers (no plugin kgate runs registers one).
var errNotRunning = errors.New("upstream: feed informers are filled by the gateway's feed and call no event handlers")

// factory is a client-go SharedInformerFactory whose informers are
// filled by the gateway's feed: upstream plugins take their listers from
// it as from kube-apiserver's, and the chain then feeds each resource
// they asked for (Sinks).
type factory struct {
	kinds func(runtime.Object) (schema.GroupVersionResource, error)

	mu        sync.Mutex // guards informers and err
	informers map[reflect.Type]*informer
	err       error // the first type that could not be resolved
}

func newFactory(kinds func(runtime.Object) (schema.GroupVersionResource, error)) *factory {
	return &factory{kinds: kinds, informers: map[reflect.Type]*informer{}}
}

// InformerFor implements internalinterfaces.SharedInformerFactory: one
// feed informer per type, whatever newFunc would build.
func (f *factory) InformerFor(obj runtime.Object, _ internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
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

// sinks returns the informers plugins asked for, by resource.
func (f *factory) sinks() (map[schema.GroupVersionResource]*informer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := make(map[schema.GroupVersionResource]*informer, len(f.informers))
	for _, inf := range f.informers {
		out[inf.gvr] = inf
	}
	return out, nil
}

// InformerName implements internalinterfaces.SharedInformerFactory: nil,
// no informer metrics (the feed has its own).
func (f *factory) InformerName() *cache.InformerName { return nil }

// Start, Shutdown: the feed runs the informers.
func (f *factory) Start(<-chan struct{})            {}
func (f *factory) StartWithContext(context.Context) {}
func (f *factory) Shutdown()                        {}

// WaitForCacheSync implements informers.SharedInformerFactory.
func (f *factory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
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
func (f *factory) WaitForCacheSyncWithContext(ctx context.Context) cache.SyncResult {
	res := cache.SyncResult{Synced: f.WaitForCacheSync(ctx.Done())}
	if ctx.Err() != nil {
		res.Err = ctx.Err()
	}
	return res
}

// ForResource implements informers.SharedInformerFactory; no plugin kgate
// runs uses generic informers.
func (f *factory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	return nil, fmt.Errorf("no generic informer for %s: %w", gvr, errNotRunning)
}

// The groups, each reading its informers through f.
func (f *factory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, "", nil)
}
func (f *factory) Internal() apiserverinternal.Interface { return apiserverinternal.New(f, "", nil) }
func (f *factory) Apps() apps.Interface                  { return apps.New(f, "", nil) }
func (f *factory) Autoscaling() autoscaling.Interface    { return autoscaling.New(f, "", nil) }
func (f *factory) Batch() batch.Interface                { return batch.New(f, "", nil) }
func (f *factory) Certificates() certificates.Interface  { return certificates.New(f, "", nil) }
func (f *factory) Coordination() coordination.Interface  { return coordination.New(f, "", nil) }
func (f *factory) Core() core.Interface                  { return core.New(f, "", nil) }
func (f *factory) Discovery() discovery.Interface        { return discovery.New(f, "", nil) }
func (f *factory) Events() events.Interface              { return events.New(f, "", nil) }
func (f *factory) Extensions() extensions.Interface      { return extensions.New(f, "", nil) }
func (f *factory) Flowcontrol() flowcontrol.Interface    { return flowcontrol.New(f, "", nil) }
func (f *factory) Lifecycle() lifecycle.Interface        { return lifecycle.New(f, "", nil) }
func (f *factory) Networking() networking.Interface      { return networking.New(f, "", nil) }
func (f *factory) Node() node.Interface                  { return node.New(f, "", nil) }
func (f *factory) Policy() policy.Interface              { return policy.New(f, "", nil) }
func (f *factory) Rbac() rbac.Interface                  { return rbac.New(f, "", nil) }
func (f *factory) Resource() resource.Interface          { return resource.New(f, "", nil) }
func (f *factory) Scheduling() scheduling.Interface      { return scheduling.New(f, "", nil) }
func (f *factory) Storage() storage.Interface            { return storage.New(f, "", nil) }
func (f *factory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, "", nil)
}

var _ informers.SharedInformerFactory = (*factory)(nil)

// informer is a SharedIndexInformer over an indexer the feed fills (it
// is the feed's Sink of its resource): synced once the feed listed the
// resource.
type informer struct {
	gvr     schema.GroupVersionResource
	indexer cache.Indexer

	once   sync.Once
	synced chan struct{} // closed by the first Replace
}

func newInformer(gvr schema.GroupVersionResource) *informer {
	return &informer{
		gvr:     gvr,
		indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		synced:  make(chan struct{}),
	}
}

// Replace implements feed.Sink.
func (i *informer) Replace(objs []runtime.Object) {
	items := make([]any, len(objs))
	for n, o := range objs {
		items[n] = o
	}
	// The indexer's Replace only fails on a key error, which the feed's
	// objects (with names) cannot cause.
	_ = i.indexer.Replace(items, "")
	i.once.Do(func() { close(i.synced) })
}

// Upsert implements feed.Sink.
func (i *informer) Upsert(obj runtime.Object) error { return i.indexer.Update(obj) }

// Delete implements feed.Sink.
func (i *informer) Delete(obj runtime.Object) error { return i.indexer.Delete(obj) }

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
func (i *informer) HasSyncedChecker() cache.DoneChecker { return doneChecker{i} }

// LastSyncResourceVersion implements cache.SharedInformer.
func (i *informer) LastSyncResourceVersion() string { return "" }

// Run and RunWithContext wait: the feed fills the informer.
func (i *informer) Run(stop <-chan struct{})           { <-stop }
func (i *informer) RunWithContext(ctx context.Context) { <-ctx.Done() }

// IsStopped implements cache.SharedInformer.
func (i *informer) IsStopped() bool { return false }

// GetController implements cache.SharedInformer: there is none.
func (i *informer) GetController() cache.Controller { return nil }

// AddEventHandler and its variants implement cache.SharedInformer: not
// supported (errNotRunning).
func (i *informer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, errNotRunning
}
func (i *informer) AddEventHandlerWithResyncPeriod(cache.ResourceEventHandler, time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return nil, errNotRunning
}
func (i *informer) AddEventHandlerWithOptions(cache.ResourceEventHandler, cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return nil, errNotRunning
}
func (i *informer) RemoveEventHandler(cache.ResourceEventHandlerRegistration) error {
	return errNotRunning
}
func (i *informer) SetWatchErrorHandler(cache.WatchErrorHandler) error { return errNotRunning }
func (i *informer) SetWatchErrorHandlerWithContext(cache.WatchErrorHandlerWithContext) error {
	return errNotRunning
}
func (i *informer) SetTransform(cache.TransformFunc) error { return errNotRunning }

var _ cache.SharedIndexInformer = (*informer)(nil)

// doneChecker is an informer's cache.DoneChecker.
type doneChecker struct{ i *informer }

func (d doneChecker) Name() string          { return d.i.gvr.String() }
func (d doneChecker) Done() <-chan struct{} { return d.i.synced }
