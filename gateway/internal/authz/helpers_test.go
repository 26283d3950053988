package authz

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"
)

func list(s ...string) []string { return s }

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func cRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggRole(name string, labels map[string]string, sels ...metav1.LabelSelector) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: sels}}
}

func matchLabels(kv ...string) metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

func roleBinding(ns, name, kind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName}, Subjects: subjects}
}

func clusterRoleBinding(name, roleName string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}, Subjects: subjects}
}

func userSubj(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func groupSubj(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func saSubj(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func usr(name string, groups ...string) user.Info {
	return &user.DefaultInfo{Name: name, Groups: groups}
}

// saUser is a service account as the service-account authenticator
// presents it.
func saUser(ns, name string) user.Info {
	return &user.DefaultInfo{Name: serviceaccount.MakeUsername(ns, name),
		Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}
}

// fixture is a fixed policy: the bootstrap defaults plus roles and
// bindings that exercise every rule of the matcher.
func fixture() []any {
	var objs []any
	for _, c := range rbacbootstrap.Roles() {
		objs = append(objs, c)
	}
	for _, b := range rbacbootstrap.Bindings() {
		objs = append(objs, b)
	}
	read := list("get", "list", "watch")
	objs = append(objs,
		// Cluster roles.
		cRole("pod-logs", nil, rule(list("get"), list(""), list("pods/log", "pods"))),
		cRole("status-writer", nil, rule(list("update", "patch"), list("*"), list("*/status"))),
		cRole("cm-named", nil, rule(list("get", "update", "delete"), list(""), list("configmaps"), "cm1", "cm2")),
		cRole("apps-all", nil, rule(list("*"), list("apps"), list("*"))),
		cRole("nonres", nil,
			urlRule(list("get"), "/healthz", "/logs/*", "/metrics"),
			urlRule(list("post"), "/apis/custom.io/*"),
			urlRule(list("*"), "/debug**")),
		cRole("secret-names", nil,
			rule(list("get", "list"), list(""), list("secrets"), "s1"),
			rule(list("create"), list(""), list("secrets"), "")),
		aggRole("agg-team", nil,
			matchLabels("team", "x"),
			metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: list("gold", "silver")}}}),
		cRole("team-a", map[string]string{"team": "x"}, rule(list("list", "watch"), list(""), list("secrets"))),
		cRole("team-b", map[string]string{"tier": "gold"}, rule(list("get"), list("apps"), list("deployments"), "web")),
		aggRole("agg-nested", map[string]string{"team": "x"}, matchLabels("nested", "1")),
		cRole("nested-leaf", map[string]string{"nested": "1"}, rule(list("create"), list("batch"), list("jobs"))),
		aggRole("cycle-1", map[string]string{"cyc": "1"}, matchLabels("cyc", "2")),
		aggRole("cycle-2", map[string]string{"cyc": "2"}, matchLabels("cyc", "1")),
		cRole("cycle-leaf", map[string]string{"cyc": "1"}, rule(list("delete"), list("coordination.k8s.io"), list("leases"))),
		cRole("near-misses", nil, rule(list("get", "update"), list("*"), list("pods/xlog", "deployments/rescale", "*/xscale", "*/log/x", "pod", "pods/"))),
		cRole("not-a-member", map[string]string{"team": "y"}, rule(list("*"), list("*"), list("*"))),

		// Namespaced roles.
		role("a", "pod-reader", rule(read, list(""), list("pods"))),
		role("a", "cm-one", rule(list("get", "update"), list(""), list("configmaps"), "cm1")),
		role("b", "sa-tokens", rule(list("create"), list(""), list("serviceaccounts/token"))),
		role("b", "wild-sub", rule(list("get", "update"), list("*"), list("*/scale"))),
		role("c", "everything", rule(list("*"), list("*"), list("*"))),

		// Role bindings.
		roleBinding("a", "view-alice", "ClusterRole", "view", userSubj("alice")),
		roleBinding("a", "pods-builder", "Role", "pod-reader", saSubj("", "builder")),
		roleBinding("a", "cm-devs", "Role", "cm-one", groupSubj("devs")),
		roleBinding("a", "secret-names-erin", "ClusterRole", "secret-names", userSubj("erin")),
		roleBinding("a", "agg-frank", "ClusterRole", "agg-team", userSubj("frank")),
		roleBinding("b", "edit-bob", "ClusterRole", "edit", userSubj("bob"), groupSubj("qa")),
		roleBinding("b", "tokens", "Role", "sa-tokens", saSubj("a", "builder")),
		roleBinding("b", "scale-sas", "Role", "wild-sub", groupSubj("system:serviceaccounts:b")),
		roleBinding("b", "cross-role", "Role", "pod-reader", userSubj("alice")), // Role of namespace a: not found in b
		roleBinding("c", "all-carol", "Role", "everything", userSubj("carol")),
		roleBinding("c", "missing", "Role", "nope", userSubj("dave")),
		roleBinding("c", "badkind", "Thing", "everything", userSubj("dave")),
		roleBinding("c", "view-sas", "ClusterRole", "view", groupSubj("system:serviceaccounts")),
		roleBinding("kube-system", "ctrl-admin", "ClusterRole", "admin", saSubj("", "ctrl")),

		// Cluster role bindings.
		clusterRoleBinding("status-devs", "status-writer", groupSubj("devs")),
		clusterRoleBinding("logs-erin", "pod-logs", userSubj("erin")),
		clusterRoleBinding("nonres-mon", "nonres", groupSubj("monitors"), userSubj("grace")),
		clusterRoleBinding("apps-deployer", "apps-all", saSubj("kube-system", "deployer")),
		clusterRoleBinding("sa-no-ns", "view", saSubj("", "orphan")),
		clusterRoleBinding("agg-ctrl", "agg-team", saSubj("kube-system", "ctrl")),
		clusterRoleBinding("cycles", "cycle-1", userSubj("henry")),
		clusterRoleBinding("ghost", "ghost-role", groupSubj("devs")),
		clusterRoleBinding("near-misses", "near-misses", groupSubj("devs"), userSubj("erin")),
	)
	return objs
}

func fixtureUsers() []user.Info {
	return []user.Info{
		usr("alice", user.AllAuthenticated),
		usr("bob", "qa", user.AllAuthenticated),
		usr("carol", user.AllAuthenticated),
		usr("dave", "devs", user.AllAuthenticated),
		usr("erin", user.AllAuthenticated),
		usr("frank"),
		usr("grace"),
		usr("henry", "monitors"),
		usr("root", user.SystemPrivilegedGroup, user.AllAuthenticated),
		usr(user.Anonymous, user.AllUnauthenticated),
		usr(user.KubeScheduler, user.AllAuthenticated),
		usr("nobody"),
		saUser("a", "builder"),
		saUser("b", "worker"),
		saUser("kube-system", "ctrl"),
		saUser("kube-system", "deployer"),
		saUser("x", "orphan"),
	}
}

func load(objs []any) (*RBAC, *reference) {
	r, ref := NewRBAC(), newReference()
	for _, o := range objs {
		if err := r.Upsert(o.(runtime.Object)); err != nil {
			panic(err)
		}
		ref.upsert(o)
	}
	return r, ref
}
