package review

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
)

// Token lifetimes, as kube-apiserver's TokenRequest.
const (
	defaultExpirationSeconds = 60 * 60
	minExpirationSeconds     = 10 * 60
)

var tokenRequestKind = authnV1.WithKind("TokenRequest").GroupKind()

// tokenRequest issues a token for the service account of the URL
// (POST .../serviceaccounts/<name>/token; kubectl create token), bound to
// its audiences, its expiry and optionally a Pod, Secret or Node.
func (h *Handler) tokenRequest(ctx context.Context, c *call, obj runtime.Object) (runtime.Object, error) {
	req := obj.(*authenticationv1.TokenRequest)
	if h.cfg.Issuer == nil || !h.cfg.Issuer.CanIssue() {
		return nil, ErrDisabled
	}
	ns, name := c.info.Namespace, c.info.Name
	if req.Name != "" && req.Name != name {
		return nil, apierror.Invalid(tokenRequestKind, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != ns {
		return nil, apierror.Invalid(tokenRequestKind, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	saObj, err := h.cfg.Objects.Get(ctx, "serviceaccounts", ns, name)
	if err != nil {
		return nil, getError(err, "serviceaccounts", name)
	}
	sa, ok := saObj.(*corev1.ServiceAccount)
	if !ok {
		return nil, fmt.Errorf("review: service account lookup returned %T", saObj)
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = h.cfg.APIAudiences
	}
	if req.Spec.ExpirationSeconds == nil {
		req.Spec.ExpirationSeconds = new(int64(defaultExpirationSeconds))
	}
	req.Name, req.Namespace = sa.Name, sa.Namespace
	now := h.cfg.Now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	var errs field.ErrorList
	if exp := *req.Spec.ExpirationSeconds; exp < minExpirationSeconds {
		errs = append(errs, field.Invalid(field.NewPath("spec", "expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
	} else if exp > math.MaxUint32 {
		errs = append(errs, field.TooLong(field.NewPath("spec", "expirationSeconds"), exp, math.MaxUint32))
	}
	if len(errs) > 0 {
		return nil, apierror.Invalid(tokenRequestKind, "", errs)
	}
	issue := satoken.Request{
		Namespace: ns, ServiceAccount: satoken.Ref{Name: sa.Name, UID: string(sa.UID)},
		Audiences: req.Spec.Audiences, Expiration: time.Duration(*req.Spec.ExpirationSeconds) * time.Second, ID: h.cfg.NewID(),
	}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if err := h.bind(ctx, ns, name, ref, &issue); err != nil {
			return nil, err
		}
	}
	tok, err := h.cfg.Issuer.Issue(issue)
	if err != nil {
		return nil, err
	}
	req.Status = authenticationv1.TokenRequestStatus{Token: tok.Token, ExpirationTimestamp: metav1.NewTime(tok.ExpiresAt)}
	return req, nil
}

// bind resolves the object a token is bound to, as upstream: a Pod
// running as the service account (with its node), a Secret or a Node;
// a uid in the reference must match.
func (h *Handler) bind(ctx context.Context, ns, saName string, ref *authenticationv1.BoundObjectReference, issue *satoken.Request) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	if gvk.Group != "" {
		return apierror.BadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	var uid string
	switch gvk.Kind {
	case "Pod":
		obj, err := h.cfg.Objects.Get(ctx, "pods", ns, ref.Name)
		if err != nil {
			return getError(err, "pods", ref.Name)
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return fmt.Errorf("review: pod lookup returned %T", obj)
		}
		if pod.Spec.ServiceAccountName != saName {
			return apierror.BadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", saName))
		}
		uid = string(pod.UID)
		issue.Pod = &satoken.Ref{Name: pod.Name, UID: uid}
		if node := pod.Spec.NodeName; node != "" {
			issue.Node = &satoken.Ref{Name: node}
			if obj, err := h.cfg.Objects.Get(ctx, "nodes", "", node); err == nil {
				if n, ok := obj.(*corev1.Node); ok {
					issue.Node.UID = string(n.UID)
				}
			}
		}
	case "Secret":
		obj, err := h.cfg.Objects.Get(ctx, "secrets", ns, ref.Name)
		if err != nil {
			return getError(err, "secrets", ref.Name)
		}
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return fmt.Errorf("review: secret lookup returned %T", obj)
		}
		uid = string(s.UID)
		issue.Secret = &satoken.Ref{Name: s.Name, UID: uid}
	case "Node":
		obj, err := h.cfg.Objects.Get(ctx, "nodes", "", ref.Name)
		if err != nil {
			return getError(err, "nodes", ref.Name)
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Errorf("review: node lookup returned %T", obj)
		}
		uid = string(n.UID)
		issue.Node = &satoken.Ref{Name: n.Name, UID: uid}
	default:
		return apierror.BadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && string(ref.UID) != uid {
		return apierror.Conflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// getError makes a missing object the NotFound of its own resource (the
// URL's resource is serviceaccounts).
func getError(err error, resource, name string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return apierror.NotFound(schema.GroupResource{Resource: resource}, name)
	}
	return err
}
