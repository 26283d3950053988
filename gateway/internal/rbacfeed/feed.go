// Package rbacfeed keeps the gateway's RBAC authorizer fed, as
// kube-apiserver's informers feed its RBAC authorizer: it follows Roles,
// ClusterRoles, RoleBindings and ClusterRoleBindings from the cache nodes
// through a feed.Feed, whose sinks hand each list and change to the
// authorizer.
package rbacfeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// Config configures a Feed.
type Config struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Cache     feed.Lister
	Hub       feed.Watcher
	Revisions feed.Revisions
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
	f *feed.Feed
}

// New checks cfg and finds the ranges of the RBAC resources.
func New(cfg Config) (*Feed, error) {
	if cfg.RBAC == nil {
		return nil, errors.New("cannot make RBAC feed: every dependency is required")
	}
	r := cfg.RBAC
	sinks := map[schema.GroupVersionResource]feed.Sink{}
	for resource, replace := range map[string]func([]runtime.Object){
		"clusterroles":        func(objs []runtime.Object) { r.ReplaceClusterRoles(typed[*rbacv1.ClusterRole](objs)) },
		"roles":               func(objs []runtime.Object) { r.ReplaceRoles(typed[*rbacv1.Role](objs)) },
		"clusterrolebindings": func(objs []runtime.Object) { r.ReplaceClusterRoleBindings(typed[*rbacv1.ClusterRoleBinding](objs)) },
		"rolebindings":        func(objs []runtime.Object) { r.ReplaceRoleBindings(typed[*rbacv1.RoleBinding](objs)) },
	} {
		sinks[rbacv1.SchemeGroupVersion.WithResource(resource)] = sink{rbac: r, replace: replace}
	}
	f, err := feed.New(feed.Config{
		Registry: cfg.Registry, Ranges: cfg.Ranges, Cache: cfg.Cache, Hub: cfg.Hub, Revisions: cfg.Revisions,
		Codec: cfg.Codec, Sinks: sinks, Logger: cfg.Logger, Backoff: cfg.Backoff, PageSize: cfg.PageSize,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make RBAC feed: %w", err)
	}
	return &Feed{f}, nil
}

// Start starts following the four resources; call it once.
func (f *Feed) Start() { f.f.Start() }

// Close stops the feed and waits for it.
func (f *Feed) Close() error { return f.f.Close() }

// Synced reports whether every resource was listed once: from then on
// the authorizer holds every role and binding (and follows changes).
func (f *Feed) Synced() bool { return f.f.Synced() }

// Ready is nil once synced; the gateway's /readyz check "rbac".
func (f *Feed) Ready(context.Context) error {
	if !f.Synced() {
		return errors.New("RBAC roles and bindings not synced yet")
	}
	return nil
}

// WaitSynced blocks until Synced or ctx ends.
func (f *Feed) WaitSynced(ctx context.Context) error { return f.f.WaitSynced(ctx) }

// Relists counts the lists after the first (watches that fell behind).
func (f *Feed) Relists() int64 { return f.f.Relists() }

// sink hands one RBAC resource to the authorizer: a list replaces every
// object of its kind, a change is applied object by object.
type sink struct {
	rbac    *authz.RBAC
	replace func([]runtime.Object)
}

func (s sink) Replace(objs []runtime.Object)   { s.replace(objs) }
func (s sink) Upsert(obj runtime.Object) error { return s.rbac.Upsert(obj) }
func (s sink) Delete(obj runtime.Object) error { return s.rbac.Delete(obj) }

func typed[T runtime.Object](objs []runtime.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
