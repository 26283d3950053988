package webhook

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kgate/kgate/gateway/internal/authz"
)

var metaSAR = metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}

var alice = &user.DefaultInfo{
	Name: "alice", UID: "uid-alice", Groups: []string{"team-a", "system:authenticated"},
	Extra: map[string][]string{"scopes": {"read", "write"}},
}

// listPods is alice listing pods in namespace a with selectors.
var listPods = authz.Attributes{
	User: alice, IsResourceRequest: true, Verb: "list", Namespace: "a", APIGroup: "", APIVersion: "v1",
	Resource: "pods", Path: "/api/v1/namespaces/a/pods",
	FieldSelector: "spec.nodeName=n1,status.phase!=Failed", LabelSelector: "app in (web,api),!canary",
}

// byRule allows alice everything in namespace a, denies namespace b with
// a reason, has no opinion otherwise; non-resource /healthz is allowed.
func byRule(r received) (int, string) {
	s := r.spec
	switch {
	case s.NonResourceAttributes != nil && s.NonResourceAttributes.Path == "/healthz":
		return 200, answer(true, false, "")
	case s.ResourceAttributes == nil || s.User != "alice":
		return 200, answer(false, false, "")
	case s.ResourceAttributes.Namespace == "a":
		return 200, answer(true, false, "alice owns a")
	case s.ResourceAttributes.Namespace == "b":
		return 200, answer(false, true, "b is off limits")
	default:
		return 200, answer(false, false, "not my business")
	}
}

// newAuthorizer builds an authorizer on the fake webhook; tune edits
// the config first.
func newAuthorizer(t *testing.T, f *fakeWebhook, tune func(*Config)) *Authorizer {
	t.Helper()
	cfg := Config{ConfigFile: f.kubeconfig(t, false), Logger: testLogger(t), Clock: &fakeClock{now: time.Unix(1e9, 0)}}
	if tune != nil {
		tune(&cfg)
	}
	w, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestRequestBody checks the SubjectAccessReview the webhook receives:
// kube-apiserver's fields for a resource request (selectors as
// requirements) and a non-resource one, sent to the kubeconfig's path
// with the client certificate.
func TestRequestBody(t *testing.T) {
	f := newFakeWebhook(t, byRule)
	w := newAuthorizer(t, f, nil)

	if d, reason := w.Authorize(listPods); d != authz.Allow || reason != "alice owns a" {
		t.Fatalf("list pods in a: %v %q", d, reason)
	}
	got := f.calls()
	if len(got) != 1 {
		t.Fatalf("%d calls, want 1", len(got))
	}
	r := got[0]
	if r.path != "/authorize" || r.apiVersion != "authorization.k8s.io/v1" || r.kind != "SubjectAccessReview" || r.clientCN != "kgate-gateway" {
		t.Errorf("path %q apiVersion %q kind %q client %q", r.path, r.apiVersion, r.kind, r.clientCN)
	}
	want := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "uid-alice", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"read", "write"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "a", Verb: "list", Version: "v1", Resource: "pods",
			FieldSelector: &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
				{Key: "spec.nodeName", Operator: metav1.FieldSelectorOpIn, Values: []string{"n1"}},
				{Key: "status.phase", Operator: metav1.FieldSelectorOpNotIn, Values: []string{"Failed"}},
			}},
			LabelSelector: &authorizationv1.LabelSelectorAttributes{Requirements: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"api", "web"}},
				{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
			}},
		},
	}
	if !reflect.DeepEqual(r.spec, want) {
		t.Errorf("spec\n got %+v\nwant %+v", r.spec, want)
	}

	// A get with a subresource and name, in a group.
	getScale := authz.Attributes{User: alice, IsResourceRequest: true, Verb: "get", Namespace: "c", APIGroup: "apps",
		APIVersion: "v1", Resource: "deployments", Subresource: "scale", Name: "web"}
	if d, reason := w.Authorize(getScale); d != authz.NoOpinion || reason != "not my business" {
		t.Errorf("get scale in c: %v %q", d, reason)
	}
	wantRA := &authorizationv1.ResourceAttributes{Namespace: "c", Verb: "get", Group: "apps", Version: "v1",
		Resource: "deployments", Subresource: "scale", Name: "web"}
	if got := f.calls(); len(got) != 2 || !reflect.DeepEqual(got[1].spec.ResourceAttributes, wantRA) || got[1].spec.NonResourceAttributes != nil {
		t.Errorf("get scale: %+v", got[len(got)-1].spec)
	}

	// A non-resource request; a selector that does not parse is left out.
	if d, _ := w.Authorize(authz.Attributes{User: &user.DefaultInfo{Name: "bob"}, Verb: "get", Path: "/healthz"}); d != authz.Allow {
		t.Errorf("/healthz: %v", d)
	}
	if got := f.calls(); len(got) != 3 || got[2].spec.ResourceAttributes != nil ||
		!reflect.DeepEqual(got[2].spec.NonResourceAttributes, &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}) ||
		got[2].spec.User != "bob" || got[2].spec.Extra != nil {
		t.Errorf("/healthz: %+v", got[2].spec)
	}
	bad := listPods
	bad.FieldSelector, bad.LabelSelector, bad.Namespace = "nooperator", "x in (", "d"
	w.Authorize(bad)
	if got := f.calls(); len(got) != 4 || got[3].spec.ResourceAttributes.FieldSelector != nil || got[3].spec.ResourceAttributes.LabelSelector != nil {
		t.Errorf("bad selectors: %+v", got[len(got)-1].spec.ResourceAttributes)
	}
}

// TestDecisions checks how answers read, alone and in a chain:
// allow and deny are final, no opinion passes on.
func TestDecisions(t *testing.T) {
	f := newFakeWebhook(t, byRule)
	w := newAuthorizer(t, f, nil)
	in := func(ns string) authz.Attributes {
		a := listPods
		a.Namespace, a.FieldSelector, a.LabelSelector = ns, "", ""
		return a
	}
	cases := []struct {
		ns         string
		modes      []string
		want       authz.Decision
		wantReason string
	}{
		{"a", []string{authz.ModeWebhook}, authz.Allow, "alice owns a"},
		{"b", []string{authz.ModeWebhook}, authz.Deny, "b is off limits"},
		{"c", []string{authz.ModeWebhook}, authz.NoOpinion, "not my business"},
		{"b", []string{authz.ModeWebhook, authz.ModeAlwaysAllow}, authz.Deny, "b is off limits"},
		{"c", []string{authz.ModeWebhook, authz.ModeAlwaysAllow}, authz.Allow, ""},
		{"c", []string{authz.ModeWebhook, authz.ModeAlwaysDeny}, authz.NoOpinion, "not my business\nEverything is forbidden."},
		{"b", []string{authz.ModeAlwaysAllow, authz.ModeWebhook}, authz.Allow, ""},
	}
	for _, c := range cases {
		chain, err := authz.New(authz.Config{Modes: c.modes, Webhook: w}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d, reason := chain.Authorize(in(c.ns)); d != c.want || reason != c.wantReason {
			t.Errorf("%v in %s: %v %q, want %v %q", c.modes, c.ns, d, reason, c.want, c.wantReason)
		}
	}

	// Both allowed and denied is a deny.
	f.setAnswer(func(received) (int, string) { return 200, answer(true, true, "confused") })
	if d, reason := w.Authorize(in("e")); d != authz.Deny || reason != "confused" {
		t.Errorf("allowed and denied: %v %q", d, reason)
	}
	// A system:masters member is not sent to the webhook.
	chain, _ := authz.New(authz.Config{Modes: []string{authz.ModeWebhook}, Webhook: w}, nil)
	n := len(f.calls())
	root := authz.Attributes{User: &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}, IsResourceRequest: true, Verb: "delete", Resource: "nodes"}
	if d, _ := chain.Authorize(root); d != authz.Allow || len(f.calls()) != n {
		t.Errorf("system:masters: %v, %d calls", d, len(f.calls())-n)
	}
}

// TestCache checks that answers are cached by request: an allow for
// AuthorizedTTL, a deny or no opinion for UnauthorizedTTL; a negative
// TTL turns caching off.
func TestCache(t *testing.T) {
	f := newFakeWebhook(t, byRule)
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	w := newAuthorizer(t, f, func(c *Config) {
		c.Clock, c.AuthorizedTTL, c.UnauthorizedTTL = clock, time.Minute, 10*time.Second
	})
	inA, inB, inC := listPods, listPods, listPods
	inB.Namespace, inC.Namespace = "b", "c"
	calls := func() int { return len(f.calls()) }
	ask := func(a authz.Attributes, want authz.Decision, wantCalls int) {
		t.Helper()
		if d, _ := w.Authorize(a); d != want {
			t.Errorf("%s: %v, want %v", a.Namespace, d, want)
		}
		if n := calls(); n != wantCalls {
			t.Errorf("%s: %d calls, want %d", a.Namespace, n, wantCalls)
		}
	}
	ask(inA, authz.Allow, 1)
	ask(inA, authz.Allow, 1) // cached
	ask(inB, authz.Deny, 2)
	ask(inB, authz.Deny, 2) // cached
	ask(inC, authz.NoOpinion, 3)
	ask(inC, authz.NoOpinion, 3) // cached

	// Another user, or another verb, is another request.
	other := inA
	other.User = &user.DefaultInfo{Name: "alice", Groups: []string{"team-b"}}
	ask(other, authz.Allow, 4)
	other = inA
	other.Verb = "watch"
	ask(other, authz.Allow, 5)

	// Past the unauthorized TTL the deny and no opinion are asked again,
	// the allow is not; past the authorized TTL it is.
	clock.step(11 * time.Second)
	ask(inA, authz.Allow, 5)
	ask(inB, authz.Deny, 6)
	ask(inC, authz.NoOpinion, 7)
	clock.step(50 * time.Second)
	ask(inA, authz.Allow, 8)

	// A changed answer shows once the cached one expires.
	f.setAnswer(func(received) (int, string) { return 200, answer(false, true, "revoked") })
	ask(inA, authz.Allow, 8)
	clock.step(61 * time.Second)
	ask(inA, authz.Deny, 9)

	// No caching.
	f2 := newFakeWebhook(t, byRule)
	w2 := newAuthorizer(t, f2, func(c *Config) { c.AuthorizedTTL, c.UnauthorizedTTL = -1, -1 })
	for range 3 {
		w2.Authorize(inA)
		w2.Authorize(inB)
	}
	if n := len(f2.calls()); n != 6 {
		t.Errorf("without a cache: %d calls, want 6", n)
	}
}

// TestFailures checks that every failure is no opinion, so the next mode
// decides, and is not cached: the webhook down, too slow, answering 500
// (retried within the budget) or 401, or answering what is not a
// SubjectAccessReview.
func TestFailures(t *testing.T) {
	cases := []struct {
		name      string
		answer    func(received) (int, string)
		wantCalls int // per decision
		timeout   time.Duration
	}{
		{"500", func(received) (int, string) { return 500, `{"kind":"Status"}` }, 3, 0},
		{"429", func(received) (int, string) { return 429, `{}` }, 3, 0},
		{"403", func(received) (int, string) { return 403, answer(true, false, "") }, 1, 0},
		{"malformed", func(received) (int, string) { return 200, `{"status": {"allowed": tru` }, 1, 0},
		{"not JSON", func(received) (int, string) { return 200, `<html>allowed</html>` }, 1, 0},
		{"wrong kind", func(received) (int, string) { return 200, `{"kind":"Status","status":{"allowed":true}}` }, 1, 0},
		{"wrong group", func(received) (int, string) {
			return 200, `{"apiVersion":"v1","kind":"SubjectAccessReview","status":{"allowed":true}}`
		}, 1, 0},
		{"status wrong type", func(received) (int, string) { return 200, `{"status": {"allowed": "yes"}}` }, 1, 0},
		{"slow", func(r received) (int, string) { <-r.gone; return 200, answer(true, false, "") }, 1, 200 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeWebhook(t, c.answer)
			w := newAuthorizer(t, f, func(cfg *Config) { cfg.Timeout = c.timeout })
			chain, err := authz.New(authz.Config{Modes: []string{authz.ModeWebhook, authz.ModeAlwaysAllow}, Webhook: w}, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if d, reason := w.Authorize(listPods); d != authz.NoOpinion || reason != "" {
				t.Errorf("alone: %v %q", d, reason)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a failing call took %v", took)
			}
			if d, _ := chain.Authorize(listPods); d != authz.Allow {
				t.Errorf("before AlwaysAllow: %v", d)
			}
			if n := len(f.calls()); n != 2*c.wantCalls {
				t.Errorf("%d calls, want %d (failures are not cached)", n, 2*c.wantCalls)
			}
		})
	}

	t.Run("down", func(t *testing.T) {
		f := newFakeWebhook(t, byRule)
		w := newAuthorizer(t, f, nil)
		f.srv.Close()
		chain, _ := authz.New(authz.Config{Modes: []string{authz.ModeWebhook, authz.ModeAlwaysDeny}, Webhook: w}, nil)
		if d, reason := chain.Authorize(listPods); d != authz.NoOpinion || reason != "Everything is forbidden." {
			t.Errorf("down: %v %q", d, reason)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		f := newFakeWebhook(t, func(r received) (int, string) { <-r.gone; return 200, answer(true, false, "") })
		ctx, cancel := context.WithCancel(context.Background())
		w, err := New(ctx, Config{ConfigFile: f.kubeconfig(t, false), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		if d, _ := w.Authorize(listPods); d != authz.NoOpinion || time.Since(start) > 900*time.Millisecond {
			t.Errorf("after shutdown: %v in %v", d, time.Since(start))
		}
	})

	t.Run("untrusted server", func(t *testing.T) {
		f := newFakeWebhook(t, byRule)
		other := newFakeWebhook(t, byRule)
		f.ca = other.ca // the kubeconfig gets the wrong CA
		w := newAuthorizer(t, f, nil)
		if d, _ := w.Authorize(listPods); d != authz.NoOpinion || len(f.calls()) != 0 {
			t.Errorf("wrong CA: %v, %d calls", d, len(f.calls()))
		}
	})
}

// TestTokenAndV1beta1 uses a bearer token from the kubeconfig and
// speaks authorization.k8s.io/v1beta1, where groups are "group".
func TestTokenAndV1beta1(t *testing.T) {
	f := newFakeWebhook(t, func(r received) (int, string) {
		return 200, `{"apiVersion":"authorization.k8s.io/v1beta1","kind":"SubjectAccessReview","status":{"allowed":true,"reason":"beta"}}`
	})
	w, err := New(context.Background(), Config{ConfigFile: f.kubeconfig(t, true), Version: "v1beta1", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if d, reason := w.Authorize(listPods); d != authz.Allow || reason != "beta" {
		t.Fatalf("v1beta1: %v %q", d, reason)
	}
	r := f.calls()[0]
	if r.bearer != testToken || r.clientCN != "" || r.apiVersion != "authorization.k8s.io/v1beta1" {
		t.Errorf("bearer %q client %q apiVersion %q", r.bearer, r.clientCN, r.apiVersion)
	}
	spec, _ := r.raw["spec"].(map[string]any)
	if _, ok := spec["groups"]; ok || spec["group"] == nil || spec["user"] != "alice" {
		t.Errorf("v1beta1 spec: %v", spec)
	}
	ra, _ := spec["resourceAttributes"].(map[string]any)
	if ra["namespace"] != "a" || ra["verb"] != "list" || ra["fieldSelector"] == nil || ra["labelSelector"] == nil {
		t.Errorf("v1beta1 resourceAttributes: %v", ra)
	}
}

// TestMetrics checks the calls counted by status code.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	fail := false
	f := newFakeWebhook(t, func(r received) (int, string) {
		if fail {
			return 500, "{}"
		}
		return byRule(r)
	})
	w := newAuthorizer(t, f, func(c *Config) { c.Metrics, c.RetryBudget = m, -1 })
	w.Authorize(listPods)
	w.Authorize(listPods) // cached: no call
	inB := listPods
	inB.Namespace = "b"
	w.Authorize(inB)
	f.setAnswer(func(received) (int, string) { return 500, "{}" })
	inC := listPods
	inC.Namespace = "c"
	w.Authorize(inC)
	f.srv.Close()
	inD := listPods
	inD.Namespace = "d"
	w.Authorize(inD)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	requests, latency := map[string]float64{}, map[string]uint64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			code := mt.GetLabel()[0].GetValue()
			switch mf.GetName() {
			case "kgate_gateway_authorization_webhook_requests_total":
				requests[code] = mt.GetCounter().GetValue()
			case "kgate_gateway_authorization_webhook_request_duration_seconds":
				latency[code] = mt.GetHistogram().GetSampleCount()
			}
		}
	}
	if want := map[string]float64{"200": 2, "500": 1, "<error>": 1}; !reflect.DeepEqual(requests, want) {
		t.Errorf("requests %v, want %v", requests, want)
	}
	if want := map[string]uint64{"200": 2, "500": 1, "<error>": 1}; !reflect.DeepEqual(latency, want) {
		t.Errorf("latency counts %v, want %v", latency, want)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registered twice")
	}
}

// TestConfig checks New's errors.
func TestConfig(t *testing.T) {
	f := newFakeWebhook(t, byRule)
	good := f.kubeconfig(t, false)
	log := testLogger(t)
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Logger: log}, "a config file is required"},
		{Config{ConfigFile: good}, "a logger is required"},
		{Config{ConfigFile: good, Logger: log, Version: "v2"}, `unsupported version "v2"`},
		{Config{ConfigFile: t.TempDir() + "/missing", Logger: log}, "cannot load"},
	}
	for _, c := range cases {
		_, err := New(context.Background(), c.cfg)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	w, err := New(context.Background(), Config{ConfigFile: good, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.Version != "v1" || w.cfg.AuthorizedTTL != 5*time.Minute || w.cfg.UnauthorizedTTL != 30*time.Second || w.cfg.Timeout != 30*time.Second {
		t.Errorf("defaults: %+v", w.cfg)
	}
}

// TestCacheKey checks that requests share a cache key only when they are
// equal: changing any attribute or part of the user, or moving bytes
// from one attribute to the next, changes it.
func TestCacheKey(t *testing.T) {
	base := listPods
	base.APIGroup, base.Subresource, base.Name = "apps", "scale", "web"
	key := cacheKey(base)
	same := base
	same.User = &user.DefaultInfo{Name: alice.Name, UID: alice.UID, Groups: alice.Groups,
		Extra: map[string][]string{"scopes": {"read", "write"}}}
	if cacheKey(same) != key {
		t.Error("equal requests have different keys")
	}
	f := func(name string, edit func(a *authz.Attributes)) {
		t.Helper()
		a := base
		edit(&a)
		if cacheKey(a) == key {
			t.Errorf("%s: same key", name)
		}
	}
	withUser := func(edit func(u *user.DefaultInfo)) func(a *authz.Attributes) {
		return func(a *authz.Attributes) {
			u := *alice
			edit(&u)
			a.User = &u
		}
	}
	f("name", withUser(func(u *user.DefaultInfo) { u.Name = "bob" }))
	f("uid", withUser(func(u *user.DefaultInfo) { u.UID = "" }))
	f("groups", withUser(func(u *user.DefaultInfo) { u.Groups = []string{"team-a"} }))
	f("group order", withUser(func(u *user.DefaultInfo) { u.Groups = []string{"system:authenticated", "team-a"} }))
	f("extra values", withUser(func(u *user.DefaultInfo) { u.Extra = map[string][]string{"scopes": {"read"}} }))
	f("extra keys", withUser(func(u *user.DefaultInfo) { u.Extra = map[string][]string{"scope": {"read", "write"}} }))
	f("no user", func(a *authz.Attributes) { a.User = nil })
	f("non-resource", func(a *authz.Attributes) { a.IsResourceRequest = false })
	f("verb", func(a *authz.Attributes) { a.Verb = "watch" })
	f("namespace", func(a *authz.Attributes) { a.Namespace = "b" })
	f("group", func(a *authz.Attributes) { a.APIGroup = "" })
	f("version", func(a *authz.Attributes) { a.APIVersion = "v2" })
	f("resource", func(a *authz.Attributes) { a.Resource = "pod" })
	f("subresource", func(a *authz.Attributes) { a.Subresource = "" })
	f("name", func(a *authz.Attributes) { a.Name = "api" })
	f("path", func(a *authz.Attributes) { a.Path = "/" })
	f("field selector", func(a *authz.Attributes) { a.FieldSelector = "" })
	f("label selector", func(a *authz.Attributes) { a.LabelSelector = "" })
	f("bytes moved between attributes", func(a *authz.Attributes) { a.Verb, a.Namespace = "lista", "" })
	f("bytes moved between groups", withUser(func(u *user.DefaultInfo) { u.Groups = []string{"team-asystem:authenticated"} }))
}
