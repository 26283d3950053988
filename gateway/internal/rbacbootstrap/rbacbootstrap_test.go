package rbacbootstrap_test

import (
	"slices"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/component-helpers/auth/rbac/validation"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"
)

func TestObjects(t *testing.T) {
	roles, bindings := rbacbootstrap.Roles(), rbacbootstrap.Bindings()
	var names []string
	byName := map[string]*rbacv1.ClusterRole{}
	for _, r := range roles {
		names = append(names, r.Name)
		byName[r.Name] = r
		checkMeta(t, r.Name, r.Labels, r.Annotations)
		if (r.AggregationRule != nil) && len(r.Rules) > 0 {
			t.Errorf("%s: aggregated with rules of its own", r.Name)
		}
		for _, rule := range r.Rules {
			if len(rule.Verbs) == 0 || (len(rule.Resources) == 0) == (len(rule.NonResourceURLs) == 0) ||
				(len(rule.Resources) > 0 && len(rule.APIGroups) == 0) || (len(rule.NonResourceURLs) > 0 && len(rule.APIGroups) > 0) {
				t.Errorf("%s: invalid rule %v", r.Name, rule)
			}
			for _, l := range [][]string{rule.Verbs, rule.APIGroups, rule.Resources, rule.ResourceNames, rule.NonResourceURLs} {
				if !sort.StringsAreSorted(l) {
					t.Errorf("%s: %v is not sorted as upstream's rule builder sorts", r.Name, l)
				}
			}
		}
	}
	if !sort.StringsAreSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("role names not sorted and unique: %v", names)
	}
	for _, want := range []string{"cluster-admin", "admin", "edit", "view", "system:aggregate-to-admin", "system:aggregate-to-edit",
		"system:aggregate-to-view", "system:basic-user", "system:discovery", "system:public-info-viewer", "system:monitoring",
		"system:auth-delegator", "system:kube-scheduler", "system:kube-controller-manager", "system:node", "system:kube-dns"} {
		if byName[want] == nil {
			t.Errorf("no ClusterRole %s", want)
		}
	}
	for role, label := range map[string]string{"edit": rbacbootstrap.AggregateToAdmin, "view": rbacbootstrap.AggregateToEdit,
		"system:aggregate-to-admin": rbacbootstrap.AggregateToAdmin, "system:aggregate-to-edit": rbacbootstrap.AggregateToEdit,
		"system:aggregate-to-view": rbacbootstrap.AggregateToView} {
		if byName[role].Labels[label] != "true" {
			t.Errorf("%s lacks %s=true", role, label)
		}
	}

	subjects := map[string][]rbacv1.Subject{}
	for _, b := range bindings {
		checkMeta(t, b.Name, b.Labels, b.Annotations)
		if b.RoleRef.APIGroup != rbacv1.GroupName || b.RoleRef.Kind != "ClusterRole" || byName[b.RoleRef.Name] == nil {
			t.Errorf("%s: bad roleRef %+v", b.Name, b.RoleRef)
		}
		subjects[b.Name] = b.Subjects
	}
	group := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	for name, want := range map[string][]rbacv1.Subject{
		"cluster-admin":             {group(user.SystemPrivilegedGroup)},
		"system:discovery":          {group(user.AllAuthenticated)},
		"system:basic-user":         {group(user.AllAuthenticated)},
		"system:public-info-viewer": {group(user.AllAuthenticated), group(user.AllUnauthenticated)},
		"system:monitoring":         {group(user.MonitoringGroup)},
		"system:kube-dns":           {{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "kube-dns"}},
		// Upstream binds system:node to no one: the Node authorizer
		// grants kubelets its rules.
		"system:node": nil,
	} {
		if !slices.Equal(subjects[name], want) {
			t.Errorf("binding %s: subjects %v, want %v", name, subjects[name], want)
		}
	}

	if _, ok := subjects["system:node"]; !ok {
		t.Error("no ClusterRoleBinding system:node")
	}
	// system:node grants what upstream's Node authorizer grants nodes
	// beyond their own objects (kube-apiserver creates it with NodeRules).
	if node := byName["system:node"]; node == nil || !rulesEqual(node.Rules, bootstrappolicy.NodeRules()) {
		t.Errorf("system:node rules differ from upstream's NodeRules")
	}

	// Each call gives new objects.
	roles[0].Rules = nil
	roles[0].Labels["x"] = "y"
	if again := rbacbootstrap.Roles(); again[0].Labels["x"] != "" || (again[0].Rules == nil && again[0].AggregationRule == nil) {
		t.Error("Roles shares objects between calls")
	}
}

func checkMeta(t *testing.T, name string, labels, annotations map[string]string) {
	t.Helper()
	if labels[rbacbootstrap.BootstrapLabel] != rbacbootstrap.BootstrapLabelValue {
		t.Errorf("%s: labels %v", name, labels)
	}
	if annotations[rbacbootstrap.AutoUpdateAnnotation] != "true" {
		t.Errorf("%s: annotations %v", name, annotations)
	}
}

// TestAggregatedRoles loads the defaults into the RBAC authorizer and
// checks what admin, edit and view grant once aggregated.
func TestAggregatedRoles(t *testing.T) {
	r := authz.NewRBAC()
	r.ReplaceClusterRoles(rbacbootstrap.Roles())
	r.ReplaceClusterRoleBindings(rbacbootstrap.Bindings())
	rules := func(name string) []rbacv1.PolicyRule {
		rs, ok := r.ClusterRoleRules(name)
		if !ok || len(rs) == 0 {
			t.Fatalf("%s grants nothing", name)
		}
		return rs
	}
	admin, edit, view := rules("admin"), rules("edit"), rules("view")
	for _, c := range []struct {
		owner, servant string
		o, s           []rbacv1.PolicyRule
		covers         bool
	}{
		{"admin", "edit", admin, edit, true}, {"edit", "view", edit, view, true},
		{"edit", "admin", edit, admin, false}, {"view", "edit", view, edit, false},
		{"cluster-admin", "admin", rules("cluster-admin"), admin, true},
	} {
		if got, _ := validation.Covers(c.o, c.s); got != c.covers {
			t.Errorf("%s covers %s: %v, want %v", c.owner, c.servant, got, c.covers)
		}
	}
	ns := func(u, verb, group, resource, sub string) authz.Attributes {
		return authz.Attributes{User: &user.DefaultInfo{Name: u}, IsResourceRequest: true, Verb: verb, APIGroup: group,
			Resource: resource, Subresource: sub, Namespace: "n", Name: "x"}
	}
	for _, c := range []struct {
		role  string
		a     authz.Attributes
		allow bool
	}{
		{"view", ns("v", "get", "", "pods", "log"), true},
		{"view", ns("v", "list", "discovery.k8s.io", "endpointslices", ""), true},
		{"view", ns("v", "get", "", "secrets", ""), false},
		{"view", ns("v", "create", "", "pods", "exec"), false},
		{"edit", ns("e", "get", "", "secrets", ""), true},
		{"edit", ns("e", "create", "", "pods", "exec"), true},
		{"edit", ns("e", "patch", "apps", "deployments", "scale"), true},
		{"edit", ns("e", "create", "rbac.authorization.k8s.io", "rolebindings", ""), false},
		{"admin", ns("a", "create", "rbac.authorization.k8s.io", "rolebindings", ""), true},
		{"admin", ns("a", "create", "authorization.k8s.io", "localsubjectaccessreviews", ""), true},
		{"admin", ns("a", "update", "", "resourcequotas", ""), false},
	} {
		var rs []rbacv1.PolicyRule
		switch c.role {
		case "view":
			rs = view
		case "edit":
			rs = edit
		case "admin":
			rs = admin
		}
		allowed := false
		for i := range rs {
			allowed = allowed || authz.RuleAllows(&c.a, &rs[i])
		}
		if allowed != c.allow {
			t.Errorf("%s: %s %s/%s: %v, want %v", c.role, c.a.Verb, c.a.Resource, c.a.Subresource, allowed, c.allow)
		}
	}

	// The default bindings: discovery for everyone signed in, public
	// information for anyone, everything for system:masters.
	a, err := authz.New(authz.Config{}, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u     user.Info
		path  string
		allow bool
	}{
		{&user.DefaultInfo{Name: "u", Groups: []string{user.AllAuthenticated}}, "/apis/apps/v1", true},
		{&user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, "/apis/apps/v1", false},
		{&user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, "/version", true},
		{&user.DefaultInfo{Name: "m", Groups: []string{user.MonitoringGroup}}, "/metrics", true},
		{&user.DefaultInfo{Name: "u", Groups: []string{user.AllAuthenticated}}, "/metrics", false},
	} {
		d, _ := r.Authorize(authz.Attributes{User: c.u, Verb: "get", Path: c.path})
		if (d == authz.Allow) != c.allow {
			t.Errorf("%s GET %s: %v", c.u.GetName(), c.path, d)
		}
	}
	root := &user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}
	for _, z := range []authz.Authorizer{r, a} {
		if d, _ := z.Authorize(authz.Attributes{User: root, IsResourceRequest: true, Verb: "delete", Resource: "nodes", Name: "n"}); d != authz.Allow {
			t.Errorf("system:masters: %v", d)
		}
	}
}

func rulesEqual(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool {
		return slices.Equal(x.Verbs, y.Verbs) && slices.Equal(x.APIGroups, y.APIGroups) && slices.Equal(x.Resources, y.Resources) &&
			slices.Equal(x.ResourceNames, y.ResourceNames) && slices.Equal(x.NonResourceURLs, y.NonResourceURLs)
	})
}
