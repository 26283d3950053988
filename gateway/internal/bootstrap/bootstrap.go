// Package bootstrap creates the objects every cluster has from its first
// start, as kube-apiserver's bootstrap controllers do: the system
// namespaces, the system priority classes (system-node-critical,
// system-cluster-critical, upstream's scheduling post-start hook) and the
// default RBAC policy (ClusterRoles and ClusterRoleBindings of
// gateway/internal/rbacbootstrap, with kube-controller-manager's
// per-controller roles and the Roles and RoleBindings of the system
// namespaces), plus the
// "default" ServiceAccount of each system namespace, which
// kube-controller-manager creates upstream. Every gateway runs it;
// creating what exists is harmless. Defaults that exist are left as they
// are: kube-apiserver's reconciliation of changed defaults (the autoupdate
// annotation) is not done.
package bootstrap

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedulingapiv1 "k8s.io/kubernetes/pkg/apis/scheduling/v1"

	"github.com/kgate/kgate/gateway/internal/builtin"
	"github.com/kgate/kgate/gateway/internal/rbacbootstrap"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// SystemNamespaces are the namespaces kube-apiserver creates.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// DefaultServiceAccount is the ServiceAccount every namespace has, and
// the one pods run as unless they name another.
const DefaultServiceAccount = "default"

type creator interface {
	Create(ctx context.Context, res *registry.Resource, obj runtime.Object) (runtime.Object, error)
}

// Semantics is upstream's create semantics of the built-in resources
// (builtin.Semantics): what kube-apiserver's strategies set on an object
// created through the API, as its bootstrap controllers create them (a
// namespace's finalizer and phase, ...).
type Semantics interface {
	Create(ctx context.Context, res *registry.Resource, subresource string, obj runtime.Object) (builtin.Result, error)
}

// Ensure creates the system namespaces, their default ServiceAccounts,
// the system priority classes and the default ClusterRoles and
// ClusterRoleBindings that do not exist.
func Ensure(ctx context.Context, store creator, reg *registry.Registry, sem Semantics) error {
	for _, name := range SystemNamespaces {
		if err := create(ctx, store, reg, sem, corev1.SchemeGroupVersion.WithResource("namespaces"),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("cannot create namespace %s: %w", name, err)
		}
		if err := EnsureServiceAccount(ctx, store, reg, name); err != nil {
			return err
		}
	}
	for _, pc := range schedulingapiv1.SystemPriorityClasses() {
		if err := create(ctx, store, reg, sem, schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), pc.DeepCopy()); err != nil {
			return fmt.Errorf("cannot create priorityclass %s: %w", pc.Name, err)
		}
	}
	for _, r := range rbacbootstrap.Roles() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("clusterroles"), r); err != nil {
			return fmt.Errorf("cannot create clusterrole %s: %w", r.Name, err)
		}
	}
	for _, b := range rbacbootstrap.Bindings() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), b); err != nil {
			return fmt.Errorf("cannot create clusterrolebinding %s: %w", b.Name, err)
		}
	}
	return ensureControllerPolicy(ctx, store, reg, sem)
}

// ensureControllerPolicy creates upstream's per-controller ClusterRoles
// and bindings and the Roles of the system namespaces
// (rbacbootstrap.ControllerRoles, NamespaceRoles).
func ensureControllerPolicy(ctx context.Context, store creator, reg *registry.Registry, sem Semantics) error {
	for _, r := range rbacbootstrap.ControllerRoles() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("clusterroles"), r); err != nil {
			return fmt.Errorf("cannot create clusterrole %s: %w", r.Name, err)
		}
	}
	for _, b := range rbacbootstrap.ControllerBindings() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), b); err != nil {
			return fmt.Errorf("cannot create clusterrolebinding %s: %w", b.Name, err)
		}
	}
	for _, r := range rbacbootstrap.NamespaceRoles() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("roles"), r); err != nil {
			return fmt.Errorf("cannot create role %s/%s: %w", r.Namespace, r.Name, err)
		}
	}
	for _, b := range rbacbootstrap.NamespaceRoleBindings() {
		if err := create(ctx, store, reg, sem, rbacv1.SchemeGroupVersion.WithResource("rolebindings"), b); err != nil {
			return fmt.Errorf("cannot create rolebinding %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// EnsureServiceAccount creates the "default" ServiceAccount of namespace
// unless it exists. (A ServiceAccount of only a name is one upstream's
// strategy leaves as it is: none is run.)
func EnsureServiceAccount(ctx context.Context, store creator, reg *registry.Registry, namespace string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: DefaultServiceAccount}}
	if err := create(ctx, store, reg, nil, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), sa); err != nil {
		return fmt.Errorf("cannot create service account %s/%s: %w", namespace, DefaultServiceAccount, err)
	}
	return nil
}

// create creates obj, prepared by sem (unless nil), unless an object of
// its name exists.
func create(ctx context.Context, store creator, reg *registry.Registry, sem Semantics, gvr schema.GroupVersionResource, obj runtime.Object) error {
	res, ok := reg.Lookup(gvr)
	if !ok {
		return fmt.Errorf("%v is not registered", gvr)
	}
	if sem != nil {
		got, err := sem.Create(ctx, res, "", obj)
		if err != nil {
			return err
		}
		if len(got.Errors) > 0 {
			return fmt.Errorf("cannot create an invalid %s: %w", res.Kind, got.Errors.ToAggregate())
		}
		obj = got.Object
	}
	if _, err := store.Create(ctx, res, obj); err != nil && !errors.Is(err, storage.ErrAlreadyExists) {
		return err
	}
	return nil
}
