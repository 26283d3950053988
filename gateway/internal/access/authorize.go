package access

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/impersonate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/rest"
	"github.com/kgate/kgate/gateway/internal/review"
	"github.com/kgate/kgate/storage/registry"
)

// Authorize runs after authentication, as kube-apiserver's filters:
// impersonation (each Impersonate-* header authorized with verb
// "impersonate"), then authorization of the request itself for the user
// it runs as. A denial is kube-apiserver's 403. The user is recorded on
// rc for the handlers (rest.SetUser).
func (a *Access) Authorize(rc *fasthttp.RequestCtx, info *requestinfo.Info, u user.Info) error {
	if impersonate.Requested(&rc.Request.Header) {
		as, err := impersonate.User(&rc.Request.Header, u, a.authorizer)
		var f *impersonate.Forbidden
		if errors.As(err, &f) {
			return forbidden(f.Attributes, f.Reason)
		}
		if err != nil {
			return err
		}
		a.d.Logger.Debug("impersonating", "user", u.GetName(), "as", as.GetName(), "groups", as.GetGroups())
		u = as
	}
	at := authz.AttributesFor(u, info)
	if a.selectors {
		switch at.Verb {
		case "list", "watch", "deletecollection": // upstream's verbs with selectors
			q := rc.QueryArgs()
			at.FieldSelector, at.LabelSelector = string(q.Peek("fieldSelector")), string(q.Peek("labelSelector"))
		}
	}
	if d, reason, err := authz.Evaluate(a.authorizer, at); d != authz.Allow {
		if d == authz.NoOpinion && err != nil {
			// As kube-apiserver: an authorizer that could not decide
			// (the webhook down) is a server error, not a denial.
			return apierror.InternalError(fmt.Errorf("cannot authorize the request: %w", err))
		}
		return forbidden(at, reason)
	}
	rest.SetUser(rc, u)
	return nil
}

// forbidden is kube-apiserver's 403 for attributes a and the authorizer's
// reason: `pods is forbidden: User "alice" cannot list resource "pods" in
// API group "" in the namespace "ns"`.
func forbidden(a authz.Attributes, reason string) error {
	name := ""
	if a.User != nil {
		name = a.User.GetName()
	}
	var msg string
	switch {
	case !a.IsResourceRequest:
		msg = fmt.Sprintf("User %q cannot %s path %q", name, a.Verb, a.Path)
	default:
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		if a.Namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", name, a.Verb, resource, a.APIGroup, a.Namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", name, a.Verb, resource, a.APIGroup)
		}
	}
	if reason != "" {
		msg += ": " + reason
	}
	return apierror.Forbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
}

// Serves reports whether a request is for one of the review APIs
// answered here (ServeReview) rather than by the REST handlers.
func (a *Access) Serves(info *requestinfo.Info) bool { return a.review.Serves(info) }

// ServeReview answers a request to a review API as the user Authorize
// recorded.
func (a *Access) ServeReview(rc *fasthttp.RequestCtx, info *requestinfo.Info, res *registry.Resource) error {
	err := a.review.Serve(rc, info, res, rest.User(rc))
	if errors.Is(err, review.ErrDisabled) {
		return rest.ErrNotFoundPath
	}
	return err
}
