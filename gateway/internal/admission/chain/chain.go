// Package chain builds the gateway's admission chain in kube-apiserver's
// order — NamespaceLifecycle, LimitRanger, (RBAC escalation), upstream's
// plugins from ServiceAccount to PodResizeValidator, MutatingAdmissionWebhook,
// then ValidatingAdmissionPolicy, ValidatingAdmissionWebhook,
// ResourceQuota — as --enable/--disable-admission-plugins select them,
// with the feed of what its plugins read on each write (the listers of
// upstream's plugins included, and namespaces, read live only when the
// feed cannot answer), the live etcd lookups they need fresh, and the
// periodic quota recount.
package chain

import (
	"context"
	"errors"
	"fmt"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"log/slog"
	"maps"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/component-base/featuregate"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/lifecycle"
	"github.com/kgate/kgate/gateway/internal/admission/limitranger"
	"github.com/kgate/kgate/gateway/internal/admission/policy"
	"github.com/kgate/kgate/gateway/internal/admission/quota"
	"github.com/kgate/kgate/gateway/internal/admission/upstream"
	"github.com/kgate/kgate/gateway/internal/admission/webhook"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/gateway/internal/loop"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/ranges"
	"github.com/kgate/kgate/storage/registry"
)

// ErrConfig is wrapped by every configuration error of New.
var ErrConfig = errors.New("chain: invalid config")

// Config are the settings of the chain.
type Config struct {
	// QuotaRecountInterval, when positive, recounts every ResourceQuota's
	// status.used from the objects this often (kube-controller-manager's
	// resourcequota resync). Zero: off.
	QuotaRecountInterval time.Duration
	// EnablePlugins and DisablePlugins change the admission plugins run
	// from kube-apiserver's default set, as --enable-admission-plugins and
	// --disable-admission-plugins (upstream.Resolve).
	EnablePlugins, DisablePlugins []string
	// KubernetesVersion is the version kgate serves (PodSecurity's
	// effective version); required.
	KubernetesVersion string
}

// Deps are what the chain reads and writes through; all required.
type Deps struct {
	Registry  *registry.Registry
	Ranges    ranges.Source
	Codec     *codec.Codec
	Store     *storage.Store
	Cache     feed.Lister
	Hub       feed.Watcher
	Revisions feed.Revisions
	// Authorizer answers the authorizer checks of CEL expressions;
	// Escalation checks RBAC writes.
	Authorizer authz.Authorizer
	Escalation *authz.Escalation
	// Scheme has upstream's internal types and conversions
	// (builtin.Semantics.Scheme); Features are the process's feature
	// gates; both read by upstream's plugins.
	Scheme   *runtime.Scheme
	Features featuregate.FeatureGate
	Logger   *slog.Logger
	// TypeConverter is the structure of the built-in kinds
	// (fieldmanager.NewTypeConverter), for MutatingAdmissionPolicy's
	// ApplyConfiguration mutations.
	TypeConverter managedfields.TypeConverter
}

// Admission is the gateway's rest.Admission: the chain, which waits for
// its feed's first sync as kube-apiserver waits for its informers.
type Admission struct {
	cfg    Config
	log    *slog.Logger
	feed   *feed.Feed
	chain  adm.Chain
	quotas *quota.Recounter
	// recounter runs quotas (Config.QuotaRecountInterval); nil when off
	// or not started.
	recounter *loop.Loop
}

var (
	gvrNamespaces  = corev1.SchemeGroupVersion.WithResource("namespaces")
	gvrLimitRanges = corev1.SchemeGroupVersion.WithResource("limitranges")
	gvrQuotas      = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	gvrMutating    = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
	gvrValidating  = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	gvrPolicies    = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	gvrBindings    = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
	gvrMutPolicies = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicies")
	gvrMutBindings = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingadmissionpolicybindings")
)

// New builds the chain; Start starts its feed.
func New(cfg Config, d Deps) (*Admission, error) {
	if d.Registry == nil || d.Ranges == nil || d.Codec == nil || d.Store == nil || d.Cache == nil || d.Hub == nil ||
		d.Revisions == nil || d.Authorizer == nil || d.Escalation == nil || d.Scheme == nil || d.Features == nil || d.Logger == nil || d.TypeConverter == nil {
		return nil, fmt.Errorf("%w: every dependency is required", ErrConfig)
	}
	if cfg.KubernetesVersion == "" {
		return nil, fmt.Errorf("%w: KubernetesVersion is required", ErrConfig)
	}
	plugins, err := upstream.Resolve(cfg.EnablePlugins, cfg.DisablePlugins)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	lookup := liveLookup{reg: d.Registry, store: d.Store}
	celAuthz := celAuthorizer{d.Authorizer}
	var names []string
	for _, n := range plugins {
		if !upstream.IsOwn(n) {
			names = append(names, n)
		}
	}
	up, err := upstream.New(upstream.Config{
		Names: names, Scheme: d.Scheme, Kinds: lookup.kind, Objects: lookup, Authorizer: celAuthz,
		Features: d.Features, Version: cfg.KubernetesVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make admission chain: %w", err)
	}
	// Namespaces are fed to the chain's own reader and to upstream's
	// plugins' informer (PodSecurity's), when they have one.
	cachedNS := feed.NewStore()
	sinks := maps.Clone(up.Sinks())
	if s, ok := sinks[gvrNamespaces]; ok {
		sinks[gvrNamespaces] = feed.Tee{s, cachedNS}
	} else {
		sinks[gvrNamespaces] = cachedNS
	}
	f, err := feed.New(feed.Config{
		Registry: d.Registry, Ranges: d.Ranges, Cache: d.Cache, Hub: d.Hub, Revisions: d.Revisions,
		Codec: d.Codec, Logger: d.Logger.With("component", "admissionfeed"),
		Resources: []schema.GroupVersionResource{gvrLimitRanges, gvrQuotas, gvrMutating, gvrValidating, gvrPolicies, gvrBindings, gvrMutPolicies, gvrMutBindings},
		Sinks:     sinks,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make admission chain: %w", err)
	}
	// Namespaces are read from the feed, live when it has not the one
	// asked for, as upstream's plugins read their lister.
	nsRead := namespaceReader{Cached: lifecycle.NewCached(func(name string) (*corev1.Namespace, bool) {
		o, ok := cachedNS.Get("", name)
		ns, isNS := o.(*corev1.Namespace)
		return ns, ok && isNS
	}, lookup, nil)}
	wh, err := webhook.New(webhook.Config{
		Mutating: f.Store(gvrMutating), Validating: f.Store(gvrValidating), Namespaces: nsRead, Services: lookup,
		Scheme: d.Registry.Scheme(), Logger: d.Logger.With("component", "webhooks"), Authorizer: celAuthz,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make admission chain: %w", err)
	}
	pol, err := policy.New(policy.Config{
		Policies: f.Store(gvrPolicies), Bindings: f.Store(gvrBindings), Namespaces: nsRead, Scheme: d.Registry.Scheme(),
		Authorizer: celAuthz, Params: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make admission chain: %w", err)
	}
	mut, err := policy.NewMutating(policy.MutatingConfig{
		Policies: f.Store(gvrMutPolicies), Bindings: f.Store(gvrMutBindings), Namespaces: nsRead, Scheme: d.Scheme,
		TypeConverter: func(gvk schema.GroupVersionKind) managedfields.TypeConverter {
			if _, err := d.Scheme.New(gvk); err != nil {
				return nil // a custom resource: merged by its own shape
			}
			return d.TypeConverter
		},
		Authorizer: celAuthz, Params: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot make admission chain: %w", err)
	}
	quotas := quota.Plugin{List: f.Store(gvrQuotas), Quotas: lookup, Objects: lookup}
	own := map[string]any{
		upstream.NamespaceLifecycle:         lifecycle.Plugin{Namespaces: nsRead.Cached},
		upstream.LimitRanger:                limitranger.Plugin{LimitRanges: f.Store(gvrLimitRanges)},
		upstream.MutatingAdmissionPolicy:    mut,
		upstream.MutatingAdmissionWebhook:   wh.Mutating(),
		upstream.ValidatingAdmissionPolicy:  pol,
		upstream.ValidatingAdmissionWebhook: wh.Validating(),
		upstream.ResourceQuota:              quotas,
	}
	return &Admission{cfg: cfg, log: d.Logger, feed: f, quotas: quota.NewRecounter(quotas),
		chain: ordered(plugins, own, up, builtin{esc: d.Escalation, store: d.Store, reg: d.Registry, log: d.Logger})}, nil
}

// ordered is the chain of names in their order: kgate's own plugins,
// upstream's (contiguous in kube-apiserver's order) as one link where the
// first of them stands, and the RBAC escalation check (kube-apiserver's
// role storage, not a plugin) after NamespaceLifecycle and LimitRanger.
func ordered(names []string, own map[string]any, up *upstream.Plugins, esc builtin) adm.Chain {
	var c adm.Chain
	escAdded, upAdded := false, false
	for _, n := range names {
		if !escAdded && n != upstream.NamespaceLifecycle && n != upstream.LimitRanger {
			c, escAdded = append(c, esc), true
		}
		switch {
		case own[n] != nil:
			c = append(c, own[n])
		case !upAdded:
			c, upAdded = append(c, up), true
		}
	}
	if !escAdded {
		c = append(c, esc)
	}
	return c
}

// Start starts the feed and, when configured, the quota recount.
func (a *Admission) Start() {
	a.feed.Start()
	if n := a.cfg.QuotaRecountInterval; n > 0 {
		a.recounter = loop.Start(n, a.recountQuotas)
	}
}

// Close stops the recount and the feed.
func (a *Admission) Close() {
	a.recounter.Stop()
	a.feed.Close()
}

// recountQuotas is one round of the quota recount (kube-controller-
// manager's resourcequota controller resync), once the feed has the
// quotas.
func (a *Admission) recountQuotas(ctx context.Context) {
	if !a.feed.Synced() {
		return
	}
	n, err := a.quotas.Round(ctx)
	if err != nil && ctx.Err() == nil {
		a.log.Warn("cannot recount quotas", "err", err)
	}
	if n > 0 {
		a.log.Info("quotas recounted", "updated", n)
	}
}

// synced returns the chain once the feed listed everything.
func (a *Admission) synced(ctx context.Context) (adm.Chain, error) {
	if err := a.feed.WaitSynced(ctx); err != nil {
		return nil, apierror.InternalError(errors.New("not yet ready to handle request"))
	}
	return a.chain, nil
}

// Admit implements rest.Admission.
func (a *Admission) Admit(ctx context.Context, at *adm.Attributes) error {
	c, err := a.synced(ctx)
	if err != nil {
		return err
	}
	return c.Admit(ctx, at)
}

// Validate implements rest.Admission.
func (a *Admission) Validate(ctx context.Context, at *adm.Attributes) error {
	c, err := a.synced(ctx)
	if err != nil {
		return err
	}
	return c.Validate(ctx, at)
}

// Finish implements rest.Admission.
func (a *Admission) Finish(ctx context.Context, at *adm.Attributes, stored runtime.Object, err error) {
	a.chain.Finish(ctx, at, stored, err)
}
