package authz

import (
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
)

func escalationFixture(t *testing.T) *Escalation {
	t.Helper()
	r := bootstrapped()
	rbacRes := func(verb, resource string, names ...string) rbacv1.PolicyRule {
		return rule(list(verb), list(rbacv1.GroupName), list(resource), names...)
	}
	r.UpsertClusterRole(cRole("role-escalator", nil, rbacRes("escalate", "roles")))
	r.UpsertClusterRole(cRole("clusterrole-escalator", nil, rbacRes("escalate", "clusterroles")))
	r.UpsertClusterRole(cRole("admin-binder", nil, rbacRes("bind", "clusterroles", "admin")))
	r.UpsertRole(role("b", "local", rule(list("get", "list"), list(""), list("configmaps"))))
	r.UpsertRoleBinding(roleBinding("b", "bob-edit", "ClusterRole", "edit", userSubj("bob")))
	r.UpsertRoleBinding(roleBinding("b", "ann-admin", "ClusterRole", "admin", userSubj("ann")))
	r.UpsertRoleBinding(roleBinding("b", "eve-escalate", "ClusterRole", "role-escalator", userSubj("eve")))
	r.UpsertRoleBinding(roleBinding("b", "ben-bind", "ClusterRole", "admin-binder", userSubj("ben")))
	r.UpsertClusterRoleBinding(clusterRoleBinding("cass-admin", "cluster-admin", userSubj("cass")))
	r.UpsertClusterRoleBinding(clusterRoleBinding("fay-escalate", "clusterrole-escalator", userSubj("fay")))
	a, err := New(Config{}, r)
	if err != nil {
		t.Fatal(err)
	}
	return NewEscalation(a, r)
}

func TestCheckRoleEscalation(t *testing.T) {
	e := escalationFixture(t)
	authn := func(name string) user.Info { return usr(name, user.AllAuthenticated) }
	core := list("")
	cases := []struct {
		name    string
		u       user.Info
		ns      string
		rules   []rbacv1.PolicyRule
		missing []string // compact strings of the missing rules; nil: allowed
	}{
		{"subset of what is held", authn("bob"), "b", []rbacv1.PolicyRule{
			rule(list("get", "list"), core, list("pods", "pods/log")),
			rule(list("update"), list("apps"), list("deployments/scale")),
		}, nil},
		{"narrower by resourceNames", authn("bob"), "b", []rbacv1.PolicyRule{rule(list("get"), core, list("secrets"), "s1")}, nil},
		{"cluster-wide rules held count in a namespace", authn("bob"), "b", []rbacv1.PolicyRule{
			{Verbs: list("create"), APIGroups: list("authorization.k8s.io"), Resources: list("selfsubjectaccessreviews")},
		}, nil},
		{"more than held", authn("bob"), "b", []rbacv1.PolicyRule{
			rule(list("get"), core, list("pods")),
			rule(list("get", "list"), core, list("nodes")),
		}, []string{`{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}`}},
		{"verb * is more than every verb held", authn("bob"), "b", []rbacv1.PolicyRule{rule(list("*"), core, list("pods"))},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["*"]}`}},
		{"rbac is not in edit", authn("bob"), "b", []rbacv1.PolicyRule{rule(list("create"), list(rbacv1.GroupName), list("rolebindings"))},
			[]string{`{APIGroups:["rbac.authorization.k8s.io"], Resources:["rolebindings"], Verbs:["create"]}`}},
		{"held in another namespace only", authn("bob"), "a", []rbacv1.PolicyRule{rule(list("get"), core, list("pods"))},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`}},
		{"URLs", authn("bob"), "b", []rbacv1.PolicyRule{urlRule(list("get"), "/version", "/metrics")},
			[]string{`{NonResourceURLs:["/metrics"], Verbs:["get"]}`}},
		{"escalate on roles in the namespace", authn("eve"), "b", []rbacv1.PolicyRule{rule(list("*"), list("*"), list("*"))}, nil},
		{"escalate does not reach other namespaces", authn("eve"), "a", []rbacv1.PolicyRule{rule(list("get"), core, list("pods"))},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`}},
		{"escalate on roles is not on clusterroles", authn("eve"), "", []rbacv1.PolicyRule{rule(list("get"), core, list("pods"))},
			[]string{`{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`}},
		{"escalate on clusterroles", authn("fay"), "", []rbacv1.PolicyRule{rule(list("*"), list("*"), list("*"))}, nil},
		{"cluster-admin holds everything", authn("cass"), "", []rbacv1.PolicyRule{rule(list("*"), list("*"), list("*")), urlRule(list("*"), "*")}, nil},
		{"system:masters", usr("root", user.SystemPrivilegedGroup), "", []rbacv1.PolicyRule{rule(list("*"), list("*"), list("*"))}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.CheckRoleEscalation(c.u, c.ns, "r", c.rules)
			if c.missing == nil {
				if err != nil {
					t.Fatalf("denied: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrEscalation) {
				t.Fatalf("got %v, want an escalation error", err)
			}
			want := `user "` + c.u.GetName() + `" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` +
				"\n" + strings.Join(c.missing, "\n")
			if err.Error() != want {
				t.Errorf("message:\n got %s\nwant %s", err, want)
			}
		})
	}
}

func TestCheckAggregationRule(t *testing.T) {
	e := escalationFixture(t)
	for name, allowed := range map[string]bool{"bob": false, "ann": false, "eve": false, "cass": true, "fay": true} {
		err := e.CheckAggregationRule(usr(name, user.AllAuthenticated), "agg")
		if allowed != (err == nil) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && (!errors.Is(err, ErrEscalation) || err.Error() != "must have cluster-admin privileges to use the aggregationRule") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := e.CheckAggregationRule(usr("root", user.SystemPrivilegedGroup), "agg"); err != nil {
		t.Errorf("system:masters: %v", err)
	}
}

func TestCheckBindingAllowed(t *testing.T) {
	e := escalationFixture(t)
	clusterRole := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	cases := []struct {
		who, ns string
		ref     rbacv1.RoleRef
		want    error // nil, ErrEscalation or ErrNotFound
	}{
		{"bob", "b", clusterRole("view"), nil}, // edit aggregates view
		{"bob", "b", clusterRole("edit"), nil},
		{"bob", "b", clusterRole("admin"), ErrEscalation},
		{"bob", "a", clusterRole("view"), ErrEscalation},
		{"bob", "", clusterRole("view"), ErrEscalation}, // a ClusterRoleBinding: everywhere
		{"bob", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "local"}, nil},
		{"bob", "b", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "absent"}, ErrNotFound},
		{"bob", "b", clusterRole("absent"), ErrNotFound},
		{"ann", "b", clusterRole("admin"), nil},
		{"ann", "b", clusterRole("system:basic-user"), nil}, // held cluster-wide
		{"ann", "b", clusterRole("cluster-admin"), ErrEscalation},
		{"ben", "b", clusterRole("admin"), nil}, // bind on exactly that role
		{"ben", "b", clusterRole("edit"), ErrEscalation},
		{"ben", "a", clusterRole("admin"), ErrEscalation},
		{"cass", "", clusterRole("cluster-admin"), nil},
	}
	for _, c := range cases {
		err := e.CheckBindingAllowed(usr(c.who, user.AllAuthenticated), c.ns, c.ref)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s binds %s %s in %q: got %v, want %v", c.who, c.ref.Kind, c.ref.Name, c.ns, err, c.want)
		}
	}
	err := e.CheckBindingAllowed(usr("bob", user.AllAuthenticated), "b", clusterRole("admin"))
	for _, want := range []string{`user "bob"`, `{APIGroups:["rbac.authorization.k8s.io"], Resources:["rolebindings"], Verbs:["create" "delete" "deletecollection" "get" "list" "patch" "update" "watch"]}`,
		`{APIGroups:["authorization.k8s.io"], Resources:["localsubjectaccessreviews"], Verbs:["create"]}`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %s:\n%v", want, err)
		}
	}
	if err := e.CheckBindingAllowed(usr("root", user.SystemPrivilegedGroup), "b", clusterRole("absent")); err != nil {
		t.Errorf("system:masters: %v", err)
	}
}

func TestEscalationReportsResolutionErrors(t *testing.T) {
	r := NewRBAC()
	r.UpsertRoleBinding(roleBinding("b", "rb", "Role", "gone", userSubj("bob")))
	a, _ := New(Config{}, r)
	err := NewEscalation(a, r).CheckRoleEscalation(usr("bob"), "b", "r", []rbacv1.PolicyRule{rule(list("get"), list(""), list("pods"))})
	if err == nil || !strings.HasSuffix(err.Error(), `; resolution errors: [role.rbac.authorization.k8s.io "gone" not found]`) {
		t.Errorf("got %v", err)
	}
}
