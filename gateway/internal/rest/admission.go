package rest

import (
	"context"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/storage/registry"
)

// Admission is what the gateway checks and adds around writes, as
// kube-apiserver's admission plugins and policy-based storage do.
type Admission interface {
	// Admit runs on each create (old nil) and update of an object of res
	// made by u (nil when unknown), after defaulting and before
	// validation; it may change obj, and an error rejects the write.
	Admit(u user.Info, res *registry.Resource, obj, old runtime.Object) error
	// Created runs after an object was created (not on a dry run).
	Created(ctx context.Context, res *registry.Resource, obj runtime.Object)
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

func (h *Handler) admit(r *request, obj, old runtime.Object) error {
	if h.cfg.Admission == nil {
		return nil
	}
	return h.cfg.Admission.Admit(r.user, r.res, obj, old)
}

func (h *Handler) created(ctx context.Context, r *request, obj runtime.Object) {
	if h.cfg.Admission != nil {
		h.cfg.Admission.Created(ctx, r.res, obj)
	}
}
