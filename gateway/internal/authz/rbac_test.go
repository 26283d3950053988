package authz

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"
	"github.com/kgate/kgate/gateway/internal/requestinfo"
)

// request parses a request as the gateway does and builds its attributes.
func request(t *testing.T, u user.Info, method, path string) Attributes {
	t.Helper()
	var info requestinfo.Info
	if err := requestinfo.Parse(&info, method, path, nil); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return AttributesFor(u, &info)
}

func bootstrapped() *RBAC {
	r := NewRBAC()
	for _, c := range rbacbootstrap.Roles() {
		r.UpsertClusterRole(c)
	}
	for _, b := range rbacbootstrap.Bindings() {
		r.UpsertClusterRoleBinding(b)
	}
	return r
}

func TestViewUserIsScopedToItsNamespace(t *testing.T) {
	r := bootstrapped()
	r.UpsertRoleBinding(roleBinding("team-a", "alice-view", "ClusterRole", "view", userSubj("alice")))
	alice := usr("alice", user.AllAuthenticated)
	cases := []struct {
		method, path string
		want         Decision
	}{
		{"GET", "/api/v1/namespaces/team-a/pods", Allow},
		{"GET", "/api/v1/namespaces/team-a/pods/web-1", Allow},
		{"GET", "/api/v1/namespaces/team-a/pods/web-1/log", Allow},
		{"GET", "/apis/apps/v1/namespaces/team-a/deployments", Allow},
		{"GET", "/apis/apps/v1/watch/namespaces/team-a/deployments", Allow},
		{"GET", "/api/v1/namespaces/team-a", Allow},             // its own namespace
		{"GET", "/api/v1/namespaces/team-a/secrets", NoOpinion}, // view excludes secrets
		{"GET", "/api/v1/namespaces/team-a/pods/web-1/exec", NoOpinion},
		{"POST", "/api/v1/namespaces/team-a/pods", NoOpinion},
		{"DELETE", "/api/v1/namespaces/team-a/pods/web-1", NoOpinion},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles", NoOpinion},
		{"GET", "/api/v1/namespaces/team-b/pods", NoOpinion},
		{"GET", "/api/v1/namespaces/team-b", NoOpinion},
		{"GET", "/api/v1/pods", NoOpinion}, // all namespaces
		{"GET", "/api/v1/namespaces", NoOpinion},
		{"GET", "/api/v1/nodes", NoOpinion},
		// What every authenticated user has.
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", Allow},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", Allow},
		{"GET", "/version", Allow},
		{"GET", "/apis", Allow},
		{"GET", "/apis/apps/v1", Allow},
		{"GET", "/openapi/v3/apis/apps/v1", Allow},
		{"GET", "/healthz", Allow},
		{"GET", "/metrics", NoOpinion},
		{"GET", "/logs/", NoOpinion},
	}
	for _, c := range cases {
		a := request(t, alice, c.method, c.path)
		if got, reason := r.Authorize(a); got != c.want {
			t.Errorf("%s %s: got %v (%s), want %v", c.method, c.path, got, reason, c.want)
		}
	}
	// Anonymous users only see the public information.
	anon := usr(user.Anonymous, user.AllUnauthenticated)
	for path, want := range map[string]Decision{"/healthz": Allow, "/version": Allow, "/readyz": Allow, "/apis": NoOpinion, "/api/v1/namespaces/team-a/pods": NoOpinion} {
		if got, _ := r.Authorize(request(t, anon, "GET", path)); got != want {
			t.Errorf("anonymous GET %s: got %v, want %v", path, got, want)
		}
	}
}

func TestBindingSemantics(t *testing.T) {
	r, _ := load(fixture())
	res := func(u user.Info, verb, group, resource, sub, ns, name string) Attributes {
		return Attributes{User: u, IsResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	bob := usr("bob", user.AllAuthenticated)
	qa := usr("quinn", "qa")
	cases := []struct {
		name   string
		a      Attributes
		want   Decision
		reason string // when set, the exact reason
	}{
		{"RoleBinding of ClusterRole grants in its namespace", res(bob, "create", "", "pods", "", "b", ""), Allow,
			`RBAC: allowed by RoleBinding "edit-bob/b" of ClusterRole "edit" to User "bob"`},
		{"... through a group subject", res(qa, "create", "", "pods", "", "b", ""), Allow,
			`RBAC: allowed by RoleBinding "edit-bob/b" of ClusterRole "edit" to Group "qa"`},
		{"... not in another namespace", res(bob, "create", "", "pods", "", "a", ""), NoOpinion, ""},
		{"... not cluster-wide", res(bob, "list", "", "pods", "", "", ""), NoOpinion, ""},
		{"ServiceAccount subject without namespace is of the binding's", res(saUser("a", "builder"), "get", "", "pods", "", "a", "p"), Allow,
			`RBAC: allowed by RoleBinding "pods-builder/a" of Role "pod-reader" to ServiceAccount "builder/a"`},
		{"... not a namesake elsewhere", res(saUser("b", "builder"), "get", "", "pods", "", "a", "p"), NoOpinion, ""},
		{"... nor a user named builder", res(usr("builder"), "get", "", "pods", "", "a", "p"), NoOpinion, ""},
		{"ServiceAccount of another namespace in a RoleBinding", res(saUser("a", "builder"), "create", "", "serviceaccounts", "token", "b", "x"), Allow,
			`RBAC: allowed by RoleBinding "tokens/b" of Role "sa-tokens" to ServiceAccount "builder/a"`},
		{"ServiceAccount without namespace in a ClusterRoleBinding matches no one", res(saUser("", "orphan"), "list", "", "pods", "", "a", ""), NoOpinion, ""},
		{"... whatever its namespace", res(saUser("x", "orphan"), "list", "", "pods", "", "x", ""), NoOpinion, ""},
		{"user name system:serviceaccount:ns:name is the service account", res(usr("system:serviceaccount:kube-system:deployer"), "delete", "apps", "deployments", "", "z", "d"), Allow,
			`RBAC: allowed by ClusterRoleBinding "apps-deployer" of ClusterRole "apps-all" to ServiceAccount "deployer/kube-system"`},
		{"group system:serviceaccounts:ns", res(saUser("b", "worker"), "update", "apps", "deployments", "scale", "b", "d"), Allow,
			`RBAC: allowed by RoleBinding "scale-sas/b" of Role "wild-sub" to Group "system:serviceaccounts:b"`},
		{"... not for other namespaces' service accounts", res(saUser("a", "builder"), "update", "apps", "deployments", "scale", "b", "d"), NoOpinion, ""},
		{"group system:serviceaccounts", res(saUser("zz", "any"), "get", "", "configmaps", "", "c", "x"), Allow,
			`RBAC: allowed by RoleBinding "view-sas/c" of ClusterRole "view" to Group "system:serviceaccounts"`},
		{"Role of another namespace is not found", res(usr("alice"), "get", "", "pods", "", "b", "p"), NoOpinion,
			`RBAC: role.rbac.authorization.k8s.io "pod-reader" not found`},
		{"missing roles are listed", res(usr("dave", "devs"), "get", "", "pods", "", "c", "p"), NoOpinion,
			`RBAC: [clusterrole.rbac.authorization.k8s.io "ghost-role" not found, authz: unsupported role reference kind: "Thing", role.rbac.authorization.k8s.io "nope" not found]`},
		{"rules of other bindings still apply", res(usr("dave", "devs"), "patch", "", "pods", "status", "c", "p"), Allow,
			`RBAC: allowed by ClusterRoleBinding "status-devs" of ClusterRole "status-writer" to Group "devs"`},
		{"aggregated through a nested aggregated role", res(saUser("kube-system", "ctrl"), "create", "batch", "jobs", "", "q", ""), Allow,
			`RBAC: allowed by ClusterRoleBinding "agg-ctrl" of ClusterRole "agg-team" to ServiceAccount "ctrl/kube-system"`},
		{"aggregated by a matchExpressions selector, with resourceNames", res(usr("frank"), "get", "apps", "deployments", "", "a", "web"), Allow, ""},
		{"... other names", res(usr("frank"), "get", "apps", "deployments", "", "a", "api"), NoOpinion, ""},
		{"not aggregated without the label", res(usr("frank"), "get", "", "nodes", "", "a", "n"), NoOpinion, ""},
		{"aggregation cycle ends at the leaves", res(usr("henry"), "delete", "coordination.k8s.io", "leases", "", "a", "l"), Allow, ""},
		{"resourceNames: get", res(usr("erin"), "get", "", "secrets", "", "a", "s1"), Allow, ""},
		{"resourceNames: list has no name", res(usr("erin"), "list", "", "secrets", "", "a", ""), NoOpinion, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, reason := r.Authorize(c.a)
			if got != c.want {
				t.Fatalf("got %v (%s), want %v", got, reason, c.want)
			}
			if c.reason != "" && reason != c.reason {
				t.Errorf("reason:\n got %s\nwant %s", reason, c.reason)
			}
		})
	}
}

func TestIncrementalUpdates(t *testing.T) {
	r := NewRBAC()
	alice, bob := usr("alice"), usr("bob")
	getPod := func(u user.Info, ns string) Attributes {
		return Attributes{User: u, IsResourceRequest: true, Verb: "get", Resource: "pods", Namespace: ns, Name: "p"}
	}
	step := 0
	expect := func(a Attributes, want Decision) {
		t.Helper()
		if got, reason := r.Authorize(a); got != want {
			t.Fatalf("step %d: %s: got %v (%s), want %v", step, describe(a), got, reason, want)
		}
	}
	next := func() { step++ }

	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertRole(role("a", "reader", rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertRoleBinding(roleBinding("a", "rb", "Role", "reader", userSubj("alice")))
	expect(getPod(alice, "a"), Allow)
	expect(getPod(alice, "b"), NoOpinion)
	next() // a rule dropped from the role
	r.UpsertRole(role("a", "reader", rule(list("list"), list(""), list("pods"))))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertRole(role("a", "reader", rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), Allow)
	next() // the binding changes subject
	r.UpsertRoleBinding(roleBinding("a", "rb", "Role", "reader", userSubj("bob")))
	expect(getPod(alice, "a"), NoOpinion)
	expect(getPod(bob, "a"), Allow)
	next() // the role goes: a dangling reference
	r.DeleteRole("a", "reader")
	if got, reason := r.Authorize(getPod(bob, "a")); got != NoOpinion || !strings.Contains(reason, `"reader" not found`) {
		t.Fatalf("after deleting the role: %v %q", got, reason)
	}
	next() // the binding goes
	r.DeleteRoleBinding("a", "rb")
	if got, reason := r.Authorize(getPod(bob, "a")); got != NoOpinion || reason != "" {
		t.Fatalf("after deleting the binding: %v %q", got, reason)
	}
	r.DeleteRoleBinding("a", "rb") // twice is harmless
	r.DeleteRole("a", "reader")

	next() // aggregation follows its members
	r.UpsertClusterRoleBinding(clusterRoleBinding("crb", "agg", userSubj("alice")))
	r.UpsertClusterRole(aggRole("agg", nil, matchLabels("l", "1")))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertClusterRole(cRole("m1", map[string]string{"l": "1"}, rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), Allow)
	r.UpsertClusterRole(cRole("m1", map[string]string{"l": "2"}, rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertClusterRole(cRole("m1", map[string]string{"l": "1"}, rule(list("list"), list(""), list("pods"))))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertClusterRole(cRole("m1", map[string]string{"l": "1"}, rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), Allow)
	r.DeleteClusterRole("m1")
	expect(getPod(alice, "a"), NoOpinion)
	next() // through a nested aggregated role
	r.UpsertClusterRole(cRole("leaf", map[string]string{"k": "1"}, rule(list("get"), list(""), list("pods"))))
	expect(getPod(alice, "a"), NoOpinion)
	r.UpsertClusterRole(aggRole("mid", map[string]string{"l": "1"}, matchLabels("k", "1")))
	expect(getPod(alice, "a"), Allow)
	r.DeleteClusterRole("mid")
	expect(getPod(alice, "a"), NoOpinion)
	next() // the aggregated role's own selector changes
	r.UpsertClusterRole(aggRole("agg", nil, matchLabels("k", "1")))
	expect(getPod(alice, "a"), Allow)
	next() // an aggregated role loses its aggregation rule: its own rules count
	r.UpsertClusterRole(cRole("agg", nil, rule(list("get"), list(""), list("secrets"))))
	expect(getPod(alice, "a"), NoOpinion)
	expect(Attributes{User: alice, IsResourceRequest: true, Verb: "get", Resource: "secrets", Namespace: "a", Name: "s"}, Allow)
	next() // and gains it back: its own rules no longer count
	r.UpsertClusterRole(&rbacv1.ClusterRole{ObjectMeta: cRole("agg", nil).ObjectMeta,
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: nil},
		Rules:           []rbacv1.PolicyRule{rule(list("*"), list("*"), list("*"))}})
	expect(getPod(alice, "a"), NoOpinion)
	next() // a ClusterRoleBinding changes its role
	r.UpsertClusterRole(cRole("pods", nil, rule(list("get"), list(""), list("pods"))))
	r.UpsertClusterRoleBinding(clusterRoleBinding("crb", "pods", userSubj("alice")))
	expect(getPod(alice, "a"), Allow)
	expect(getPod(alice, ""), Allow)
	r.DeleteClusterRoleBinding("crb")
	expect(getPod(alice, "a"), NoOpinion)
}

func TestReplace(t *testing.T) {
	r, _ := load(fixture())
	erin := usr("erin")
	logs := Attributes{User: erin, IsResourceRequest: true, Verb: "get", Resource: "pods", Subresource: "log", Namespace: "a", Name: "p"}
	if d, _ := r.Authorize(logs); d != Allow {
		t.Fatalf("before: %v", d)
	}
	r.ReplaceClusterRoleBindings([]*rbacv1.ClusterRoleBinding{clusterRoleBinding("only", "view", userSubj("x"))})
	if d, _ := r.Authorize(logs); d != NoOpinion {
		t.Fatalf("after replacing the cluster role bindings: %v", d)
	}
	r.ReplaceClusterRoles([]*rbacv1.ClusterRole{cRole("view", nil, rule(list("get"), list(""), list("pods/log")))})
	r.ReplaceClusterRoleBindings([]*rbacv1.ClusterRoleBinding{clusterRoleBinding("only", "view", userSubj("erin"))})
	if d, _ := r.Authorize(logs); d != Allow {
		t.Fatalf("after replacing the cluster roles: %v", d)
	}
	r.ReplaceRoles([]*rbacv1.Role{role("b", "r", rule(list("*"), list("*"), list("*")))})
	r.ReplaceRoleBindings([]*rbacv1.RoleBinding{roleBinding("b", "rb", "Role", "r", userSubj("carol"))})
	carol := usr("carol")
	for ns, want := range map[string]Decision{"b": Allow, "c": NoOpinion} {
		if d, _ := r.Authorize(Attributes{User: carol, IsResourceRequest: true, Verb: "delete", Resource: "x", Namespace: ns}); d != want {
			t.Errorf("carol in %s: %v, want %v", ns, d, want)
		}
	}
}

func TestUpsertAndDeleteByType(t *testing.T) {
	r := NewRBAC()
	objs := []runtime.Object{
		role("a", "r", rule(list("get"), list(""), list("pods"))),
		cRole("c", nil),
		roleBinding("a", "rb", "Role", "r", userSubj("u")),
		clusterRoleBinding("crb", "c", userSubj("u")),
	}
	for _, o := range objs {
		if err := r.Upsert(o); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := r.Authorize(Attributes{User: usr("u"), IsResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "a"}); d != Allow {
		t.Fatalf("got %v", d)
	}
	if err := r.Delete(roleBinding("a", "rb", "", "")); err != nil {
		t.Fatal(err)
	}
	if d, _ := r.Authorize(Attributes{User: usr("u"), IsResourceRequest: true, Verb: "get", Resource: "pods", Namespace: "a"}); d != NoOpinion {
		t.Fatalf("after delete: got %v", d)
	}
	if err := r.Upsert(&corev1.Pod{}); err == nil {
		t.Error("Upsert took a Pod")
	}
	if err := r.Delete(&corev1.Pod{}); err == nil {
		t.Error("Delete took a Pod")
	}
}

// TestConcurrentReadsAndUpdates runs decisions while bindings and roles
// change (run with -race): what is not touched keeps its decision.
func TestConcurrentReadsAndUpdates(t *testing.T) {
	r, _ := load(fixture())
	stable := Attributes{User: usr("bob"), IsResourceRequest: true, Verb: "create", Resource: "pods", Namespace: "b"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if d, reason := r.Authorize(stable); d != Allow {
					errs <- fmt.Errorf("stable request: %v %s", d, reason)
					return
				}
				_, _ = r.RulesFor(usr("dave", "devs"), "c")
			}
		}()
	}
	for i := range 2000 {
		name := fmt.Sprintf("churn-%d", i%50)
		r.UpsertClusterRole(cRole(name, map[string]string{"team": "x"}, rule(list("get"), list(""), list(name))))
		r.UpsertRoleBinding(roleBinding("b", name, "ClusterRole", name, userSubj("bob"), groupSubj("devs")))
		r.UpsertClusterRoleBinding(clusterRoleBinding(name, name, userSubj("bob")))
		if i%3 == 0 {
			r.DeleteClusterRole(name)
			r.DeleteRoleBinding("b", name)
			r.DeleteClusterRoleBinding(name)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
