package rest

import (
	"context"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/authentication/user"
	apifieldmanager "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"

	"github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/storage"
)

// Admission is what the gateway checks and adds around writes, as
// kube-apiserver's admission chain does: Admit is the mutating phase
// (after defaulting, before validation; it may replace a.Object),
// Validate the validating phase (after validation, before etcd), and
// Finish learns how a write that was not a dry run ended.
type Admission interface {
	Admit(ctx context.Context, a *admission.Attributes) error
	Validate(ctx context.Context, a *admission.Attributes) error
	Finish(ctx context.Context, a *admission.Attributes, stored runtime.Object, err error)
}

// userKey is the RequestCtx user value holding the requesting user.
type userKey struct{}

// SetUser records on rc the user a request runs as, for Serve's write
// checks. The gateway sets it once authorized.
func SetUser(rc *fasthttp.RequestCtx, u user.Info) { rc.SetUserValue(userKey{}, u) }

// User returns the user SetUser recorded on rc, or nil.
func User(rc *fasthttp.RequestCtx) user.Info {
	u, _ := rc.UserValue(userKey{}).(user.Info)
	return u
}

// attributes describes r's write of obj over old.
func (h *Handler) attributes(r *request, op admission.Operation, obj, old runtime.Object, dry bool) *admission.Attributes {
	a := &admission.Attributes{
		User: r.user, Resource: r.res, Subresource: r.info.Subresource, Operation: op,
		Namespace: r.info.Namespace, Name: r.info.Name, Object: obj, OldObject: old, DryRun: dry,
	}
	if obj != nil {
		if m, err := objectMeta(obj); err == nil {
			if a.Name == "" {
				a.Name = m.GetName()
			}
			if r.res.Namespaced && a.Namespace == "" {
				a.Namespace = m.GetNamespace()
			}
		}
	}
	return a
}

// admit runs both admission phases around prepare, the strategy of the
// write (prepare, validate): the mutating phase, prepare, then the
// validating phase on the object prepare returned. It returns the object
// as admitted.
func (h *Handler) admit(ctx context.Context, r *request, a *admission.Attributes, prepare func(obj runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	if err := h.mutate(ctx, r, a); err != nil {
		return nil, err
	}
	return h.validate(ctx, r, a, prepare)
}

// mutate runs the mutating admission phase; it may replace a.Object.
// managedFields that admission leaves invalid are reset to what they were
// before it, with upstream's warning, as kube-apiserver's
// NewManagedFieldsValidatingAdmissionController does around its chain.
func (h *Handler) mutate(ctx context.Context, r *request, a *admission.Attributes) error {
	if h.cfg.Admission == nil {
		return nil
	}
	defer h.warn(r, a)
	var before []metav1.ManagedFieldsEntry
	if m, err := meta.Accessor(a.Object); err == nil && a.Object != nil {
		before = m.GetManagedFields()
	}
	if err := h.cfg.Admission.Admit(ctx, a); err != nil {
		return err
	}
	if m, err := meta.Accessor(a.Object); err == nil && a.Object != nil {
		if err := managedfields.ValidateManagedFields(m.GetManagedFields()); err != nil {
			m.SetManagedFields(before)
			addWarning(r, fmt.Sprintf(apifieldmanager.InvalidManagedFieldsAfterMutatingAdmissionWarningFormat, err.Error()))
		}
	}
	return nil
}

// validate runs prepare (nil: nothing to prepare) on a.Object, then the
// validating admission phase on what it returned, and returns that.
func (h *Handler) validate(ctx context.Context, r *request, a *admission.Attributes, prepare func(obj runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	if prepare != nil {
		obj, err := prepare(a.Object)
		if err != nil {
			return nil, err
		}
		a.Object = obj
		if m, err := objectMeta(obj); err == nil && a.Name == "" {
			// The name generated from generateName.
			a.Name = m.GetName()
		}
	}
	if h.cfg.Admission == nil {
		return a.Object, nil
	}
	defer h.warn(r, a)
	if err := h.cfg.Admission.Validate(ctx, a); err != nil {
		return nil, err
	}
	return a.Object, nil
}

// warn passes admission warnings to the client as Warning headers.
func (h *Handler) warn(r *request, a *admission.Attributes) {
	for _, w := range a.Warnings() {
		addWarning(r, w)
	}
}

// finish tells admission how a write ended.
func (h *Handler) finish(ctx context.Context, a *admission.Attributes, stored runtime.Object, err error) {
	if h.cfg.Admission != nil && a != nil && !a.DryRun {
		h.cfg.Admission.Finish(ctx, a, stored, err)
	}
}

// errRetried ends an update attempt storage abandoned for a conflict.
var errRetried = errors.New("rest: update attempt retried after a conflict")

// retried records a as r's update attempt; what the previous attempt
// charged (quota) is undone, as storage retries after a conflict.
func (h *Handler) retried(ctx context.Context, r *request, a *admission.Attributes) {
	if r.attempt != nil {
		h.finish(ctx, r.attempt, nil, errRetried)
	}
	r.attempt = a
}

// finishUpdate tells admission how an update ended, once storage is
// done with its attempts.
func (h *Handler) finishUpdate(ctx context.Context, r *request, stored runtime.Object, err error) {
	if r.attempt != nil {
		h.finish(ctx, r.attempt, stored, err)
		r.attempt = nil
	}
}

// updateStored stores what next makes of r's object, retrying on
// conflict, and tells admission how it ended; a dry run only applies
// next to the object as read.
func (h *Handler) updateStored(ctx context.Context, r *request, dry bool, pre storage.Preconditions, next func(cur runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	// A Service's update may take cluster IPs and node ports
	// (beginUpdate, settleUpdate): given back unless the update is
	// stored, and what it frees given back once it is. Other resources
	// take nothing (u stays nil).
	var u *serviceUpdate
	if r.res.Group == "" && r.res.Resource == "services" {
		u = &serviceUpdate{h: h}
		r.serviceUpdate = u
		defer func() { r.serviceUpdate = nil }()
	}
	if dry {
		defer u.revert()
		cur, err := h.cfg.Store.Get(ctx, r.res, r.info.Namespace, r.info.Name, 0)
		if err != nil {
			return nil, err
		}
		return next(cur)
	}
	out, err := h.cfg.Store.Update(ctx, r.res, r.info.Namespace, r.info.Name, pre, next)
	if err != nil {
		u.revert()
	} else {
		u.commit()
	}
	h.finishUpdate(ctx, r, out, err)
	return out, err
}
