// Package feed keeps in memory the objects admission plugins read on each
// write (LimitRanges, ResourceQuotas, webhook configurations, policies and
// their bindings), as kube-apiserver's informers do: it lists each
// resource from the cache nodes, follows it through the watch hub from
// the list's revision, and lists again when the watch falls out of the
// window (410). It is rbacfeed's pattern for any resource.
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
	"github.com/kgate/kgate/cachenode/ranges"
	"github.com/kgate/kgate/gateway/internal/watchhub"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
)

// lister reads pages of a range from the cache nodes (route.Router).
type lister interface {
	List(ctx context.Context, rangeID string, o client.ListOptions) (*client.List, error)
}

// watcher follows ranges (watchhub.Hub).
type watcher interface {
	WatchRanges(rangeIDs []string, since int64, filter watchhub.Filter) (watchhub.Stream, error)
}

// revisions tells etcd's current revision, so the first list is fresh.
type revisions interface {
	Current(ctx context.Context) (int64, error)
}

// Config configures a Feed.
type Config struct {
	Registry  *registry.Registry
	Ranges    *ranges.Table
	Cache     lister
	Hub       watcher
	Revisions revisions
	Codec     *codec.Codec
	// Resources are the resources fed, each into its own Store.
	Resources []schema.GroupVersionResource
	Logger    *slog.Logger
	// Backoff is the pause after a failed list or watch. Default 1s.
	Backoff time.Duration
	// PageSize of the lists. Default 500.
	PageSize int64
}

// Feed follows resources into Stores. Start begins, Close ends.
type Feed struct {
	cfg    Config
	stores map[schema.GroupVersionResource]*Store

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	unsynced atomic.Int32  // stores not listed yet
	synced   chan struct{} // closed once every store was listed
}

// New checks cfg and finds the ranges of the resources.
func New(cfg Config) (*Feed, error) {
	if cfg.Registry == nil || cfg.Ranges == nil || cfg.Cache == nil || cfg.Hub == nil || cfg.Revisions == nil ||
		cfg.Codec == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make admission feed: every dependency is required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	f := &Feed{cfg: cfg, stores: map[schema.GroupVersionResource]*Store{}, synced: make(chan struct{})}
	for _, gvr := range cfg.Resources {
		res, ok := cfg.Registry.Lookup(gvr)
		if !ok {
			return nil, fmt.Errorf("cannot make admission feed: %s is not registered", gvr)
		}
		var ids []string
		for _, rng := range cfg.Ranges.Intersecting(res.ListPrefix("")) {
			ids = append(ids, rng.ID)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("cannot make admission feed: no range holds %s", gvr.Resource)
		}
		f.stores[gvr] = &Store{res: res, rangeIDs: ids, objs: map[string]runtime.Object{}}
	}
	f.unsynced.Store(int32(len(f.stores)))
	if len(f.stores) == 0 {
		close(f.synced)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

// Store returns the store of gvr, nil if gvr is not fed.
func (f *Feed) Store(gvr schema.GroupVersionResource) *Store { return f.stores[gvr] }

// Start starts following the resources; call it once.
func (f *Feed) Start() {
	for _, s := range f.stores {
		f.wg.Go(func() { f.run(s) })
	}
}

// Close stops the feed and waits for it.
func (f *Feed) Close() error {
	f.cancel()
	f.wg.Wait()
	return nil
}

// Ready is nil once every resource was listed once.
func (f *Feed) Ready(context.Context) error {
	select {
	case <-f.synced:
		return nil
	default:
		return errors.New("admission configuration not synced yet")
	}
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

// run lists s and follows it until the feed closes.
func (f *Feed) run(s *Store) {
	log := f.cfg.Logger.With("resource", s.res.Resource)
	first := true
	for f.ctx.Err() == nil {
		rev, err := f.list(s)
		if err != nil {
			if f.ctx.Err() == nil {
				log.Warn("cannot list for admission", "err", err)
				f.pause()
			}
			continue
		}
		if first {
			first = false
			if f.unsynced.Add(-1) == 0 {
				close(f.synced)
			}
		}
		for f.ctx.Err() == nil {
			var err error
			rev, err = f.follow(s, rev)
			if f.ctx.Err() != nil {
				return
			}
			if errors.Is(err, storage.ErrCompacted) {
				log.Info("admission watch fell behind the window; listing again", "err", err)
				break
			}
			log.Warn("admission watch failed; watching again", "from", rev, "err", err)
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
// replaces s's objects and returns the revision.
func (f *Feed) list(s *Store) (int64, error) {
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
			rev = page.Revision
			read = client.Read{ResourceVersion: rev, Match: string(metav1.ResourceVersionMatchExact)}
			for _, item := range page.Items {
				obj, err := f.decode(s, item)
				if err != nil {
					f.cfg.Logger.Error("cannot decode for admission", "resource", s.res.Resource, "err", err)
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
	s.replace(objs)
	return rev, nil
}

// follow applies s's changes after since until the watch fails, and
// returns the revision to watch again from.
func (f *Feed) follow(s *Store, since int64) (int64, error) {
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
		obj, err := f.decode(s, d.Event.Object)
		if err != nil {
			f.cfg.Logger.Error("cannot decode for admission", "resource", s.res.Resource, "rev", d.Rev, "err", err)
		} else if d.Type == watchhub.Deleted {
			s.delete(obj)
		} else {
			s.upsert(obj)
		}
		if d.Event.Last() {
			since = d.Rev
		} else {
			since = d.Rev - 1
		}
	}
}

func (f *Feed) decode(s *Store, data []byte) (runtime.Object, error) {
	obj, err := f.cfg.Registry.NewStored(s.res)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.Codec.Decode(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
