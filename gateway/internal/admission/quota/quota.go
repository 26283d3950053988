// Package quota is kube-apiserver's ResourceQuota admission plugin with
// the quota controller's bookkeeping folded in (kgate has no controller
// manager): a create is charged to every ResourceQuota of its namespace
// that limits something it uses, and an update what it uses more than
// the object it replaces, by a compare-and-swap update of the quota's
// status.used in etcd; a deletion refunds the object's usage, a stored
// update what it uses less.
//
// Consistency across gateways: status.used lives in etcd, in the quota
// object, and every charge is a read-modify-write that etcd accepts only
// if the quota's revision did not change since it was read (storage's
// Update retries on conflict with the fresh object). Two gateways racing
// for the last unit are therefore serialized by etcd: one charge lands,
// the other re-reads the quota, sees it full and rejects. A charge is
// made before the object is written and undone if the write fails, so
// used never undercounts; a gateway crashing between the charge and the
// write overcounts until the quota is recomputed (updating its spec
// recounts missing entries; upstream's controller resyncs). Which quotas
// exist comes from the admission feed, so a quota created a moment ago
// through another gateway applies once the cache has it, as upstream's
// informer.
package quota

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
)

// lister lists the ResourceQuotas of a namespace (feed.Store).
type lister interface {
	List(ns string) []runtime.Object
}

// Quotas reads and compare-and-swaps ResourceQuotas in etcd.
type Quotas interface {
	Get(ctx context.Context, ns, name string) (*corev1.ResourceQuota, error)
	// Update calls f on the current quota and stores the result if the
	// quota did not change meanwhile, retrying on conflict; an error of
	// f aborts.
	Update(ctx context.Context, ns, name string, f func(q *corev1.ResourceQuota) error) error
}

// Objects lists the objects of a resource in a namespace from etcd, to
// count what a new quota finds.
type Objects interface {
	Objects(ctx context.Context, group, resource, ns string) ([]runtime.Object, error)
}

// Plugin is ResourceQuota.
type Plugin struct {
	List    lister
	Quotas  Quotas
	Objects Objects
}

var errExceeded = errors.New("quota: exceeded")

// Admit fills a created or updated quota's status: hard from spec, and
// used counted for what it does not hold yet (the quota controller's
// first sync).
func (p Plugin) Admit(ctx context.Context, a *admission.Attributes) error {
	q, ok := a.Object.(*corev1.ResourceQuota)
	if !ok || a.Subresource != "" {
		return nil
	}
	q.Status.Hard = q.Spec.Hard.DeepCopy()
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{}
	}
	for n := range q.Spec.Hard {
		if _, ok := q.Status.Used[n]; ok {
			continue
		}
		used, err := p.count(ctx, q.Namespace, n)
		if err != nil {
			return apierror.InternalError(err)
		}
		q.Status.Used[n] = used
	}
	for n := range q.Status.Used {
		if _, ok := q.Spec.Hard[n]; !ok {
			delete(q.Status.Used, n)
		}
	}
	return nil
}

// count computes the usage of n in ns from etcd.
func (p Plugin) count(ctx context.Context, ns string, n corev1.ResourceName) (resource.Quantity, error) {
	var total resource.Quantity
	if gr, ok := parseCount(n); ok {
		objs, err := p.Objects.Objects(ctx, gr.Group, gr.Resource, ns)
		if err != nil {
			return total, err
		}
		n := 0
		for _, o := range objs {
			if counted(o) {
				n++
			}
		}
		return *resource.NewQuantity(int64(n), resource.DecimalSI), nil
	}
	for _, r := range []string{"pods", "services", "persistentvolumeclaims"} {
		objs, err := p.Objects.Objects(ctx, "", r, ns)
		if err != nil {
			return total, err
		}
		for _, o := range objs {
			if q, ok := usage(corev1.Resource(r), o)[n]; ok {
				total.Add(q)
			}
		}
	}
	return total, nil
}

// charged is what a write takes of the quotas: a create its usage, an
// update what it uses more than the object it replaces (a Service
// turned NodePort, a PVC's storage raised, a pod resized); nothing
// else.
func charged(a *admission.Attributes) corev1.ResourceList {
	if !a.Resource.Namespaced || a.Object == nil {
		return nil
	}
	gr := a.GVR().GroupResource()
	switch {
	case a.Operation == admission.Create && a.Subresource == "":
		return usage(gr, a.Object)
	case a.Operation == admission.Update && (a.Subresource == "" || a.Subresource == "resize") && a.OldObject != nil:
		return delta(usage(gr, a.Object), usage(gr, a.OldObject))
	}
	return nil
}

// Validate charges a create, or what an update uses more, to the quotas
// of its namespace, by compare-and-swap; a dry run is checked, not
// charged.
func (p Plugin) Validate(ctx context.Context, a *admission.Attributes) error {
	if a.Namespace == "" {
		return nil
	}
	quotas := p.List.List(a.Namespace)
	if len(quotas) == 0 {
		return nil
	}
	u := charged(a)
	if len(u) == 0 {
		return nil
	}
	for _, o := range quotas {
		rq, ok := o.(*corev1.ResourceQuota)
		if !ok || !limits(rq.Spec.Hard, u) {
			continue
		}
		charge := func(q *corev1.ResourceQuota) error {
			if err := check(q, u); err != nil {
				return err
			}
			if q.Status.Used == nil {
				q.Status.Used = corev1.ResourceList{}
			}
			for n, d := range u {
				if _, ok := q.Status.Hard[n]; ok {
					cur := q.Status.Used[n]
					cur.Add(d)
					q.Status.Used[n] = cur
				}
			}
			return nil
		}
		var err error
		if a.DryRun {
			var q *corev1.ResourceQuota
			if q, err = p.Quotas.Get(ctx, rq.Namespace, rq.Name); err == nil {
				err = check(q, u)
			}
		} else {
			err = p.Quotas.Update(ctx, rq.Namespace, rq.Name, charge)
		}
		var ex *exceeded
		switch {
		case errors.As(err, &ex):
			return apierror.Forbidden(a.GVR().GroupResource(), a.Name, ex)
		case err != nil:
			return apierror.InternalError(fmt.Errorf("cannot charge quota %s: %w", rq.Name, err))
		}
		if !a.DryRun {
			name := rq.Name
			a.OnFailure(func() { p.refund(context.WithoutCancel(ctx), a.Namespace, name, u) })
		}
	}
	return nil
}

// Finish refunds a deletion, and what a stored update uses less,
// status updates included (a pod that completed); the quota
// controller's recount does it upstream, kgate has none. An object
// already being deleted uses nothing (see counted), so the requests that
// finish a graceful or finalized deletion refund nothing more.
func (p Plugin) Finish(ctx context.Context, a *admission.Attributes, _ runtime.Object, err error) {
	if err != nil || a.OldObject == nil || a.Namespace == "" {
		return
	}
	quotas := p.List.List(a.Namespace)
	if len(quotas) == 0 {
		return
	}
	var u corev1.ResourceList
	gr := a.GVR().GroupResource()
	switch {
	case a.Operation == admission.Delete && a.Subresource == "":
		u = usage(gr, a.OldObject)
	case a.Operation == admission.Update && (a.Subresource == "" || a.Subresource == "resize" || a.Subresource == "status") && a.Object != nil:
		u = delta(usage(gr, a.OldObject), usage(gr, a.Object))
	}
	if len(u) == 0 {
		return
	}
	for _, o := range quotas {
		if rq, ok := o.(*corev1.ResourceQuota); ok && limits(rq.Spec.Hard, u) {
			p.refund(ctx, rq.Namespace, rq.Name, u)
		}
	}
}

func (p Plugin) refund(ctx context.Context, ns, name string, u corev1.ResourceList) {
	_ = p.Quotas.Update(ctx, ns, name, func(q *corev1.ResourceQuota) error {
		for n, d := range u {
			cur, ok := q.Status.Used[n]
			if !ok {
				continue
			}
			cur.Sub(d)
			if cur.Sign() < 0 {
				cur = resource.Quantity{}
			}
			q.Status.Used[n] = cur
		}
		return nil
	})
}

// limits says whether hard limits something u uses.
func limits(hard, u corev1.ResourceList) bool {
	for n := range u {
		if _, ok := hard[n]; ok {
			return true
		}
	}
	return false
}

// exceeded is a quota that would be exceeded.
type exceeded struct {
	name                     string
	requested, used, limited []string
}

func (e *exceeded) Error() string {
	return fmt.Sprintf("exceeded quota: %s, requested: %s, used: %s, limited: %s", e.name,
		strings.Join(e.requested, ","), strings.Join(e.used, ","), strings.Join(e.limited, ","))
}

func (e *exceeded) Unwrap() error { return errExceeded }

// check says whether q can take u more.
func check(q *corev1.ResourceQuota, u corev1.ResourceList) error {
	hard := q.Status.Hard
	if hard == nil {
		hard = q.Spec.Hard
	}
	var names []string
	for n := range u {
		if _, ok := hard[n]; ok {
			names = append(names, string(n))
		}
	}
	sort.Strings(names)
	ex := &exceeded{name: q.Name}
	for _, s := range names {
		n := corev1.ResourceName(s)
		used := q.Status.Used[n]
		next := used.DeepCopy()
		next.Add(u[n])
		if h := hard[n]; next.Cmp(h) > 0 {
			d := u[n]
			ex.requested = append(ex.requested, s+"="+d.String())
			ex.used = append(ex.used, s+"="+used.String())
			ex.limited = append(ex.limited, s+"="+h.String())
		}
	}
	if len(ex.requested) > 0 {
		return ex
	}
	return nil
}
