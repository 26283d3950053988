package gateway

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/admission/lifecycle"
	"github.com/kgate/kgate/gateway/internal/admission/limitranger"
	"github.com/kgate/kgate/gateway/internal/admission/policy"
	"github.com/kgate/kgate/gateway/internal/admission/quota"
	"github.com/kgate/kgate/gateway/internal/admission/webhook"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/feed"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// admissionState is the admission chain and the feed of what its
// plugins read on each write.
type admissionState struct {
	feed  *feed.Feed
	chain adm.Chain
	// quotas recounts the quotas (Config.QuotaRecountInterval); recounter
	// runs it, nil when off.
	quotas    *quota.Recounter
	recounter *loop
}

var (
	gvrLimitRanges = corev1.SchemeGroupVersion.WithResource("limitranges")
	gvrQuotas      = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	gvrMutating    = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
	gvrValidating  = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	gvrPolicies    = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	gvrBindings    = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
)

// newAdmission builds the chain in kube-apiserver's order:
// NamespaceLifecycle, LimitRanger, ServiceAccount (and RBAC escalation),
// MutatingAdmissionWebhook, then ValidatingAdmissionPolicy,
// ValidatingAdmissionWebhook, ResourceQuota.
func (g *Gateway) newAdmission() error {
	cfg := g.cfg
	f, err := feed.New(feed.Config{
		Registry: cfg.Registry, Ranges: cfg.Ranges, Cache: g.router, Hub: g.hub, Revisions: cfg.Revisions,
		Codec: cfg.Codec, Logger: cfg.Logger.With("component", "admissionfeed"),
		Resources: []schema.GroupVersionResource{gvrLimitRanges, gvrQuotas, gvrMutating, gvrValidating, gvrPolicies, gvrBindings},
	})
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	lookup := liveLookup{g}
	celAuthz := celAuthorizer{g.auth.authorizer}
	wh, err := webhook.New(webhook.Config{
		Mutating: f.Store(gvrMutating), Validating: f.Store(gvrValidating), Namespaces: lookup, Services: lookup,
		Scheme: cfg.Registry.Scheme(), Logger: cfg.Logger.With("component", "webhooks"), Authorizer: celAuthz,
	})
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	pol, err := policy.New(policy.Config{
		Policies: f.Store(gvrPolicies), Bindings: f.Store(gvrBindings), Namespaces: lookup, Scheme: cfg.Registry.Scheme(),
		Authorizer: celAuthz, Params: lookup,
	})
	if err != nil {
		return fmt.Errorf("cannot make gateway: %w", err)
	}
	quotas := quota.Plugin{List: f.Store(gvrQuotas), Quotas: lookup, Objects: lookup}
	g.auth.adm = &admissionState{feed: f, quotas: quota.NewRecounter(quotas), chain: adm.Chain{
		lifecycle.Plugin{Namespaces: lookup},
		limitranger.Plugin{LimitRanges: f.Store(gvrLimitRanges)},
		builtin{g},
		wh.Mutating(),
		pol,
		wh.Validating(),
		quotas,
	}}
	return nil
}

// recountQuotas is one round of the quota recount (kube-controller-
// manager's resourcequota controller resync), once the feed has the
// quotas.
func (g *Gateway) recountQuotas(ctx context.Context) {
	if !g.auth.adm.feed.Synced() {
		return
	}
	n, err := g.auth.adm.quotas.Round(ctx)
	if err != nil && ctx.Err() == nil {
		g.cfg.Logger.Warn("cannot recount quotas", "err", err)
	}
	if n > 0 {
		g.cfg.Logger.Info("quotas recounted", "updated", n)
	}
}

// admissionChain returns the chain once the feed listed everything.
func (g *Gateway) admissionChain(ctx context.Context) (adm.Chain, error) {
	if err := g.auth.adm.feed.WaitSynced(ctx); err != nil {
		return nil, apierrors.NewInternalError(errors.New("not yet ready to handle request"))
	}
	return g.auth.adm.chain, nil
}

// celAuthorizer answers the authorizer checks of admission CEL
// expressions (webhook matchConditions, policies) with the gateway's
// authorizer chain.
type celAuthorizer struct{ a authz.Authorizer }

// Authorize implements authorizer.UnconditionalAuthorizer.
func (c celAuthorizer) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	// Evaluate, not Authorize: an authorizer that could not decide (the
	// webhook down) is CEL's errored(), as in kube-apiserver.
	d, reason, err := authz.Evaluate(c.a, authz.Attributes{
		User: at.GetUser(), Verb: at.GetVerb(), Namespace: at.GetNamespace(), APIGroup: at.GetAPIGroup(),
		APIVersion: at.GetAPIVersion(), Resource: at.GetResource(), Subresource: at.GetSubresource(),
		Name: at.GetName(), Path: at.GetPath(), IsResourceRequest: at.IsResourceRequest(),
	})
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, nil
	case authz.Deny:
		return authorizer.DecisionDeny, reason, nil
	}
	return authorizer.DecisionNoOpinion, reason, err
}

// liveLookup reads what admission must see fresh straight from etcd:
// namespaces, quotas (compare-and-swap), services, objects to count,
// policy params.
type liveLookup struct{ g *Gateway }

func (l liveLookup) resource(gvr schema.GroupVersionResource) (*registry.Resource, error) {
	res, ok := l.g.cfg.Registry.Lookup(gvr)
	if !ok {
		return nil, fmt.Errorf("%s is not registered", gvr)
	}
	return res, nil
}

// Namespace implements lifecycle.Namespaces.
func (l liveLookup) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	res, err := l.resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	if err != nil {
		return nil, err
	}
	obj, err := l.g.cfg.Store.Get(ctx, res, "", name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, lifecycle.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, errors.New("not a namespace")
	}
	return ns, nil
}

// NamespaceLabels implements adm.NamespaceLabels.
func (l liveLookup) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns, err := l.Namespace(ctx, name)
	if errors.Is(err, lifecycle.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// NamespaceObject implements policy.Namespaces.
func (l liveLookup) NamespaceObject(ctx context.Context, name string) (runtime.Object, error) {
	return l.Namespace(ctx, name)
}

// ClusterIP implements webhook.Services.
func (l liveLookup) ClusterIP(ctx context.Context, namespace, name string) (string, error) {
	res, err := l.resource(corev1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		return "", err
	}
	obj, err := l.g.cfg.Store.Get(ctx, res, namespace, name, 0)
	if err != nil {
		return "", err
	}
	svc, ok := obj.(*corev1.Service)
	if !ok || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", errors.New("the service has no cluster IP")
	}
	return svc.Spec.ClusterIP, nil
}

// Get implements quota.Quotas.
func (l liveLookup) Get(ctx context.Context, ns, name string) (*corev1.ResourceQuota, error) {
	res, err := l.resource(gvrQuotas)
	if err != nil {
		return nil, err
	}
	obj, err := l.g.cfg.Store.Get(ctx, res, ns, name, 0)
	if err != nil {
		return nil, err
	}
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return nil, errors.New("not a resource quota")
	}
	return q, nil
}

// Update implements quota.Quotas: storage's Update is a compare-and-swap
// on the quota's revision, retried on conflict.
func (l liveLookup) Update(ctx context.Context, ns, name string, f func(q *corev1.ResourceQuota) error) error {
	res, err := l.resource(gvrQuotas)
	if err != nil {
		return err
	}
	_, err = l.g.cfg.Store.Update(ctx, res, ns, name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
		q, ok := cur.(*corev1.ResourceQuota)
		if !ok {
			return nil, errors.New("not a resource quota")
		}
		q = q.DeepCopy()
		if err := f(q); err != nil {
			return nil, err
		}
		return q, nil
	})
	return err
}

// Objects implements quota.Objects.
func (l liveLookup) Objects(ctx context.Context, group, resource, ns string) ([]runtime.Object, error) {
	var res *registry.Resource
	for _, r := range l.g.cfg.Registry.Resources() {
		if r.Group == group && r.Resource == resource {
			res = r
			break
		}
	}
	if res == nil || res.Prefix == "" {
		return nil, nil
	}
	return l.list(ctx, res, ns)
}

// list reads every object of res in ns from etcd, page by page at one
// revision.
func (l liveLookup) list(ctx context.Context, res *registry.Resource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	opts := storage.ListOptions{Limit: 500}
	for {
		page, err := l.g.cfg.Store.List(ctx, res, ns, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Last == "" {
			return out, nil
		}
		opts.Revision, opts.After = page.Revision, page.Last
	}
}

// byKind returns the stored resource serving gvk.
func (l liveLookup) byKind(gvk schema.GroupVersionKind) (*registry.Resource, error) {
	for _, r := range l.g.cfg.Registry.Resources() {
		if r.GVK() == gvk && r.Prefix != "" {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%s is not served", gvk)
}

// ParamScope implements policy.Params.
func (l liveLookup) ParamScope(gvk schema.GroupVersionKind) (bool, error) {
	res, err := l.byKind(gvk)
	if err != nil {
		return false, err
	}
	return res.Namespaced, nil
}

// GetParam implements policy.Params: the param is read from etcd, so a
// ConfigMap written a moment ago through any gateway is seen.
func (l liveLookup) GetParam(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (runtime.Object, error) {
	res, err := l.byKind(gvk)
	if err != nil {
		return nil, err
	}
	obj, err := l.g.cfg.Store.Get(ctx, res, ns, name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return obj, err
}

// ListParams implements policy.Params.
func (l liveLookup) ListParams(ctx context.Context, gvk schema.GroupVersionKind, ns string, sel labels.Selector) ([]runtime.Object, error) {
	res, err := l.byKind(gvk)
	if err != nil {
		return nil, err
	}
	all, err := l.list(ctx, res, ns)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, o := range all {
		if m, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}
