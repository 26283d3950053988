package defaults

import (
	rbacv1 "k8s.io/api/rbac/v1"
)

func roleRef(r *rbacv1.RoleRef) {
	if r.APIGroup == "" {
		r.APIGroup = rbacv1.GroupName
	}
}

// subjects sets the API group of User and Group subjects; that of a
// ServiceAccount is the core group, "".
func subjects(list []rbacv1.Subject) {
	for i := range list {
		s := &list[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}
