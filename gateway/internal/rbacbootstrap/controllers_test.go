package rbacbootstrap_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"
)

// TestControllerPolicy loads the defaults with the controller and
// namespace policy into the RBAC authorizer and checks what
// kube-controller-manager's controllers, each as its ServiceAccount
// (--use-service-account-credentials), and the leader-elected components
// may do.
func TestControllerPolicy(t *testing.T) {
	r := authz.NewRBAC()
	r.ReplaceClusterRoles(append(rbacbootstrap.Roles(), rbacbootstrap.ControllerRoles()...))
	r.ReplaceClusterRoleBindings(append(rbacbootstrap.Bindings(), rbacbootstrap.ControllerBindings()...))
	r.ReplaceRoles(rbacbootstrap.NamespaceRoles())
	r.ReplaceRoleBindings(rbacbootstrap.NamespaceRoleBindings())
	sa := func(name string) *user.DefaultInfo {
		return &user.DefaultInfo{Name: serviceaccount.MakeUsername(metav1.NamespaceSystem, name),
			Groups: append(serviceaccount.MakeGroupNames(metav1.NamespaceSystem), user.AllAuthenticated)}
	}
	for _, c := range []struct {
		who                                 *user.DefaultInfo
		verb, group, resource, sub, ns, obj string
		allow                               bool
	}{
		{sa("deployment-controller"), "create", "apps", "replicasets", "", "n", "", true},
		{sa("deployment-controller"), "update", "apps", "deployments", "status", "n", "d", true},
		{sa("replicaset-controller"), "create", "", "pods", "", "n", "", true},
		{sa("replicaset-controller"), "create", "", "secrets", "", "n", "", false},
		{sa("job-controller"), "update", "batch", "jobs", "status", "n", "j", true},
		{sa("cronjob-controller"), "create", "batch", "jobs", "", "n", "", true},
		{sa("namespace-controller"), "deletecollection", "apps", "deployments", "", "n", "", true},
		{sa("namespace-controller"), "update", "", "namespaces", "finalize", "", "n", true},
		{sa("generic-garbage-collector"), "delete", "", "pods", "", "n", "p", true},
		{sa("disruption-controller"), "update", "policy", "poddisruptionbudgets", "status", "n", "p", true},
		{sa("certificate-controller"), "update", "certificates.k8s.io", "certificatesigningrequests", "status", "", "c", true},
		{sa("node-controller"), "delete", "", "pods", "", "n", "p", true},
		{sa("root-ca-cert-publisher"), "create", "", "configmaps", "", "n", "", true},
		{sa("service-account-controller"), "create", "", "serviceaccounts", "", "n", "", true},
		{sa("endpointslice-controller"), "create", "discovery.k8s.io", "endpointslices", "", "n", "", true},
		{sa("ttl-controller"), "delete", "", "nodes", "", "", "x", false},
		// The namespace policy: the bootstrap signer in kube-public.
		{sa("bootstrap-signer"), "update", "", "configmaps", "", metav1.NamespacePublic, "cluster-info", true},
		{sa("bootstrap-signer"), "update", "", "configmaps", "", metav1.NamespaceDefault, "cluster-info", false},
	} {
		a := authz.Attributes{User: c.who, IsResourceRequest: true, Verb: c.verb, APIGroup: c.group,
			Resource: c.resource, Subresource: c.sub, Namespace: c.ns, Name: c.obj}
		d, reason := r.Authorize(a)
		if (d == authz.Allow) != c.allow {
			t.Errorf("%s %s %s/%s in %q: %v (%s), want allowed=%v", c.who.Name, c.verb, c.resource, c.sub, c.ns, d, reason, c.allow)
		}
	}
	for _, role := range rbacbootstrap.ControllerRoles() {
		checkMeta(t, role.Name, role.Labels, role.Annotations)
	}
	for _, b := range rbacbootstrap.NamespaceRoleBindings() {
		if b.Namespace == "" {
			t.Errorf("namespace role binding %s has no namespace", b.Name)
		}
	}
}
