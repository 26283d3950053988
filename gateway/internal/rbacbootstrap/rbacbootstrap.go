// Package rbacbootstrap holds the default ClusterRoles and
// ClusterRoleBindings kube-apiserver creates at its first start (its RBAC
// bootstrap policy, k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/
// bootstrappolicy, with the default feature gates): cluster-admin, the
// user-facing admin, edit and view with the aggregate-to-* roles that fill
// them, the discovery and self-review roles every user has, monitoring,
// auth delegation, and the roles of the control-plane components that talk
// to the API (kube-scheduler, kube-controller-manager, kube-proxy, nodes,
// kube-dns). The per-controller roles (system:controller:*) and the Roles
// of the system namespaces are upstream's own objects (controllers.go).
package rbacbootstrap

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

const (
	// AutoUpdateAnnotation marks the defaults kube-apiserver reconciles at
	// each start; set it to "false" on an object to keep local changes.
	AutoUpdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"
	// BootstrapLabel and BootstrapLabelValue label every default.
	BootstrapLabel      = "kubernetes.io/bootstrapping"
	BootstrapLabelValue = "rbac-defaults"

	// ClusterRoles labelled with these (value "true") add their rules to
	// admin, edit and view.
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = append(append([]string{}, read...), write...)
)

const (
	core           = ""
	apps           = "apps"
	authentication = "authentication.k8s.io"
	authorization  = "authorization.k8s.io"
	autoscaling    = "autoscaling"
	batch          = "batch"
	certificates   = "certificates.k8s.io"
	coordination   = "coordination.k8s.io"
	discovery      = "discovery.k8s.io"
	events         = "events.k8s.io"
	extensions     = "extensions"
	networking     = "networking.k8s.io"
	node           = "node.k8s.io"
	policy         = "policy"
	rbac           = rbacv1.GroupName
	resource       = "resource.k8s.io"
	storage        = "storage.k8s.io"
)

// Roles returns the default ClusterRoles, sorted by name. Each call
// returns new objects.
func Roles() []*rbacv1.ClusterRole {
	roles := []*rbacv1.ClusterRole{
		{
			// Everything, everywhere.
			ObjectMeta: meta("cluster-admin", nil),
			Rules: rules(
				newRule("*").groups("*").resources("*"),
				newRule("*").urls("*"),
			),
		},
		aggregated("admin", nil, AggregateToAdmin),
		aggregated("edit", map[string]string{AggregateToAdmin: "true"}, AggregateToEdit),
		aggregated("view", map[string]string{AggregateToEdit: "true"}, AggregateToView),
		{
			ObjectMeta: meta("system:aggregate-to-admin", map[string]string{AggregateToAdmin: "true"}),
			Rules: rules(
				newRule("create").groups(authorization).resources("localsubjectaccessreviews"),
				newRule(readWrite...).groups(rbac).resources("roles", "rolebindings"),
			),
		},
		{
			ObjectMeta: meta("system:aggregate-to-edit", map[string]string{AggregateToEdit: "true"}),
			Rules: rules(
				// Reading these can escalate (exec, secrets), so view lacks them.
				newRule(read...).groups(core).resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"),
				newRule("impersonate").groups(core).resources("serviceaccounts"),
				newRule(write...).groups(core).resources("pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
				newRule("create").groups(core).resources("pods/eviction"),
				newRule(write...).groups(core).resources("replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
					"services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events"),
				newRule("create").groups(core).resources("serviceaccounts/token"),
				newRule(write...).groups(apps).resources("statefulsets", "statefulsets/scale", "daemonsets", "deployments",
					"deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"),
				newRule(write...).groups(autoscaling).resources("horizontalpodautoscalers"),
				newRule(write...).groups(batch).resources("jobs", "cronjobs"),
				newRule(write...).groups(extensions).resources("daemonsets", "deployments", "deployments/scale", "deployments/rollback",
					"ingresses", "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies"),
				newRule(write...).groups(policy).resources("poddisruptionbudgets"),
				newRule(write...).groups(networking).resources("networkpolicies", "ingresses"),
				newRule(readWrite...).groups(coordination).resources("leases"),
				newRule(write...).groups(resource).resources("resourceclaims", "resourceclaimtemplates"),
			),
		},
		{
			ObjectMeta: meta("system:aggregate-to-view", map[string]string{AggregateToView: "true"}),
			Rules: rules(
				newRule(read...).groups(core).resources("pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
					"services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"),
				newRule(read...).groups(core).resources("limitranges", "resourcequotas", "bindings", "events",
					"pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"),
				// Reading namespaces at namespace scope means reading this one.
				newRule(read...).groups(core).resources("namespaces"),
				newRule(read...).groups(discovery).resources("endpointslices"),
				newRule(read...).groups(apps).resources("controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale",
					"daemonsets", "daemonsets/status", "deployments", "deployments/status", "deployments/scale",
					"replicasets", "replicasets/status", "replicasets/scale"),
				newRule(read...).groups(autoscaling).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
				newRule(read...).groups(batch).resources("jobs", "cronjobs", "cronjobs/status", "jobs/status"),
				newRule(read...).groups(extensions).resources("daemonsets", "daemonsets/status", "deployments", "deployments/scale",
					"deployments/status", "ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
					"replicationcontrollers/scale", "networkpolicies"),
				newRule(read...).groups(policy).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
				newRule(read...).groups(networking).resources("ingresses", "ingresses/status", "networkpolicies"),
				newRule(read...).groups(resource).resources("resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
			),
		},
		{
			// What every user may ask about itself.
			ObjectMeta: meta("system:basic-user", nil),
			Rules: rules(
				newRule("create").groups(authorization).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
				newRule("create").groups(authentication).resources("selfsubjectreviews"),
			),
		},
		{
			// Enough to negotiate API versions.
			ObjectMeta: meta("system:discovery", nil),
			Rules: rules(
				newRule("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/",
					"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*"),
			),
		},
		{
			// What even anonymous users may read.
			ObjectMeta: meta("system:public-info-viewer", nil),
			Rules: rules(
				newRule("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/"),
			),
		},
		{
			ObjectMeta: meta("system:monitoring", nil),
			Rules: rules(
				newRule("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz",
					"/livez/*", "/readyz/*", "/healthz/*"),
			),
		},
		{
			// Delegated authentication and authorization (extension API servers).
			ObjectMeta: meta("system:auth-delegator", nil),
			Rules: rules(
				newRule("create").groups(authentication).resources("tokenreviews"),
				newRule("create").groups(authorization).resources("subjectaccessreviews"),
			),
		},
		{
			ObjectMeta: meta("system:service-account-issuer-discovery", nil),
			Rules: rules(
				newRule("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/",
					"/openid/v1/jwks", "/openid/v1/jwks/"),
			),
		},
		{
			ObjectMeta: meta("system:kube-scheduler", nil),
			Rules: rules(
				eventsRule(),
				newRule("create").groups(coordination).resources("leases"),
				newRule("get", "update").groups(coordination).resources("leases").names("kube-scheduler"),
				newRule(read...).groups(core).resources("nodes"),
				newRule("get", "list", "watch", "delete").groups(core).resources("pods"),
				newRule("create").groups(core).resources("pods/binding", "bindings"),
				newRule("patch", "update").groups(core).resources("pods/status"),
				newRule(read...).groups(core).resources("replicationcontrollers", "services"),
				newRule(read...).groups(apps, extensions).resources("replicasets"),
				newRule(read...).groups(apps).resources("statefulsets"),
				newRule(read...).groups(policy).resources("poddisruptionbudgets"),
				newRule(read...).groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
				newRule("create").groups(authentication).resources("tokenreviews"),
				newRule("create").groups(authorization).resources("subjectaccessreviews"),
				newRule(read...).groups(storage).resources("csinodes"),
				newRule(read...).groups(core).resources("namespaces"),
				newRule(read...).groups(storage).resources("csidrivers"),
				newRule(read...).groups(storage).resources("csistoragecapacities"),
				// Dynamic resource allocation (GA, on by default).
				newRule(read...).groups(resource).resources("deviceclasses"),
				newRule(append([]string{"patch", "update"}, read...)...).groups(resource).resources("resourceclaims"),
				newRule(append([]string{"patch", "update"}, read...)...).groups(resource).resources("resourceclaims/status"),
				newRule(read...).groups(resource).resources("resourceslices"),
			),
		},
		{
			ObjectMeta: meta("system:volume-scheduler", nil),
			Rules: rules(
				newRule("get", "list", "watch", "patch", "update").groups(core).resources("persistentvolumes"),
				newRule(read...).groups(storage).resources("storageclasses"),
				newRule("get", "list", "watch", "patch", "update").groups(core).resources("persistentvolumeclaims"),
			),
		},
		{
			// Bootstraps kube-controller-manager: its controllers then use
			// their own service accounts.
			ObjectMeta: meta("system:kube-controller-manager", nil),
			Rules: rules(
				eventsRule(),
				newRule("create").groups(coordination).resources("leases"),
				newRule("get", "update").groups(coordination).resources("leases").names("kube-controller-manager"),
				newRule("create").groups(core).resources("secrets", "serviceaccounts"),
				newRule("delete").groups(core).resources("secrets"),
				newRule("get").groups(core).resources("namespaces", "secrets", "serviceaccounts", "configmaps"),
				newRule("update").groups(core).resources("secrets", "serviceaccounts"),
				newRule("create").groups(authentication).resources("tokenreviews"),
				newRule("create").groups(authorization).resources("subjectaccessreviews"),
				newRule("list", "watch").groups("*").resources("*"),
				newRule("create").groups(core).resources("serviceaccounts/token"),
			),
		},
		{
			ObjectMeta: meta("system:node-proxier", nil),
			Rules: rules(
				newRule("list", "watch").groups(core).resources("services", "endpoints"),
				newRule(read...).groups(core).resources("nodes"),
				eventsRule(),
				newRule("list", "watch").groups(networking).resources("servicecidrs"),
				newRule("list", "watch").groups(discovery).resources("endpointslices"),
			),
		},
		{
			// Kubelets: upstream's rules, which its Node authorizer (mode
			// Node) grants nodes; the role itself is bound to no one.
			ObjectMeta: meta("system:node", nil),
			Rules:      bootstrappolicy.NodeRules(),
		},
		{
			ObjectMeta: meta("system:kube-dns", nil),
			Rules: rules(
				newRule("list", "watch").groups(core).resources("endpoints", "services"),
			),
		},
	}
	sort.Slice(roles, func(i, j int) bool { return roles[i].Name < roles[j].Name })
	return roles
}

// Bindings returns the default ClusterRoleBindings, sorted by name. Each
// call returns new objects.
func Bindings() []*rbacv1.ClusterRoleBinding {
	bindings := []*rbacv1.ClusterRoleBinding{
		bind("cluster-admin", group(user.SystemPrivilegedGroup)),
		bind("system:monitoring", group(user.MonitoringGroup)),
		bind("system:discovery", group(user.AllAuthenticated)),
		bind("system:basic-user", group(user.AllAuthenticated)),
		bind("system:public-info-viewer", group(user.AllAuthenticated), group(user.AllUnauthenticated)),
		bind("system:service-account-issuer-discovery", group(serviceaccount.AllServiceAccountsGroup)),
		bind("system:kube-scheduler", userSubject(user.KubeScheduler)),
		bind("system:volume-scheduler", userSubject(user.KubeScheduler)),
		bind("system:kube-controller-manager", userSubject(user.KubeControllerManager)),
		bind("system:node-proxier", userSubject(user.KubeProxy)),
		// Upstream binds system:node to no one: the Node authorizer
		// grants kubelets their access.
		bind("system:node"),
		bind("system:kube-dns", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: "kube-dns"}),
	}
	sort.Slice(bindings, func(i, j int) bool { return bindings[i].Name < bindings[j].Name })
	return bindings
}

func meta(name string, labels map[string]string) metav1.ObjectMeta {
	l := map[string]string{BootstrapLabel: BootstrapLabelValue}
	for k, v := range labels {
		l[k] = v
	}
	return metav1.ObjectMeta{
		Name:        name,
		Labels:      l,
		Annotations: map[string]string{AutoUpdateAnnotation: "true"},
	}
}

// aggregated is a ClusterRole whose rules are those of the ClusterRoles
// labelled aggregateLabel=true.
func aggregated(name string, labels map[string]string, aggregateLabel string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: meta(name, labels),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{aggregateLabel: "true"}},
		}},
	}
}

func bind(role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta(role, nil),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func eventsRule() *ruleBuilder {
	return newRule("create", "update", "patch").groups(core, events).resources("events")
}

// ruleBuilder builds a PolicyRule with its lists sorted, as upstream's
// rule builder does.
type ruleBuilder struct{ r rbacv1.PolicyRule }

func newRule(verbs ...string) *ruleBuilder {
	return &ruleBuilder{r: rbacv1.PolicyRule{Verbs: append([]string(nil), verbs...)}}
}

func (b *ruleBuilder) groups(g ...string) *ruleBuilder {
	b.r.APIGroups = append(b.r.APIGroups, g...)
	return b
}

func (b *ruleBuilder) resources(r ...string) *ruleBuilder {
	b.r.Resources = append(b.r.Resources, r...)
	return b
}

func (b *ruleBuilder) names(n ...string) *ruleBuilder {
	b.r.ResourceNames = append(b.r.ResourceNames, n...)
	return b
}

func (b *ruleBuilder) urls(u ...string) *ruleBuilder {
	b.r.NonResourceURLs = append(b.r.NonResourceURLs, u...)
	return b
}

func rules(bs ...*ruleBuilder) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, len(bs))
	for i, b := range bs {
		r := b.r
		for _, s := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
			sort.Strings(s)
		}
		out[i] = r
	}
	return out
}
