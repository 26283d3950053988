// Package feed is the gateway's informer: it lists resources from the
// cache nodes, follows each through the watch hub from the list's
// revision, and lists again when the watch falls out of the window (410),
// as kube-apiserver's informers do. What it reads goes into a Sink per
// resource: a Store, for what admission plugins read on each write
// (LimitRanges, ResourceQuotas, webhook configurations, policies and
// their bindings), or a sink of the caller's (rbacfeed's RBAC authorizer).
package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Lister reads pages of a range from the cache nodes (route.Router).
type Lister interface {
	List(ctx context.Context, rangeID string, o client.ListOptions) (*client.List, error)
}

// Watcher follows ranges (watchhub.Hub).
type Watcher interface {
	WatchRanges(rangeIDs []string, since int64, filter watchhub.Filter) (watchhub.Stream, error)
}

// Revisions tells etcd's current revision, so the first list is fresh.
type Revisions interface {
	Current(ctx context.Context) (int64, error)
}

// Sink takes what a feed reads of one resource: every object after each
// list (the first and each relist), then each change. The feed calls a
// sink from one goroutine; a sink shared by several resources is called
// from several. Errors are logged and the feed goes on.
type Sink interface {
	Replace(objs []runtime.Object)
	Upsert(obj runtime.Object) error
	Delete(obj runtime.Object) error
}

// Skipper is a Sink that may tell from an object's served JSON that a
// change cannot concern it, sparing the feed the object's decode (most
// of a cluster's Pod changes are status updates the Node authorizer's
// graph does not see). The feed asks before each Upsert, from the one
// goroutine that calls the sink.
type Skipper interface {
	Skip(namespace, name string, json []byte) bool
}

// Config configures a Feed.
type Config struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Cache     Lister
	Hub       Watcher
	Revisions Revisions
	Codec     *codec.Codec
	// Resources are the resources fed, each into its own Store.
	Resources []schema.GroupVersionResource
	// Sinks are the resources fed into sinks of the caller's.
	Sinks  map[schema.GroupVersionResource]Sink
	Logger *slog.Logger
	// Backoff is the pause after a failed list or watch. Default 1s.
	Backoff time.Duration
	// PageSize of the lists. Default 500.
	PageSize int64
}

// Feed follows resources into sinks. Start begins, Close ends.
type Feed struct {
	cfg     Config
	sources []*source
	stores  map[schema.GroupVersionResource]*Store

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	unsynced atomic.Int32  // sources not listed yet
	synced   chan struct{} // closed once every source was listed
	relists  atomic.Int64
}

// source is one resource followed into its sink.
type source struct {
	res      *registry.Resource
	rangeIDs []string
	sink     Sink
}

// New checks cfg and finds the ranges of the resources.
func New(cfg Config) (*Feed, error) {
	if cfg.Registry == nil || cfg.Ranges == nil || cfg.Cache == nil || cfg.Hub == nil || cfg.Revisions == nil ||
		cfg.Codec == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make feed: every dependency is required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	f := &Feed{cfg: cfg, stores: map[schema.GroupVersionResource]*Store{}, synced: make(chan struct{})}
	sinks := make(map[schema.GroupVersionResource]Sink, len(cfg.Resources)+len(cfg.Sinks))
	for _, gvr := range cfg.Resources {
		s := NewStore()
		f.stores[gvr], sinks[gvr] = s, s
	}
	for gvr, sink := range cfg.Sinks {
		if _, dup := sinks[gvr]; dup || sink == nil {
			return nil, fmt.Errorf("cannot make feed: %s needs exactly one sink", gvr)
		}
		sinks[gvr] = sink
	}
	for gvr, sink := range sinks {
		res, ok := cfg.Registry.Lookup(gvr)
		if !ok {
			return nil, fmt.Errorf("cannot make feed: %s is not registered", gvr)
		}
		var ids []string
		for _, rng := range cfg.Ranges.Current().Intersecting(res.ListPrefix("")) {
			ids = append(ids, rng.ID)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("cannot make feed: no range holds %s", gvr.Resource)
		}
		f.sources = append(f.sources, &source{res: res, rangeIDs: ids, sink: sink})
	}
	f.unsynced.Store(int32(len(f.sources)))
	if len(f.sources) == 0 {
		close(f.synced)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

// Store returns the store of gvr, nil if gvr is not fed.
func (f *Feed) Store(gvr schema.GroupVersionResource) *Store { return f.stores[gvr] }

// Start starts following the resources; call it once.
func (f *Feed) Start() {
	for _, s := range f.sources {
		f.wg.Go(func() { f.run(s) })
	}
}

// Close stops the feed and waits for it.
func (f *Feed) Close() error {
	f.cancel()
	f.wg.Wait()
	return nil
}

// Synced reports whether every resource was listed once: from then on
// every sink holds all of its resource (and follows changes).
func (f *Feed) Synced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// Ready is nil once Synced.
func (f *Feed) Ready(context.Context) error {
	if !f.Synced() {
		return errors.New("feed: resources not synced yet")
	}
	return nil
}

// WaitSynced blocks until every resource was listed once, or ctx ends.
func (f *Feed) WaitSynced(ctx context.Context) error {
	select {
	case <-f.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Relists counts the lists after the first of each resource (watches
// that fell behind).
func (f *Feed) Relists() int64 { return f.relists.Load() }

// run lists s and follows it until the feed closes.
func (f *Feed) run(s *source) {
	log := f.cfg.Logger.With("resource", s.res.Resource)
	first := true
	for f.ctx.Err() == nil {
		rev, err := f.list(s)
		if err != nil {
			if f.ctx.Err() == nil {
				log.Warn("cannot list", "err", err)
				f.pause()
			}
			continue
		}
		if first {
			first = false
			if f.unsynced.Add(-1) == 0 {
				close(f.synced)
			}
		} else {
			f.relists.Add(1)
		}
		for f.ctx.Err() == nil {
			var err error
			rev, err = f.follow(s, rev)
			if f.ctx.Err() != nil {
				return
			}
			if errors.Is(err, storage.ErrCompacted) {
				log.Info("watch fell behind the window; listing again", "err", err)
				break
			}
			log.Warn("watch failed; watching again", "from", rev, "err", err)
			f.pause()
		}
	}
}

func (f *Feed) pause() {
	select {
	case <-time.After(f.cfg.Backoff):
	case <-f.ctx.Done():
	}
}

// list reads every object of s at one revision, consistent with etcd,
// replaces them in s's sink and returns the revision.
func (f *Feed) list(s *source) (int64, error) {
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	cur, err := f.cfg.Revisions.Current(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot learn the current revision: %w", err)
	}
	read := client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}
	prefix := s.res.ListPrefix("")
	var objs []runtime.Object
	var rev int64
	for _, id := range s.rangeIDs {
		cont := ""
		for {
			page, err := f.cfg.Cache.List(ctx, id, client.ListOptions{Read: read, Prefix: prefix, Limit: f.cfg.PageSize, Continue: cont, Format: client.JSON})
			if err != nil {
				return 0, fmt.Errorf("cannot list %s: %w", s.res.Resource, err)
			}
			// Every further page and range at exactly this revision.
			rev = page.Revision
			read = client.Read{ResourceVersion: rev, Match: string(metav1.ResourceVersionMatchExact)}
			for _, item := range page.Items {
				obj, err := f.decode(s, item)
				if err != nil {
					f.cfg.Logger.Error("cannot decode", "resource", s.res.Resource, "err", err)
					continue
				}
				objs = append(objs, obj)
			}
			if page.Continue == "" {
				break
			}
			cont = page.Continue
		}
	}
	s.sink.Replace(objs)
	return rev, nil
}

// follow applies s's changes after since until the watch fails, and
// returns the revision to watch again from.
func (f *Feed) follow(s *source, since int64) (int64, error) {
	w, err := f.cfg.Hub.WatchRanges(s.rangeIDs, since, watchhub.Filter{})
	if err != nil {
		return since, err
	}
	defer w.Close()
	for {
		d, err := w.Next(f.ctx)
		if err != nil {
			return since, err
		}
		if d.Type == watchhub.Bookmark || d.Event == nil {
			continue
		}
		if err := f.apply(s, d); err != nil {
			f.cfg.Logger.Error("cannot apply change", "resource", s.res.Resource, "rev", d.Rev, "err", err)
		}
		// Resume after a whole revision only: a transaction may change
		// several objects, and re-applying one is harmless.
		if d.Event.Last() {
			since = d.Rev
		} else {
			since = d.Rev - 1
		}
	}
}

// apply decodes d's object and hands it to s's sink, unless the sink
// skips it.
func (f *Feed) apply(s *source, d watchhub.Delivery) error {
	if sk, ok := s.sink.(Skipper); ok && d.Type != watchhub.Deleted && sk.Skip(d.Event.Namespace, d.Event.Name, d.Event.Object) {
		return nil
	}
	obj, err := f.decode(s, d.Event.Object)
	if err != nil {
		return fmt.Errorf("cannot decode: %w", err)
	}
	if d.Type == watchhub.Deleted {
		return s.sink.Delete(obj)
	}
	return s.sink.Upsert(obj)
}

func (f *Feed) decode(s *source, data []byte) (runtime.Object, error) {
	obj, err := f.cfg.Registry.NewStored(s.res)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.Codec.Decode(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
