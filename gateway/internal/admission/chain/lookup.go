package chain

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kgate/kgate/gateway/internal/admission/lifecycle"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// liveLookup reads what admission must see fresh straight from etcd:
// namespaces, quotas (compare-and-swap), services, objects to count,
// policy params.
type liveLookup struct {
	reg   *registry.Registry
	store *storage.Store
}

func (l liveLookup) resource(gvr schema.GroupVersionResource) (*registry.Resource, error) {
	res, ok := l.reg.Lookup(gvr)
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
	obj, err := l.store.Get(ctx, res, "", name, 0)
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

// namespaceReader answers what webhooks and policies read of namespaces
// through lifecycle.Cached (the feed, then etcd).
type namespaceReader struct{ *lifecycle.Cached }

// NamespaceLabels implements adm.NamespaceLabels.
func (n namespaceReader) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	ns, err := n.Namespace(ctx, name)
	if errors.Is(err, lifecycle.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// NamespaceObject implements policy.Namespaces.
func (n namespaceReader) NamespaceObject(ctx context.Context, name string) (runtime.Object, error) {
	return n.Namespace(ctx, name)
}

// ClusterIP implements webhook.Services.
func (l liveLookup) ClusterIP(ctx context.Context, namespace, name string) (string, error) {
	res, err := l.resource(corev1.SchemeGroupVersion.WithResource("services"))
	if err != nil {
		return "", err
	}
	obj, err := l.store.Get(ctx, res, namespace, name, 0)
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
	obj, err := l.store.Get(ctx, res, ns, name, 0)
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
	_, err = l.store.Update(ctx, res, ns, name, storage.Preconditions{}, func(cur runtime.Object) (runtime.Object, error) {
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
	for _, r := range l.reg.Resources() {
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
		page, err := l.store.List(ctx, res, ns, opts)
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
	for _, r := range l.reg.Resources() {
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
	obj, err := l.store.Get(ctx, res, ns, name, 0)
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

// Object implements upstream.Objects.
func (l liveLookup) Object(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	res, err := l.resource(gvr)
	if err != nil {
		return nil, err
	}
	obj, err := l.store.Get(ctx, res, ns, name, 0)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, apierror.NotFound(gvr.GroupResource(), name)
	}
	return obj, err
}

// kind returns the stored resource of a versioned object's kind (the
// resources upstream plugins' informers list).
func (l liveLookup) kind(obj runtime.Object) (schema.GroupVersionResource, error) {
	kinds, _, err := l.reg.Scheme().ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	res, err := l.byKind(kinds[0])
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return res.GVR(), nil
}
