// Package rbacfeed keeps the gateway's RBAC authorizer fed, as
// kube-apiserver's informers feed its RBAC authorizer: it lists Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings from the cache nodes,
// then follows each through the watch hub from the list's revision, and
// lists again when the watch falls out of the window (410).
package rbacfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/cachenode/client"
	"github.com/kgate/kgate/cachenode/ranges"
	"github.com/kgate/kgate/gateway/internal/authz"
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
	// RBAC is the authorizer fed.
	RBAC   *authz.RBAC
	Logger *slog.Logger
	// Backoff is the pause after a failed list or watch. Default 1s.
	Backoff time.Duration
	// PageSize of the lists. Default 500.
	PageSize int64
}

// Feed feeds an RBAC authorizer. Start begins, Close ends.
type Feed struct {
	cfg   Config
	kinds []*kind

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	unsynced atomic.Int32  // kinds not listed yet
	synced   chan struct{} // closed once every kind was listed
	relists  atomic.Int64
}

// kind is one of the four resources fed.
type kind struct {
	res      *registry.Resource
	rangeIDs []string
	replace  func(objs []runtime.Object)
}

// New checks cfg and finds the ranges of the RBAC resources.
func New(cfg Config) (*Feed, error) {
	if cfg.Registry == nil || cfg.Ranges == nil || cfg.Cache == nil || cfg.Hub == nil || cfg.Revisions == nil ||
		cfg.Codec == nil || cfg.RBAC == nil || cfg.Logger == nil {
		return nil, errors.New("cannot make RBAC feed: every dependency is required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	r := cfg.RBAC
	f := &Feed{cfg: cfg, synced: make(chan struct{})}
	for _, k := range []struct {
		resource string
		replace  func([]runtime.Object)
	}{
		{"clusterroles", func(objs []runtime.Object) { r.ReplaceClusterRoles(typed[*rbacv1.ClusterRole](objs)) }},
		{"roles", func(objs []runtime.Object) { r.ReplaceRoles(typed[*rbacv1.Role](objs)) }},
		{"clusterrolebindings", func(objs []runtime.Object) { r.ReplaceClusterRoleBindings(typed[*rbacv1.ClusterRoleBinding](objs)) }},
		{"rolebindings", func(objs []runtime.Object) { r.ReplaceRoleBindings(typed[*rbacv1.RoleBinding](objs)) }},
	} {
		res, ok := cfg.Registry.Lookup(rbacv1.SchemeGroupVersion.WithResource(k.resource))
		if !ok {
			return nil, fmt.Errorf("cannot make RBAC feed: %s are not registered", k.resource)
		}
		var ids []string
		for _, rng := range cfg.Ranges.Intersecting(res.ListPrefix("")) {
			ids = append(ids, rng.ID)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("cannot make RBAC feed: no range holds %s", k.resource)
		}
		f.kinds = append(f.kinds, &kind{res: res, rangeIDs: ids, replace: k.replace})
	}
	f.unsynced.Store(int32(len(f.kinds)))
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

func typed[T runtime.Object](objs []runtime.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Start starts following the four resources; call it once.
func (f *Feed) Start() {
	for _, k := range f.kinds {
		f.wg.Go(func() { f.run(k) })
	}
}

// Close stops the feed and waits for it.
func (f *Feed) Close() error {
	f.cancel()
	f.wg.Wait()
	return nil
}

// Synced reports whether every resource was listed once: from then on
// the authorizer holds every role and binding (and follows changes).
func (f *Feed) Synced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// Ready is nil once synced; the gateway's /readyz check "rbac".
func (f *Feed) Ready(context.Context) error {
	if !f.Synced() {
		return errors.New("RBAC roles and bindings not synced yet")
	}
	return nil
}

// WaitSynced blocks until Synced or ctx ends.
func (f *Feed) WaitSynced(ctx context.Context) error {
	select {
	case <-f.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Relists counts the lists after the first (watches that fell behind).
func (f *Feed) Relists() int64 { return f.relists.Load() }

// run lists k and follows it until the feed closes.
func (f *Feed) run(k *kind) {
	log := f.cfg.Logger.With("resource", k.res.Resource)
	first := true
	for f.ctx.Err() == nil {
		rev, err := f.list(k)
		if err != nil {
			if f.ctx.Err() == nil {
				log.Warn("cannot list for RBAC", "err", err)
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
			rev, err = f.follow(k, rev)
			if f.ctx.Err() != nil {
				return
			}
			if errors.Is(err, storage.ErrCompacted) {
				log.Info("RBAC watch fell behind the window; listing again", "err", err)
				break
			}
			log.Warn("RBAC watch failed; watching again", "from", rev, "err", err)
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

// list reads every object of k at one revision, consistent with etcd,
// replaces them in the authorizer and returns the revision.
func (f *Feed) list(k *kind) (int64, error) {
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	cur, err := f.cfg.Revisions.Current(ctx)
	if err != nil {
		return 0, fmt.Errorf("cannot learn the current revision: %w", err)
	}
	read := client.Read{ResourceVersion: cur, Match: string(metav1.ResourceVersionMatchNotOlderThan)}
	prefix := k.res.ListPrefix("")
	var objs []runtime.Object
	var rev int64
	for _, id := range k.rangeIDs {
		cont := ""
		for {
			page, err := f.cfg.Cache.List(ctx, id, client.ListOptions{Read: read, Prefix: prefix, Limit: f.cfg.PageSize, Continue: cont, Format: client.JSON})
			if err != nil {
				return 0, fmt.Errorf("cannot list %s: %w", k.res.Resource, err)
			}
			// Every further page and range at exactly this revision.
			rev = page.Revision
			read = client.Read{ResourceVersion: rev, Match: string(metav1.ResourceVersionMatchExact)}
			for _, item := range page.Items {
				obj, err := f.decode(k, item)
				if err != nil {
					f.cfg.Logger.Error("cannot decode for RBAC", "resource", k.res.Resource, "err", err)
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
	k.replace(objs)
	return rev, nil
}

// follow applies k's changes after since until the watch fails, and
// returns the revision to watch again from.
func (f *Feed) follow(k *kind, since int64) (int64, error) {
	s, err := f.cfg.Hub.WatchRanges(k.rangeIDs, since, watchhub.Filter{})
	if err != nil {
		return since, err
	}
	defer s.Close()
	for {
		d, err := s.Next(f.ctx)
		if err != nil {
			return since, err
		}
		if d.Type == watchhub.Bookmark || d.Event == nil {
			continue
		}
		obj, err := f.decode(k, d.Event.Object)
		if err != nil {
			f.cfg.Logger.Error("cannot decode for RBAC", "resource", k.res.Resource, "rev", d.Rev, "err", err)
		} else if d.Type == watchhub.Deleted {
			err = f.cfg.RBAC.Delete(obj)
		} else {
			err = f.cfg.RBAC.Upsert(obj)
		}
		if err != nil {
			f.cfg.Logger.Error("cannot apply RBAC change", "resource", k.res.Resource, "rev", d.Rev, "err", err)
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

func (f *Feed) decode(k *kind, data []byte) (runtime.Object, error) {
	obj, err := f.cfg.Registry.NewStored(k.res)
	if err != nil {
		return nil, err
	}
	if err := f.cfg.Codec.Decode(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
