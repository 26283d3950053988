package rbacbootstrap

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// ControllerRoles returns kube-controller-manager's per-controller
// ClusterRoles (system:controller:*), taken from upstream's bootstrap
// policy with its labels and autoupdate annotation. Without them a
// kube-controller-manager run with --use-service-account-credentials (as
// kubeadm runs it) is refused everything: each controller then talks to
// the API as its own ServiceAccount in kube-system.
func ControllerRoles() []*rbacv1.ClusterRole {
	var roles []*rbacv1.ClusterRole
	for _, r := range bootstrappolicy.ControllerRoles() {
		roles = append(roles, r.DeepCopy())
	}
	return roles
}

// ControllerBindings binds each controller role to its ServiceAccount in
// kube-system, as upstream's bootstrap policy does.
func ControllerBindings() []*rbacv1.ClusterRoleBinding {
	var bindings []*rbacv1.ClusterRoleBinding
	for _, b := range bootstrappolicy.ControllerRoleBindings() {
		bindings = append(bindings, b.DeepCopy())
	}
	return bindings
}

// NamespaceRoles returns the Roles kube-apiserver creates in the system
// namespaces (the leader-locking roles of kube-controller-manager and
// kube-scheduler, extension-apiserver-authentication-reader, the bootstrap
// signer's and token cleaner's), from upstream's bootstrap policy.
func NamespaceRoles() []*rbacv1.Role {
	var roles []*rbacv1.Role
	for ns, rs := range bootstrappolicy.NamespaceRoles() {
		for _, r := range rs {
			r := r.DeepCopy()
			r.Namespace = ns
			roles = append(roles, r)
		}
	}
	sort.Slice(roles, func(i, j int) bool {
		return roles[i].Namespace+"/"+roles[i].Name < roles[j].Namespace+"/"+roles[j].Name
	})
	return roles
}

// NamespaceRoleBindings binds the NamespaceRoles, from upstream's bootstrap
// policy.
func NamespaceRoleBindings() []*rbacv1.RoleBinding {
	var bindings []*rbacv1.RoleBinding
	for ns, bs := range bootstrappolicy.NamespaceRoleBindings() {
		for _, b := range bs {
			b := b.DeepCopy()
			b.Namespace = ns
			bindings = append(bindings, b)
		}
	}
	sort.Slice(bindings, func(i, j int) bool {
		return bindings[i].Namespace+"/"+bindings[i].Name < bindings[j].Namespace+"/"+bindings[j].Name
	})
	return bindings
}
