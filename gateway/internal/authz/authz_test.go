package authz

import (
	"errors"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
)

func TestNew(t *testing.T) {
	getPods := func(u user.Info) Attributes {
		return Attributes{User: u, IsResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "a", Name: "p"}
	}
	root := usr("root", user.SystemPrivilegedGroup)
	alice := usr("alice", user.AllAuthenticated)
	empty := NewRBAC() // no roles or bindings at all
	bound := NewRBAC()
	bound.UpsertRole(role("a", "r", rule(list("get"), list(""), list("pods"))))
	bound.UpsertRoleBinding(roleBinding("a", "rb", "Role", "r", userSubj("alice")))
	dangling := NewRBAC()
	dangling.UpsertRoleBinding(roleBinding("a", "rb", "Role", "gone", userSubj("alice")))

	cases := []struct {
		name       string
		modes      []string
		rbac       *RBAC
		a          Attributes
		want       Decision
		wantReason string
	}{
		{"system:masters without any binding", nil, empty, getPods(root), Allow, ""},
		{"system:masters even with AlwaysDeny", []string{ModeAlwaysDeny}, nil, getPods(root), Allow, ""},
		{"default mode is RBAC", nil, empty, getPods(alice), NoOpinion, ""},
		{"RBAC allows", []string{ModeRBAC}, bound, getPods(alice), Allow, `RBAC: allowed by RoleBinding "rb/a" of Role "r" to User "alice"`},
		{"AlwaysAllow", []string{ModeAlwaysAllow}, nil, getPods(alice), Allow, ""},
		{"RBAC then AlwaysAllow", []string{ModeRBAC, ModeAlwaysAllow}, empty, getPods(alice), Allow, ""},
		{"AlwaysDeny has no opinion", []string{ModeAlwaysDeny}, nil, getPods(alice), NoOpinion, "Everything is forbidden."},
		{"AlwaysDeny then AlwaysAllow", []string{ModeAlwaysDeny, ModeAlwaysAllow}, nil, getPods(alice), Allow, ""},
		{"reasons are joined", []string{ModeRBAC, ModeAlwaysDeny}, dangling, getPods(alice), NoOpinion,
			"RBAC: role.rbac.authorization.k8s.io \"gone\" not found\nEverything is forbidden."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := New(Config{Modes: c.modes}, c.rbac)
			if err != nil {
				t.Fatal(err)
			}
			got, reason := a.Authorize(c.a)
			if got != c.want || reason != c.wantReason {
				t.Errorf("got %v %q, want %v %q", got, reason, c.want, c.wantReason)
			}
		})
	}

	for _, bad := range [][]string{{"node", ModeRBAC}, {"ABAC"}, {"rbac"}, {"webhook"}} {
		if _, err := New(Config{Modes: bad}, empty); !errors.Is(err, ErrUnsupportedMode) {
			t.Errorf("modes %v: %v, want ErrUnsupportedMode", bad, err)
		}
	}
	if _, err := New(Config{Modes: []string{ModeRBAC, ModeRBAC}}, empty); err == nil {
		t.Error("a mode twice was accepted")
	}
	if _, err := New(Config{Modes: []string{ModeRBAC}}, nil); err == nil {
		t.Error("mode RBAC without an RBAC authorizer was accepted")
	}
	if _, err := New(Config{Modes: []string{ModeWebhook}}, empty); err == nil || errors.Is(err, ErrUnsupportedMode) {
		t.Errorf("mode Webhook without a webhook authorizer: %v", err)
	}
	if _, err := New(Config{Modes: []string{ModeNode, ModeRBAC}}, empty); err == nil || errors.Is(err, ErrUnsupportedMode) {
		t.Errorf("mode Node without a Node authorizer: %v", err)
	}
}

// fixed answers every request the same way (a stand-in for the webhook).
type fixed struct {
	d      Decision
	reason string
}

func (f fixed) Authorize(Attributes) (Decision, string) { return f.d, f.reason }

// TestWebhookMode checks the webhook's place in the chain: asked after
// the modes before it, its deny final, its no opinion passed on.
func TestWebhookMode(t *testing.T) {
	empty, _ := load(nil)
	alice := Attributes{User: &user.DefaultInfo{Name: "alice"}, IsResourceRequest: true, Verb: "get", Resource: "pods"}
	f := func(modes []string, wh fixed, want Decision, wantReason string) {
		t.Helper()
		a, err := New(Config{Modes: modes, Webhook: wh}, empty)
		if err != nil {
			t.Fatal(err)
		}
		if got, reason := a.Authorize(alice); got != want || reason != wantReason {
			t.Errorf("modes %v, webhook %v: got %v %q, want %v %q", modes, wh, got, reason, want, wantReason)
		}
	}
	f([]string{ModeRBAC, ModeWebhook}, fixed{Allow, ""}, Allow, "")
	f([]string{ModeRBAC, ModeWebhook}, fixed{Deny, "no"}, Deny, "no")
	f([]string{ModeWebhook, ModeAlwaysAllow}, fixed{Deny, "no"}, Deny, "no")
	f([]string{ModeWebhook, ModeAlwaysAllow}, fixed{NoOpinion, "dunno"}, Allow, "")
	f([]string{ModeWebhook, ModeAlwaysDeny}, fixed{NoOpinion, "dunno"}, NoOpinion, "dunno\nEverything is forbidden.")
	f([]string{ModeAlwaysAllow, ModeWebhook}, fixed{Deny, "no"}, Allow, "")
}

// TestNodeMode checks the Node authorizer's place in the chain: Node,RBAC
// as kube-apiserver recommends, the node's no opinion (with its reason)
// passed on to RBAC.
func TestNodeMode(t *testing.T) {
	empty, _ := load(nil)
	alice := Attributes{User: &user.DefaultInfo{Name: "alice"}, IsResourceRequest: true, Verb: "get", Resource: "pods"}
	f := func(modes []string, node fixed, want Decision, wantReason string) {
		t.Helper()
		a, err := New(Config{Modes: modes, Node: node}, empty)
		if err != nil {
			t.Fatal(err)
		}
		if got, reason := a.Authorize(alice); got != want || reason != wantReason {
			t.Errorf("modes %v, node %v: got %v %q, want %v %q", modes, node, got, reason, want, wantReason)
		}
	}
	f([]string{ModeNode, ModeRBAC}, fixed{Allow, ""}, Allow, "")
	f([]string{ModeNode, ModeRBAC}, fixed{NoOpinion, "no relationship"}, NoOpinion, "no relationship")
	f([]string{ModeNode, ModeAlwaysAllow}, fixed{NoOpinion, "no relationship"}, Allow, "")
	f([]string{ModeNode, ModeAlwaysDeny}, fixed{NoOpinion, "no relationship"}, NoOpinion, "no relationship\nEverything is forbidden.")
}

func TestAttributesWithoutUser(t *testing.T) {
	r, _ := load(fixture())
	a, _ := New(Config{}, r)
	if d, _ := a.Authorize(Attributes{IsResourceRequest: true, Verb: "get", Resource: "pods"}); d != NoOpinion {
		t.Errorf("no user: %v", d)
	}
	if rules, err := r.RulesFor(nil, "a"); rules != nil || err != nil {
		t.Errorf("RulesFor(nil): %v %v", rules, err)
	}
}
