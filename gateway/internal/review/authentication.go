package review

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
)

// selfSubjectReview answers who the requester is (kubectl auth whoami).
func (h *Handler) selfSubjectReview(_ context.Context, c *call, _ runtime.Object) (runtime.Object, error) {
	return &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(h.cfg.Now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: userInfo(c.user)},
	}, nil
}

func userInfo(u user.Info) authenticationv1.UserInfo {
	if u == nil {
		return authenticationv1.UserInfo{}
	}
	out := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		out.Extra = make(map[string]authenticationv1.ExtraValue, len(extra))
		for k, v := range extra {
			out.Extra[k] = v
		}
	}
	return out
}

// tokenReview authenticates the token in the review, as kube-apiserver's
// TokenReview: for the audiences asked (default: the API's).
func (h *Handler) tokenReview(ctx context.Context, _ *call, obj runtime.Object) (runtime.Object, error) {
	tr := obj.(*authenticationv1.TokenReview)
	if h.cfg.Tokens == nil {
		return nil, ErrDisabled
	}
	if tr.Spec.Token == "" {
		return nil, apierror.BadRequest("token is required for TokenReview in authentication")
	}
	auds := tr.Spec.Audiences
	if len(auds) == 0 {
		auds = h.cfg.APIAudiences
	}
	if len(auds) > 0 {
		ctx = authenticator.WithAudiences(ctx, auds)
	}
	resp, ok, err := h.cfg.Tokens.AuthenticateToken(ctx, tr.Spec.Token)
	out := &authenticationv1.TokenReview{ObjectMeta: tr.ObjectMeta, Spec: tr.Spec}
	out.Status.Authenticated = ok
	if err != nil {
		out.Status.Error = err.Error()
	}
	if ok && resp != nil && resp.User != nil {
		got := resp.Audiences
		if len(got) == 0 {
			got = auds // an authenticator without audiences: the ones asked
		}
		if len(auds) > 0 && len(authenticator.Audiences(auds).Intersect(got)) == 0 {
			out.Status = authenticationv1.TokenReviewStatus{Error: fmt.Sprintf("token audiences %q do not match %q", got, auds)}
			return out, nil
		}
		out.Status.User = userInfo(resp.User)
		out.Status.Audiences = got
	}
	return out, nil
}
