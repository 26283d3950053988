package satoken

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	kjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
	"k8s.io/apiserver/pkg/authentication/user"
)

// algorithms are the signature algorithms accepted (those kube-apiserver
// signs with).
var algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// deletionGrace: a token stays valid this long after its service account
// or bound object got a deletionTimestamp, as in kube-apiserver.
const deletionGrace = 60 * time.Second

// maxTokenBytes bounds what is parsed: kube-apiserver's tokens are ~1 KB.
const maxTokenBytes = 64 << 10

// AuthenticateToken implements k8s.io/apiserver's authenticator.Token. A
// token that is not a JWT, or not one of the configured issuers, is not
// ours: (nil, false, nil), so that other authenticators may try it. A
// token of ours that fails any check is an error.
func (t *Tokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if len(token) > maxTokenBytes || strings.Count(token, ".") != 2 {
		return nil, false, nil
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return nil, false, nil
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, false, nil
	}
	if !slices.Contains(t.cfg.Issuers, unverified.Issuer) {
		return nil, false, nil
	}
	var public jwt.Claims
	var private privateClaims
	verified := false
	for _, k := range t.cfg.Keys {
		if err := tok.Claims(k, &public, &private); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, false, errors.New("invalid bearer token: signature does not verify")
	}
	// The audiences asked for (a TokenReview's), else the API's.
	target := authenticator.Audiences(t.cfg.Audiences)
	if auds, ok := authenticator.AudiencesFrom(ctx); ok {
		target = auds
	}
	u, err := t.validate(ctx, &public, &private, target)
	if err != nil {
		return nil, false, fmt.Errorf("invalid bearer token: %w", err)
	}
	return &authenticator.Response{Audiences: target.Intersect(authenticator.Audiences(public.Audience)), User: u}, true, nil
}

// validate checks the claims of a token whose signature verified, as
// kube-apiserver's bound-token validator, and returns its user.
func (t *Tokens) validate(ctx context.Context, public *jwt.Claims, private *privateClaims, target authenticator.Audiences) (user.Info, error) {
	now := t.cfg.Now()
	switch err := public.Validate(jwt.Expected{Time: now}); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, errors.New("service account token has expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, errors.New("service account token is not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, errors.New("service account token is issued in the future")
	default:
		return nil, errors.New("service account token claims could not be validated")
	}
	if public.Expiry == nil {
		return nil, errors.New("service account token has no expiry")
	}
	if len(public.Audience) == 0 || !slices.ContainsFunc(target, public.Audience.Contains) {
		return nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", []string(public.Audience), []string(target))
	}
	k := &private.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		return nil, errors.New("service account token lacks its kubernetes.io claims")
	}
	if public.Subject != serviceaccount.MakeUsername(k.Namespace, k.ServiceAccount.Name) {
		return nil, errors.New("service account token subject does not match its kubernetes.io claims")
	}
	if k.Pod != nil && k.Secret != nil {
		return nil, errors.New("service account token is bound to both a pod and a secret")
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.LookupTimeout)
	defer cancel()
	if err := t.check(ctx, now, "serviceaccounts", k.Namespace, k.ServiceAccount); err != nil {
		return nil, err
	}
	extra := map[string][]string{}
	if k.Secret != nil {
		if err := t.check(ctx, now, "secrets", k.Namespace, *k.Secret); err != nil {
			return nil, err
		}
	}
	if k.Pod != nil {
		if err := t.check(ctx, now, "pods", k.Namespace, *k.Pod); err != nil {
			return nil, err
		}
		extra[serviceaccount.PodNameKey] = []string{k.Pod.Name}
		extra[serviceaccount.PodUIDKey] = []string{k.Pod.UID}
	}
	if k.Node != nil {
		if k.Pod == nil {
			// Bound to the node itself: it must still exist. A pod's
			// node is informational, as upstream.
			if err := t.check(ctx, now, "nodes", "", *k.Node); err != nil {
				return nil, err
			}
		}
		extra[serviceaccount.NodeNameKey] = []string{k.Node.Name}
		if k.Node.UID != "" {
			extra[serviceaccount.NodeUIDKey] = []string{k.Node.UID}
		}
	}
	if id := kjwt.CredentialIDForJTI(public.ID); id != "" {
		extra[user.CredentialIDKey] = []string{id}
	}
	if len(extra) == 0 {
		extra = nil
	}
	return &user.DefaultInfo{
		Name:   serviceaccount.MakeUsername(k.Namespace, k.ServiceAccount.Name),
		UID:    k.ServiceAccount.UID,
		Groups: serviceaccount.MakeGroupNames(k.Namespace),
		Extra:  extra,
	}, nil
}

// check verifies that the object a token refers to exists with its uid
// and is not long deleted.
func (t *Tokens) check(ctx context.Context, now time.Time, resource, namespace string, ref Ref) error {
	what := strings.TrimSuffix(resource, "s")
	if what == "serviceaccount" {
		what = "service account"
	}
	obj, err := t.cfg.Lookup.Object(ctx, resource, namespace, ref.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%s %s has been deleted", what, qualified(namespace, ref.Name))
	case err != nil:
		return fmt.Errorf("cannot look up %s %s: %w", what, qualified(namespace, ref.Name), err)
	case ref.UID != "" && obj.UID != ref.UID:
		return fmt.Errorf("%s UID (%s) does not match claim (%s)", what, obj.UID, ref.UID)
	case obj.DeletionTimestamp != nil && obj.DeletionTimestamp.Add(deletionGrace).Before(now):
		return fmt.Errorf("%s %s is being deleted", what, qualified(namespace, ref.Name))
	}
	return nil
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
