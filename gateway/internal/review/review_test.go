package review

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/negotiate"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
	"github.com/kgate/kgate/gateway/internal/satoken"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// podsOnly allows listing pods in namespace "a" to alice.
type podsOnly struct{}

func (podsOnly) Authorize(a authz.Attributes) (authz.Decision, string) {
	if a.User != nil && a.User.GetName() == "alice" && a.Verb == "list" && a.Resource == "pods" && a.Namespace == "a" {
		return authz.Allow, "RBAC: allowed by RoleBinding"
	}
	return authz.NoOpinion, ""
}

type rules struct{}

func (rules) RulesFor(u user.Info, ns string) ([]rbacv1.PolicyRule, bool, error) {
	return []rbacv1.PolicyRule{
		{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{Verbs: []string{"get"}, NonResourceURLs: []string{"/api"}},
	}, false, fmt.Errorf("role %q not found", "gone")
}

// objects is what TokenRequests may refer to.
type objects map[string]runtime.Object

func (o objects) Get(_ context.Context, resource, ns, name string) (runtime.Object, error) {
	if obj, ok := o[resource+"/"+ns+"/"+name]; ok {
		return obj, nil
	}
	return nil, fmt.Errorf("%s: %w", name, storage.ErrNotFound)
}

func (o objects) Object(ctx context.Context, resource, ns, name string) (satoken.Object, error) {
	obj, err := o.Get(ctx, resource, ns, name)
	if err != nil {
		return satoken.Object{}, satoken.ErrNotFound
	}
	m, _ := obj.(metav1.Object)
	return satoken.Object{UID: string(m.GetUID())}, nil
}

type fixture struct {
	h     *Handler
	codec *negotiate.Codec
	reg   *registry.Registry
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	reg, err := registry.NewBuiltin()
	if err != nil {
		t.Fatal(err)
	}
	codec, err := negotiate.NewCodec(reg.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{codec: codec, reg: reg, now: time.Unix(1_800_000_000, 0)}
	objs := objects{
		"serviceaccounts/ns/builder": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "builder", UID: "uid-sa"}},
		"pods/ns/p": &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
			Spec: corev1.PodSpec{ServiceAccountName: "builder", NodeName: "n1"}},
		"nodes//n1": &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-n1"}},
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	issuer, err := satoken.New(satoken.Config{Issuers: []string{"https://kgate"}, SigningKey: key, Lookup: objs,
		Now: func() time.Time { return fx.now }})
	if err != nil {
		t.Fatal(err)
	}
	fx.h, err = New(context.Background(), Config{Codec: codec, Authorizer: podsOnly{}, Rules: rules{}, Tokens: issuer,
		APIAudiences: []string{"https://kgate"}, Issuer: issuer, Objects: objs, Now: func() time.Time { return fx.now },
		NewID: func() string { return "jti" }})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

// post serves body (of format f) at path as u and decodes the answer
// into out; it returns the error Serve returned.
func (fx *fixture) post(t *testing.T, u user.Info, path string, f negotiate.Format, in, out runtime.Object) error {
	t.Helper()
	var info requestinfo.Info
	if err := requestinfo.Parse(&info, "POST", path, nil); err != nil {
		t.Fatal(err)
	}
	if !fx.h.Serves(&info) {
		t.Fatalf("%s not served", path)
	}
	res, ok := fx.reg.Lookup(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
	if !ok {
		t.Fatalf("%s not registered", path)
	}
	body, err := fx.codec.Encode(in, f, false)
	if err != nil {
		t.Fatal(err)
	}
	var rc fasthttp.RequestCtx
	rc.Request.Header.SetMethod("POST")
	rc.Request.Header.SetContentType(f.MediaType())
	rc.Request.Header.Set("Accept", f.MediaType())
	rc.Request.SetBody(body)
	if err := fx.h.Serve(&rc, &info, res, u); err != nil {
		return err
	}
	if rc.Response.StatusCode() != 201 || string(rc.Response.Header.ContentType()) != f.MediaType() {
		t.Fatalf("answer %d %s", rc.Response.StatusCode(), rc.Response.Header.ContentType())
	}
	gvk := out.GetObjectKind().GroupVersionKind()
	if _, _, err := fx.codec.Decode(rc.Response.Body(), f, negotiate.Strict, gvk, out); err != nil {
		t.Fatalf("cannot decode answer: %v\n%q", err, rc.Response.Body())
	}
	return nil
}

var alice = &user.DefaultInfo{Name: "alice", UID: "uid-a", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"k": {"v"}}}

func sarOut() *authorizationv1.SelfSubjectAccessReview {
	out := &authorizationv1.SelfSubjectAccessReview{}
	out.SetGroupVersionKind(authzV1.WithKind("SelfSubjectAccessReview"))
	return out
}

func TestAccessReviews(t *testing.T) {
	fx := newFixture(t)
	for _, f := range []negotiate.Format{negotiate.JSON, negotiate.Protobuf, negotiate.YAML} {
		t.Run(f.String(), func(t *testing.T) {
			ask := func(ns string) authorizationv1.SubjectAccessReviewStatus {
				out := sarOut()
				if err := fx.post(t, alice, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", f, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: ns}},
				}, out); err != nil {
					t.Fatal(err)
				}
				return out.Status
			}
			if s := ask("a"); !s.Allowed || s.Denied || s.Reason != "RBAC: allowed by RoleBinding" {
				t.Errorf("allowed case: %+v", s)
			}
			if s := ask("b"); s.Allowed || s.Denied {
				t.Errorf("denied case: %+v", s)
			}
			sar := &authorizationv1.SubjectAccessReview{}
			sar.SetGroupVersionKind(authzV1.WithKind("SubjectAccessReview"))
			if err := fx.post(t, nil, "/apis/authorization.k8s.io/v1/subjectaccessreviews", f, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "a"}},
			}, sar); err != nil || !sar.Status.Allowed {
				t.Errorf("SubjectAccessReview: %+v %v", sar.Status, err)
			}
		})
	}
	invalid := func(name, path string, in runtime.Object) {
		t.Run(name, func(t *testing.T) {
			err := fx.post(t, alice, path, negotiate.JSON, in, sarOut())
			st := apierror.Status(err, schema.GroupResource{}, "")
			if st.Code != 422 && st.Code != 400 {
				t.Errorf("%v: code %d, want 422 or 400", err, st.Code)
			}
		})
	}
	invalid("neither attributes", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", &authorizationv1.SelfSubjectAccessReview{})
	invalid("both attributes", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{}, NonResourceAttributes: &authorizationv1.NonResourceAttributes{}}})
	invalid("no user or group", "/apis/authorization.k8s.io/v1/subjectaccessreviews", &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{}}})
	invalid("local, other namespace", "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews", &authorizationv1.LocalSubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "b"}}})
	invalid("rules without namespace", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", &authorizationv1.SelfSubjectRulesReview{})
}

func TestSelfSubjectRulesAndWhoami(t *testing.T) {
	fx := newFixture(t)
	ssrr := &authorizationv1.SelfSubjectRulesReview{}
	ssrr.SetGroupVersionKind(authzV1.WithKind("SelfSubjectRulesReview"))
	if err := fx.post(t, alice, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", negotiate.Protobuf,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: "a"}}, ssrr); err != nil {
		t.Fatal(err)
	}
	st := ssrr.Status
	if len(st.ResourceRules) != 1 || st.ResourceRules[0].Resources[0] != "pods" || len(st.NonResourceRules) != 1 ||
		st.NonResourceRules[0].NonResourceURLs[0] != "/api" || !strings.Contains(st.EvaluationError, "gone") {
		t.Errorf("rules %+v", st)
	}
	ssr := &authenticationv1.SelfSubjectReview{}
	ssr.SetGroupVersionKind(authnV1.WithKind("SelfSubjectReview"))
	if err := fx.post(t, alice, "/apis/authentication.k8s.io/v1/selfsubjectreviews", negotiate.Protobuf, &authenticationv1.SelfSubjectReview{}, ssr); err != nil {
		t.Fatal(err)
	}
	if u := ssr.Status.UserInfo; u.Username != "alice" || u.UID != "uid-a" || len(u.Groups) != 2 || u.Extra["k"][0] != "v" || !ssr.CreationTimestamp.Time.Equal(fx.now) {
		t.Errorf("whoami %+v", ssr)
	}
}

func TestTokenRequest(t *testing.T) {
	fx := newFixture(t)
	const path = "/api/v1/namespaces/ns/serviceaccounts/builder/token"
	out := func() *authenticationv1.TokenRequest {
		tr := &authenticationv1.TokenRequest{}
		tr.SetGroupVersionKind(authnV1.WithKind("TokenRequest"))
		return tr
	}
	tr := out()
	if err := fx.post(t, alice, path, negotiate.Protobuf, &authenticationv1.TokenRequest{}, tr); err != nil {
		t.Fatal(err)
	}
	if *tr.Spec.ExpirationSeconds != 3600 || !tr.Status.ExpirationTimestamp.Time.Equal(fx.now.Add(time.Hour)) ||
		tr.Name != "builder" || tr.Namespace != "ns" || len(tr.Spec.Audiences) != 1 || tr.Status.Token == "" {
		t.Errorf("token request %+v", tr)
	}
	resp, ok, err := fx.h.cfg.Issuer.AuthenticateToken(context.Background(), tr.Status.Token)
	if !ok || err != nil || resp.User.GetName() != "system:serviceaccount:ns:builder" {
		t.Errorf("issued token does not authenticate: %v %v", ok, err)
	}
	bound := out()
	if err := fx.post(t, alice, path, negotiate.JSON, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "uid-p"}}}, bound); err != nil {
		t.Fatal(err)
	}
	resp, ok, err = fx.h.cfg.Issuer.AuthenticateToken(context.Background(), bound.Status.Token)
	if !ok || err != nil || resp.User.GetExtra()["authentication.kubernetes.io/node-uid"][0] != "uid-n1" {
		t.Errorf("pod-bound token: %v %v %+v", ok, err, resp)
	}
	code := func(p string, in *authenticationv1.TokenRequest) int32 {
		err := fx.post(t, alice, p, negotiate.JSON, in, out())
		return apierror.Status(err, schema.GroupResource{Resource: "serviceaccounts"}, "builder").Code
	}
	short, huge := int64(599), int64(1<<33)
	for name, c := range map[string]struct {
		path string
		in   *authenticationv1.TokenRequest
		want int32
	}{
		"too short":          {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &short}}, 422},
		"too long":           {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &huge}}, 422},
		"name mismatch":      {path, &authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, 422},
		"no such account":    {"/api/v1/namespaces/ns/serviceaccounts/nobody/token", &authenticationv1.TokenRequest{}, 404},
		"pod uid mismatch":   {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: "x"}}}, 409},
		"no such pod":        {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "q"}}}, 404},
		"unsupported kind":   {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "ConfigMap", APIVersion: "v1", Name: "c"}}}, 400},
		"other group's kind": {path, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "apps/v1", Name: "p"}}}, 400},
	} {
		if got := code(c.path, c.in); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	// A pod of another service account.
	fx.h.cfg.Objects.(objects)["serviceaccounts/ns/other"] = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "uid-o"}}
	if got := code("/api/v1/namespaces/ns/serviceaccounts/other/token", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p"}}}); got != 400 {
		t.Errorf("pod of another service account: %d, want 400", got)
	}
}

func TestTokenReview(t *testing.T) {
	fx := newFixture(t)
	tr := &authenticationv1.TokenRequest{}
	tr.SetGroupVersionKind(authnV1.WithKind("TokenRequest"))
	if err := fx.post(t, alice, "/api/v1/namespaces/ns/serviceaccounts/builder/token", negotiate.JSON, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}}}, tr); err != nil {
		t.Fatal(err)
	}
	review := func(auds ...string) authenticationv1.TokenReviewStatus {
		out := &authenticationv1.TokenReview{}
		out.SetGroupVersionKind(authnV1.WithKind("TokenReview"))
		if err := fx.post(t, alice, "/apis/authentication.k8s.io/v1/tokenreviews", negotiate.JSON, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tr.Status.Token, Audiences: auds}}, out); err != nil {
			t.Fatal(err)
		}
		return out.Status
	}
	if s := review(); s.Authenticated || s.Error == "" {
		t.Errorf("token for vault reviewed for the API: %+v", s)
	}
	if s := review("vault"); !s.Authenticated || s.User.Username != "system:serviceaccount:ns:builder" || len(s.Audiences) != 1 || s.Audiences[0] != "vault" {
		t.Errorf("token for vault reviewed for vault: %+v", s)
	}
	err := fx.post(t, alice, "/apis/authentication.k8s.io/v1/tokenreviews", negotiate.JSON, &authenticationv1.TokenReview{}, &authenticationv1.TokenReview{})
	if st := apierror.Status(err, schema.GroupResource{}, ""); st.Code != 400 {
		t.Errorf("empty token: %v", err)
	}
}

// TestReviewSelectors checks that a review's selectors reach the
// authorizer (the webhook sends them on): raw, or requirements written out.
func TestReviewSelectors(t *testing.T) {
	f := func(fs *authorizationv1.FieldSelectorAttributes, ls *authorizationv1.LabelSelectorAttributes, wantField, wantLabel string) {
		t.Helper()
		if got := rawFieldSelector(fs); got != wantField {
			t.Errorf("field selector %+v: %q, want %q", fs, got, wantField)
		}
		if got := rawLabelSelector(ls); got != wantLabel {
			t.Errorf("label selector %+v: %q, want %q", ls, got, wantLabel)
		}
	}
	f(nil, nil, "", "")
	f(&authorizationv1.FieldSelectorAttributes{RawSelector: "spec.nodeName=n1"}, &authorizationv1.LabelSelectorAttributes{RawSelector: "app=web"},
		"spec.nodeName=n1", "app=web")
	f(&authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
		{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1"}},
		{Key: "status.phase", Operator: metav1.FieldSelectorOpNotIn, Values: []string{"Failed"}},
		{Key: "x", Operator: metav1.FieldSelectorOpExists},
	}}, &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
		{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}, "spec.nodeName=n1,status.phase!=Failed", "app in (api,web),!canary")
}
