package chain

import (
	"context"
	"errors"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"

	adm "github.com/kgate/kgate/gateway/internal/admission"
	"github.com/kgate/kgate/gateway/internal/apierror"
	"github.com/kgate/kgate/gateway/internal/authz"
	"github.com/kgate/kgate/gateway/internal/bootstrap"
	"github.com/kgate/kgate/storage"
	"github.com/kgate/kgate/storage/registry"
)

// builtin is the gateway's own plugin: RBAC escalation prevention, and
// the "default" ServiceAccount of each new namespace
// (kube-controller-manager's job upstream; kgate has no controller
// manager). Pods get their ServiceAccount from upstream's plugin.
type builtin struct {
	esc   *authz.Escalation
	store *storage.Store
	reg   *registry.Registry
	log   *slog.Logger
}

// Admit implements adm.Mutator.
func (b builtin) Admit(_ context.Context, at *adm.Attributes) error {
	obj, old, u, res := at.Object, at.OldObject, at.User, at.Resource
	if at.Operation == adm.Delete {
		return nil
	}
	switch obj.(type) {
	case *rbacv1.Role, *rbacv1.ClusterRole, *rbacv1.RoleBinding, *rbacv1.ClusterRoleBinding:
		if old != nil && onlyGCFields(obj, old) {
			return nil
		}
		return b.escalation(u, res, obj, old)
	}
	return nil
}

// Finish implements adm.Finisher: a new namespace gets its "default"
// ServiceAccount.
func (b builtin) Finish(ctx context.Context, at *adm.Attributes, stored runtime.Object, err error) {
	ns, ok := stored.(*corev1.Namespace)
	if err != nil || !ok || at.Operation != adm.Create {
		return
	}
	if err := bootstrap.EnsureServiceAccount(ctx, b.store, b.reg, ns.Name); err != nil {
		b.log.Warn("cannot create the default service account", "namespace", ns.Name, "err", err)
	}
}

// escalation is kube-apiserver's policy-based storage of roles and
// bindings: a write may grant only what its author holds, unless the
// author may "escalate" (roles) or "bind" (bindings).
func (b builtin) escalation(u user.Info, res *registry.Resource, obj, old runtime.Object) error {
	e := b.esc
	gr := res.GVR().GroupResource()
	var err error
	var name string
	switch o := obj.(type) {
	case *rbacv1.Role:
		name = o.Name
		err = e.CheckRoleEscalation(u, o.Namespace, o.Name, o.Rules)
	case *rbacv1.ClusterRole:
		name = o.Name
		err = e.CheckRoleEscalation(u, "", o.Name, o.Rules)
		if prev, _ := old.(*rbacv1.ClusterRole); err == nil && (o.AggregationRule != nil || (prev != nil && prev.AggregationRule != nil)) {
			err = e.CheckAggregationRule(u, o.Name)
		}
	case *rbacv1.RoleBinding:
		name = o.Name
		err = e.CheckBindingAllowed(u, o.Namespace, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		name = o.Name
		err = e.CheckBindingAllowed(u, "", o.RoleRef)
	}
	var nf *authz.NotFoundError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nf):
		// The role a binding refers to does not exist: upstream's lister
		// NotFound.
		resource := "clusterrole"
		if nf.Kind == "Role" {
			resource = "role"
		}
		return apierror.NotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, nf.Name)
	case errors.Is(err, authz.ErrRoleRefKind):
		return apierror.BadRequest(err.Error())
	}
	return apierror.Forbidden(gr, name, err)
}

// onlyGCFields is upstream's IsOnlyMutatingGCFields: an update that
// changes only owner references and finalizers is not checked.
func onlyGCFields(obj, old runtime.Object) bool {
	cp := obj.DeepCopyObject()
	m, err1 := metaOf(cp)
	om, err2 := metaOf(old)
	if err1 != nil || err2 != nil {
		return false
	}
	m.OwnerReferences, m.Finalizers, m.ManagedFields = om.OwnerReferences, om.Finalizers, om.ManagedFields
	m.ResourceVersion, m.Generation = om.ResourceVersion, om.Generation
	return equality.Semantic.DeepEqual(cp, old)
}

func metaOf(obj runtime.Object) (*metav1.ObjectMeta, error) {
	switch o := obj.(type) {
	case *rbacv1.Role:
		return &o.ObjectMeta, nil
	case *rbacv1.ClusterRole:
		return &o.ObjectMeta, nil
	case *rbacv1.RoleBinding:
		return &o.ObjectMeta, nil
	case *rbacv1.ClusterRoleBinding:
		return &o.ObjectMeta, nil
	}
	return nil, errors.New("not an RBAC object")
}
