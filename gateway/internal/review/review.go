// Package review serves the create-only APIs the gateway answers from its
// own state, storing nothing: authentication.k8s.io SelfSubjectReview
// (kubectl auth whoami) and TokenReview, authorization.k8s.io
// SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview
// (kubectl auth can-i) and SelfSubjectRulesReview (can-i --list), and the
// TokenRequest subresource serviceaccounts/token (kubectl create token).
// Requests and answers are JSON, YAML or protobuf, as for other
// resources.
package review

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage/registry"
)

// Rules lists what a user may do in a namespace, for
// SelfSubjectRulesReview: the rules, whether the list may be incomplete,
// and an evaluation error.
type Rules interface {
	RulesFor(u user.Info, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, err error)
}

// TokenAuthenticator authenticates a bearer token for TokenReview; ctx
// carries the audiences asked for (authenticator.WithAudiences).
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error)
}

// Getter reads the objects a TokenRequest refers to, consistently:
// *corev1.ServiceAccount, *corev1.Pod, *corev1.Secret or *corev1.Node
// for resource "serviceaccounts", "pods", "secrets" or "nodes". A missing
// object is an error matching storage.ErrNotFound.
type Getter interface {
	Get(ctx context.Context, resource, namespace, name string) (runtime.Object, error)
}

// Config configures a Handler.
type Config struct {
	Codec *negotiate.Codec
	// Authorizer answers the access reviews: the gateway's own.
	Authorizer authz.Authorizer
	Rules      Rules
	// Tokens authenticates TokenReviews; nil answers them 404.
	Tokens TokenAuthenticator
	// APIAudiences are the API's audiences: the default of TokenReview
	// and TokenRequest audiences.
	APIAudiences []string
	// Issuer signs TokenRequests; nil answers them 404, as
	// kube-apiserver without a signing key.
	Issuer *satoken.Tokens
	// Objects is required with Issuer.
	Objects Getter
	// RequestTimeout bounds one request. Default 60s.
	RequestTimeout time.Duration
	// Now returns the time. Default time.Now.
	Now func() time.Time
	// NewID returns a token's "jti". Default random UUIDs.
	NewID func() string
}

// Handler serves the review APIs and TokenRequest.
type Handler struct {
	cfg  Config
	base context.Context
}

// New returns a handler; base is the gateway's lifetime.
func New(base context.Context, cfg Config) (*Handler, error) {
	if cfg.Codec == nil || cfg.Authorizer == nil || cfg.Rules == nil {
		return nil, errors.New("cannot make review handler: Codec, Authorizer and Rules are required")
	}
	if cfg.Issuer != nil && cfg.Objects == nil {
		return nil, errors.New("cannot make review handler: Issuer needs Objects")
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewString
	}
	return &Handler{cfg: cfg, base: base}, nil
}

// endpoint is one API served: the kind it takes and answers, and what it
// does.
type endpoint struct {
	gvk    schema.GroupVersionKind
	newObj func() runtime.Object
	create func(h *Handler, ctx context.Context, r *call, obj runtime.Object) (runtime.Object, error)
}

var (
	authnV1 = authenticationv1.SchemeGroupVersion
	authzV1 = authorizationv1.SchemeGroupVersion
)

// endpoints, by the URL's group/resource[/subresource].
var endpoints = map[string]endpoint{
	"authentication.k8s.io/selfsubjectreviews": {authnV1.WithKind("SelfSubjectReview"),
		func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, (*Handler).selfSubjectReview},
	"authentication.k8s.io/tokenreviews": {authnV1.WithKind("TokenReview"),
		func() runtime.Object { return &authenticationv1.TokenReview{} }, (*Handler).tokenReview},
	"authorization.k8s.io/selfsubjectaccessreviews": {authzV1.WithKind("SelfSubjectAccessReview"),
		func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, (*Handler).selfSubjectAccessReview},
	"authorization.k8s.io/subjectaccessreviews": {authzV1.WithKind("SubjectAccessReview"),
		func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, (*Handler).subjectAccessReview},
	"authorization.k8s.io/localsubjectaccessreviews": {authzV1.WithKind("LocalSubjectAccessReview"),
		func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, (*Handler).localSubjectAccessReview},
	"authorization.k8s.io/selfsubjectrulesreviews": {authzV1.WithKind("SelfSubjectRulesReview"),
		func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, (*Handler).selfSubjectRulesReview},
	"/serviceaccounts/token": {authnV1.WithKind("TokenRequest"),
		func() runtime.Object { return &authenticationv1.TokenRequest{} }, (*Handler).tokenRequest},
}

func endpointKey(group, resource, subresource string) string {
	k := group + "/" + resource
	if subresource != "" {
		k += "/" + subresource
	}
	return k
}

// Serves reports whether the request is for one of the handler's APIs.
func (h *Handler) Serves(info *requestinfo.Info) bool {
	if info.APIVersion != "v1" {
		return false
	}
	_, ok := endpoints[endpointKey(info.APIGroup, info.Resource, info.Subresource)]
	return ok
}

// call is one request.
type call struct {
	info *requestinfo.Info
	user user.Info
}

// Serve answers a request for which Serves is true, made by u.
func (h *Handler) Serve(rc *fasthttp.RequestCtx, info *requestinfo.Info, res *registry.Resource, u user.Info) error {
	ep, ok := endpoints[endpointKey(info.APIGroup, info.Resource, info.Subresource)]
	if !ok {
		return fmt.Errorf("review: no endpoint for %s", info.Path)
	}
	gr := res.GVR().GroupResource()
	if info.Subresource != "" && info.Name == "" {
		return apierror.MethodNotSupported(gr, info.Verb)
	}
	if info.Verb != "create" {
		return apierror.MethodNotSupported(gr, info.Verb)
	}
	media, err := negotiate.Negotiate(string(rc.Request.Header.Peek("Accept")), negotiate.Endpoint{Resource: true, Protobuf: true})
	if err != nil {
		return err
	}
	if negotiate.PrettyHint(string(rc.QueryArgs().Peek("pretty")), string(rc.UserAgent())) {
		media.Pretty = true
	}
	format, err := negotiate.ContentType(string(rc.Request.Header.ContentType()))
	if err != nil {
		return err
	}
	fv, err := negotiate.ParseFieldValidation(string(rc.QueryArgs().Peek("fieldValidation")), "CreateOptions")
	if err != nil {
		return err
	}
	body := rc.PostBody()
	if len(body) == 0 {
		return apierror.BadRequest("the request body is empty")
	}
	obj, warnings, err := h.cfg.Codec.Decode(body, format, fv, ep.gvk, ep.newObj())
	if err != nil {
		return err
	}
	for _, w := range warnings {
		rc.Response.Header.Add("Warning", `299 - "`+w+`"`)
	}
	if got := obj.GetObjectKind().GroupVersionKind(); got.Kind != "" && got != ep.gvk {
		return apierror.BadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", got.Kind, ep.gvk.Kind))
	}
	ctx, cancel := context.WithTimeout(h.base, h.cfg.RequestTimeout)
	defer cancel()
	out, err := ep.create(h, ctx, &call{info: info, user: u}, obj)
	if err != nil {
		return err
	}
	out.GetObjectKind().SetGroupVersionKind(ep.gvk)
	data, err := h.cfg.Codec.Encode(out, media.Format, media.Pretty)
	if err != nil {
		return err
	}
	rc.SetStatusCode(fasthttp.StatusCreated)
	rc.SetContentType(media.ContentType())
	rc.SetBody(data)
	return nil
}

// ErrDisabled is returned for TokenRequest without a signing key and
// TokenReview without authenticators; the gateway answers 404, as
// kube-apiserver does for APIs it does not serve.
var ErrDisabled = errors.New("review: the server could not find the requested resource")
